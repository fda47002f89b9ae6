/**
 * The machine's own pauses over a window, measured apart from the processes
 * under test: a child process (./pause_probe_child.ts) that does nothing but
 * sleep 1 ms at a time counts the wake-ups that came {@linkcode PAUSE_MIN_MS}
 * or more late, and /proc/stat's steal time (CPU time the hypervisor gave to
 * others while this VM wanted it) is read at both ends of the window.
 *
 * On a busy VM the hypervisor can stop every vCPU for several milliseconds at
 * once; a server's event loop and this child then stall at the same instants,
 * so a count of pauses next to a latency's tail says how much of the tail the
 * machine accounts for. A late wake-up can also be the child waiting for a
 * CPU that the processes under test keep busy; the child's own run-queue
 * wait over the window (`queuedMs`) tells that part apart. The child costs a
 * wake-up a millisecond of CPU, a small load of its own on the machine it
 * measures.
 *
 * @module
 */

import { median } from "./report.ts";

const CHILD = new URL("./pause_probe_child.ts", import.meta.url).pathname;

/** How long the child may take to start its timer loop before `start()` gives up, ms. */
const START_TIMEOUT_MS = 30_000;

/** How long the child may take to exit once its stdin is closed before it is killed, ms. */
const STOP_TIMEOUT_MS = 10_000;

/** A wake-up at least this late (ms) counts as a pause. */
export const PAUSE_MIN_MS = 4;

/** What the machine did over one probe's window. */
export interface MachinePauses {
  /** From `start()` returning (the child's timer loop running) to `stop()`, ms. */
  windowMs: number;
  /** Wake-ups of the child at least {@linkcode PAUSE_MIN_MS} late. */
  pauses: number;
  /** Their oversleeps added up, ms. */
  pausedMs: number;
  /** The longest oversleep, ms (0 without a pause). */
  longestMs: number;
  /** Steal time of all CPUs over the window, ms (10 ms a tick); null where /proc/stat is missing. */
  stealMs: number | null;
  /**
   * How long the child was ready to run but waiting for a CPU over the window,
   * ms (its main thread's run_delay in /proc/PID/schedstat): the machine's
   * CPUs being busy rather than the VM being paused. It adds up every wait,
   * the short ones under the pause threshold too, so it bounds from above the
   * part of `pausedMs` that is contention. Null where schedstat is missing.
   */
  queuedMs: number | null;
}

/**
 * Total steal ticks of all CPUs so far: the 8th number of /proc/stat's `cpu`
 * line, in USER_HZ ticks (100 a second on Linux); null where there is no
 * /proc/stat.
 */
function stealTicks(): number | null {
  let text: string;
  try {
    text = Deno.readTextFileSync("/proc/stat");
  } catch (err) {
    // Not Linux (or no /proc): the steal figure is left out, the probe still runs.
    if (!(err instanceof Deno.errors.NotFound)) throw err;
    return null;
  }
  const line = text.split("\n").find((l) => l.startsWith("cpu "));
  const steal = Number(line?.trim().split(/\s+/)[8]);
  return Number.isFinite(steal) ? steal : null;
}

/** Nanoseconds `pid`'s main thread has waited on a run queue so far, or null without schedstat. */
function runDelayNs(pid: number): number | null {
  try {
    const delay = Number(Deno.readTextFileSync(`/proc/${pid}/task/${pid}/schedstat`).split(" ")[1]);
    return Number.isFinite(delay) ? delay : null;
  } catch {
    // No /proc, no schedstat in this kernel, or the child gone: the figure is left out.
    return null;
  }
}

/**
 * A running probe: {@linkcode PauseProbe.start} starts the window,
 * {@linkcode PauseProbe.stop} ends it, stops the child and gives what the
 * machine did. Disposing of it (`await using`) stops the child if `stop()`
 * was not called, so a benchmark that throws leaves no process behind.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { PauseProbe } from "./pause_probe.ts";
 * const probe = await PauseProbe.start();
 * await new Promise((r) => setTimeout(r, 50));
 * const m = await probe.stop();
 * ok(m.windowMs >= 50);
 * ok(m.pausedMs >= m.pauses * 4 && m.longestMs <= m.pausedMs);
 * ```
 */
export class PauseProbe {
  #child: Deno.ChildProcess;
  #out: Promise<string>;
  #t0: number;
  #steal0: number | null;
  #queued0: number | null;
  #stopped: Promise<MachinePauses> | null = null;

  private constructor(child: Deno.ChildProcess, out: Promise<string>) {
    this.#child = child;
    this.#out = out;
    this.#t0 = performance.now();
    this.#steal0 = stealTicks();
    this.#queued0 = runDelayNs(child.pid);
  }

  /** Spawns the child and returns once its timer loop runs (the window's start). */
  static async start(): Promise<PauseProbe> {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-config", CHILD, String(PAUSE_MIN_MS)],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    // One reader for all of stdout: the "ready" line, then the summary at the end.
    let text = "";
    let ready: () => void = () => {};
    const isReady = new Promise<void>((r) => (ready = r));
    const out = (async () => {
      for await (const c of child.stdout.pipeThrough(new TextDecoderStream())) {
        text += c;
        if (text.startsWith("ready\n")) ready();
      }
      return text;
    })();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const failed = new Promise<never>((_, reject) => {
      child.status.then((s) =>
        reject(new Error(`pause_probe_child.ts exited before it was ready (code ${s.code})`))
      );
      timer = setTimeout(
        () => reject(new Error(`pause_probe_child.ts not ready after ${START_TIMEOUT_MS} ms`)),
        START_TIMEOUT_MS,
      );
    });
    failed.catch(() => {});
    try {
      await Promise.race([isReady, failed]);
    } catch (err) {
      await child.stdin.close().catch(() => {});
      try {
        child.kill("SIGKILL");
      } catch { /* exited */ }
      await Promise.all([child.status, out.catch(() => {})]);
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return new PauseProbe(child, out);
  }

  /** Ends the window: closes the child's stdin, waits for its summary and its exit. */
  stop(): Promise<MachinePauses> {
    this.#stopped ??= this.#stop();
    return this.#stopped;
  }

  async #stop(): Promise<MachinePauses> {
    const windowMs = performance.now() - this.#t0;
    const steal1 = stealTicks();
    const queued1 = runDelayNs(this.#child.pid);
    // A child that died already has no stdin to close; its status below says so.
    await this.#child.stdin.close().catch(() => {});
    // The child ends within a timer's turn of its stdin closing; one that does not is killed.
    const guard = setTimeout(() => {
      try {
        this.#child.kill("SIGKILL");
      } catch { /* exited */ }
    }, STOP_TIMEOUT_MS);
    const [text, status] = await Promise.all([this.#out, this.#child.status]).finally(() =>
      clearTimeout(guard)
    );
    const last = text.trim().split("\n").at(-1) ?? "";
    if (!status.success || !last.startsWith("{")) {
      throw new Error(
        `pause_probe_child.ts ended with code ${status.code} and no summary: ${
          JSON.stringify(text.slice(-200))
        }`,
      );
    }
    const got = JSON.parse(last) as Pick<MachinePauses, "pauses" | "pausedMs" | "longestMs">;
    return {
      windowMs,
      pauses: got.pauses,
      pausedMs: got.pausedMs,
      longestMs: got.longestMs,
      stealMs: this.#steal0 === null || steal1 === null ? null : (steal1 - this.#steal0) * 10,
      queuedMs: this.#queued0 === null || queued1 === null ? null : (queued1 - this.#queued0) / 1e6,
    };
  }

  /** Stops the child if {@linkcode PauseProbe.stop} was not called; its figures are dropped. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop().catch(() => {});
  }
}

/**
 * One short phrase for a report's notes: the pauses, their sum and the
 * longest, the steal time and the probe's run-queue wait when known
 * (figures rounded to whole ms).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { pausePhrase } from "./pause_probe.ts";
 * const m = { windowMs: 3000, pauses: 12, pausedMs: 96.4, longestMs: 14.2, stealMs: 80, queuedMs: 5.3 };
 * equal(pausePhrase(m), "12 pauses ≥ 4 ms (96 ms, longest 14 ms), steal 80 ms, run queue 5 ms");
 * const none = { ...m, pauses: 0, pausedMs: 0, longestMs: 0, stealMs: null, queuedMs: null };
 * equal(pausePhrase(none), "0 pauses ≥ 4 ms");
 * ```
 */
export function pausePhrase(m: MachinePauses): string {
  const ms = (x: number) => `${Math.round(x)} ms`;
  const pauses = `${+m.pauses.toFixed(1)} pause${m.pauses === 1 ? "" : "s"} ≥ ${PAUSE_MIN_MS} ms`;
  const detail = m.pauses > 0 ? ` (${ms(m.pausedMs)}, longest ${ms(m.longestMs)})` : "";
  const steal = m.stealMs === null ? "" : `, steal ${ms(m.stealMs)}`;
  const queued = m.queuedMs === null ? "" : `, run queue ${ms(m.queuedMs)}`;
  return `${pauses}${detail}${steal}${queued}`;
}

/**
 * The median of each figure over several windows (a median of `windowMs`,
 * of `pauses`, …, each on its own); `stealMs` and `queuedMs` are null if any
 * window's is.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { medianPauses } from "./pause_probe.ts";
 * const w = (pauses: number, stealMs: number) =>
 *   ({ windowMs: 1000, pauses, pausedMs: pauses * 5, longestMs: 5, stealMs, queuedMs: 1 });
 * deepStrictEqual(medianPauses([w(1, 10), w(3, 0), w(2, 30)]), w(2, 10));
 * ```
 */
export function medianPauses(ms: MachinePauses[]): MachinePauses {
  if (ms.length === 0) throw new RangeError("medianPauses: no windows given");
  const orNull = (xs: (number | null)[]) =>
    xs.every((x): x is number => x !== null) ? median(xs) : null;
  return {
    windowMs: median(ms.map((m) => m.windowMs)),
    pauses: median(ms.map((m) => m.pauses)),
    pausedMs: median(ms.map((m) => m.pausedMs)),
    longestMs: median(ms.map((m) => m.longestMs)),
    stealMs: orNull(ms.map((m) => m.stealMs)),
    queuedMs: orNull(ms.map((m) => m.queuedMs)),
  };
}
