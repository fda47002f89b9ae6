/**
 * The tickerplant path's latency tail, open loop: a real `cli.ts serve --stdin`
 * process (fsync on) fed NDJSON trade rows on its stdin at a fixed rate, with
 * `--subs` batched subscribers (`frames=batch`, the client library's mode) in
 * one load-generator process (../harness/fanout_client.ts), against the bare
 * `Deno.upgradeWebSocket` server (../harness/bare_feed_server.ts: no log, one
 * frame a read of stdin) fed the same way in the same run.
 *
 * Open loop: every row's send time is fixed in advance (row i at t0 + i/rate)
 * and written into its `event_ts`; the feeder writes the rows due at each tick
 * whatever the server does, so a stall of the server (or of its pipe) counts
 * against every row it delays. Latency: the generator's wall clock at receipt
 * minus `event_ts`, for every row at every subscriber, over the window after a
 * warm-up; percentiles are exact (every sample kept and sorted) up to p99.99.
 *
 * Each rate runs in rounds; a round runs every contender once, in an order
 * that alternates (streamcast then bare, then bare then streamcast, …), and
 * the ratios reported are the medians of each round's streamcast / bare
 * ratio. `STREAMCAST_BENCH_BEFORE=/path/to/checkout` adds that checkout's
 * `cli.ts` as a third contender in every round (its ratios to bare, and this
 * checkout's to it).
 *
 * What each server does a row, from the same runs: its CPU (µs a row) and
 * its main thread's waits (voluntary context switches of the thread running
 * JavaScript, a row: each is one wait of the event loop for the next thing
 * to do, so one a row per read and one per sync is the durable floor's).
 * `--strace` adds one more run of each contender at each rate with
 * `strace -f -c` attached to the server over the window, and reports its
 * system calls a row (by name; `epoll_wait` a row is the event loop's turns
 * a row), after one without strace for CPU and waits a row; those runs feed
 * one row at a time, each once the one before it
 * reached a subscriber of the benchmark's own (so each read holds one row,
 * however loaded the machine), and their latencies are not used.
 *
 * Over each run's window a pause probe (../harness/pause_probe.ts) counts
 * the machine's own pauses (a process sleeping 1 ms at a time waking late,
 * and the VM's steal time), reported in the notes beside the figures.
 *
 * `--gens N` spreads the subscribers over N load-generator processes (their
 * samples merged for exact percentiles), so that one generator is not the
 * floor of every contender at 5000 rows/s.
 *
 * Run alone: deno run -A bench/e2e/tail.ts [--quick] [--rounds N] [--rates 500,5000]
 *   [--subs N] [--gens N] [--window S] [--warmup S] [--strace]
 *   [--server-flags "--cpu-prof --cpu-prof-dir=DIR --v8-flags=--trace-gc"] [--server-out FILE]
 */
import { stopChild, waitListening } from "../harness/listening.ts";
import { tradeRows } from "../../tests/harness/trades.ts";
import { SCHEMA } from "../../tests/harness/trades.ts";
import { Proc, procCpuMs, sleep } from "../harness/contenders.ts";
import type { LoadConfig } from "../harness/fanout_client.ts";
import { type BenchRow, type BenchSection, median } from "../harness/report.ts";
import {
  type MachinePauses,
  medianPauses,
  PAUSE_MIN_MS,
  pausePhrase,
  PauseProbe,
} from "../harness/pause_probe.ts";

const here = new URL(".", import.meta.url).pathname;
const CLI = new URL("../../cli.ts", import.meta.url).pathname;
const BARE = `${here}../harness/bare_feed_server.ts`;
const GENERATOR = `${here}../harness/fanout_client.ts`;

/**
 * One contender: this checkout's server, another checkout's, the same with
 * `--no-fsync`, the bare one, or the bare one syncing each read before it
 * sends it (the durable floor).
 */
type Who = "streamcast" | "before" | "nofsync" | "bare" | "bare_fsync";
const WHOS: readonly Who[] = ["streamcast", "before", "nofsync", "bare", "bare_fsync"];

/** One run's latency figures, ms, and what the processes did. */
export interface TailRun {
  p50: number;
  p99: number;
  p999: number;
  p9999: number;
  max: number;
  /** Samples (rows × subscribers) in the window. */
  n: number;
  /** Rows per second the feeder wrote over the window. */
  fed: number;
  /** Server CPU, % of one core, over the window. */
  serverCpu: number;
  /** The latest a write left this process after its rows' planned time, ms. */
  sendLag: number;
  /** Server CPU a row fed over the window, µs. */
  cpuPerRow: number;
  /** Voluntary context switches of the server's main thread a row fed (its waits). */
  waitsPerRow: number;
  /** With `--strace`: system calls a row fed over the window, by name ("total": all). */
  syscalls?: Record<string, number>;
  /** The machine's pauses over the window. */
  machine: MachinePauses;
}

interface Sizes {
  rounds: number;
  rates: number[];
  subs: number;
  /** Load-generator processes the subscribers are spread over. */
  gens: number;
  /** Count the servers' system calls in one more run of each (see the module doc). */
  strace: boolean;
  warmup: number;
  window: number;
  serverFlags: string[];
  /** A file each server's stdout is appended to (e.g. its `--trace-gc` lines), or "". */
  serverOut: string;
  /** The contenders besides `before` (streamcast and bare always). */
  whos: Who[];
}

/** A server process: `cli.ts serve --stdin` or the bare one, and its port. */
async function startServer(who: Who, flags: string[], dir: string, out = "") {
  const before = Deno.env.get("STREAMCAST_BENCH_BEFORE")?.replace(/\/$/, "");
  const cli = who === "before" ? `${before}/cli.ts` : CLI;
  const args = who === "bare" || who === "bare_fsync"
    ? ["run", "-A", ...flags, BARE, ...(who === "bare_fsync" ? ["--fsync"] : [])]
    : [
      "run",
      "-A",
      ...flags,
      cli,
      "serve",
      "--stream",
      `trades=${dir}/trades.json`,
      "--stdin",
      "trades",
      "--root",
      `${dir}/data`,
      "--seal-every",
      "0",
      ...(who === "nofsync" ? ["--no-fsync"] : []),
      "--port",
      "0",
    ];
  const child = new Deno.Command(Deno.execPath(), {
    args,
    stdin: "piped",
    stdout: out ? "piped" : "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    cwd: who === "bare" || who === "bare_fsync"
      ? undefined
      : cli.slice(0, cli.lastIndexOf("/") + 1),
  }).spawn();
  let text = "";
  const drained = (async () => {
    for await (const c of child.stderr.pipeThrough(new TextDecoderStream())) text += c;
  })().catch(() => {});
  const copied = out
    ? Deno.open(out, { append: true, create: true }).then((f) => child.stdout.pipeTo(f.writable))
      .catch(() => {})
    : null;
  const stdin = child.stdin.getWriter();
  const stop = async () => {
    await stdin.close().catch(() => {});
    // SIGINT lets a `--cpu-prof` server write its profile.
    await stopChild(child, "SIGINT", [drained, copied ?? Promise.resolve()]);
  };
  const port = await waitListening(() => text, `${who} server`, stop);
  return { port, pid: child.pid, stdin, stop };
}

/**
 * Writes trade rows to `w` at `rate` rows/s, open loop: row i is planned at
 * t0 + i / rate and carries that time (µs, wall clock) in `event_ts`; each
 * tick writes every row due by then.
 */
function feed(w: WritableStreamDefaultWriter<Uint8Array>, rate: number) {
  const enc = new TextEncoder();
  const make = tradeRows(7);
  const t0 = performance.now();
  const origin = performance.timeOrigin;
  let fed = 0;
  let lag = 0;
  let stopping = false;
  const done = (async () => {
    while (!stopping) {
      const now = performance.now();
      const due = Math.floor((now - t0) * rate / 1000) + 1;
      if (due > fed) {
        let text = "";
        for (let i = fed; i < due; i++) {
          const row = make(i);
          row.event_ts = Math.round((origin + t0 + i * 1000 / rate) * 1000);
          text += JSON.stringify(row) + "\n";
        }
        lag = Math.max(lag, now - (t0 + fed * 1000 / rate));
        fed = due;
        await w.write(enc.encode(text));
      }
      await sleep(Math.max(0, t0 + fed * 1000 / rate - performance.now()));
    }
  })().catch(() => {});
  return {
    fed: () => fed,
    /** The latest lag since the last call, ms. */
    lag: () => {
      const l = lag;
      lag = 0;
      return l;
    },
    stop: async () => {
      stopping = true;
      await done;
    },
  };
}

/** Voluntary context switches of `pid`'s main thread so far (the thread running JavaScript). */
export function mainThreadWaits(pid: number): number {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/task/${pid}/status`);
    return Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

/**
 * The calls of an `strace -c` summary, by name ("total": the summary's total).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { straceCounts } from "./tail.ts";
 * const text = `% time     seconds  usecs/call     calls    errors syscall
 * ------ ----------- ----------- --------- --------- ----------------
 *  60.00    0.000600           6       100           epoll_wait
 *  40.00    0.000400           4       100        10 read
 * ------ ----------- ----------- --------- --------- ----------------
 * 100.00    0.001000           5       200        10 total`;
 * deepStrictEqual(straceCounts(text), { epoll_wait: 100, read: 100, total: 200 });
 * ```
 */
export function straceCounts(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    const m = /^\s*[\d.]+\s+[\d.]+\s+(?:\d+\s+)?(\d+)\s+(?:\d+\s+)?([a-z_0-9]+)\s*$/.exec(line);
    if (m) out[m[2]] = Number(m[1]);
  }
  return out;
}

/** `strace -f -c` attached to `pid` (every thread) until `stop()`, which gives its counts. */
async function straceOf(pid: number): Promise<{ stop(): Promise<Record<string, number>> }> {
  const file = await Deno.makeTempFile({ prefix: "streamcast-bench-strace-" });
  const child = new Deno.Command("strace", {
    args: ["-f", "-c", "-o", file, "-p", String(pid)],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let text = "";
  const read = (async () => {
    for await (const c of child.stderr.pipeThrough(new TextDecoderStream())) text += c;
  })().catch(() => {});
  const deadline = Date.now() + 10_000;
  while (!/attached/.test(text) && Date.now() < deadline) await sleep(10);
  return {
    async stop() {
      child.kill("SIGINT");
      await child.status;
      await read;
      const counts = straceCounts(await Deno.readTextFile(file));
      await Deno.remove(file).catch(() => {});
      return counts;
    },
  };
}

/** The exact percentiles of merged sorted sample files (float64 ms each). */
function mergedLatency(
  files: string[],
): Omit<TailRun, "fed" | "serverCpu" | "sendLag" | "machine"> {
  const parts = files.map((f) => new Float64Array(Deno.readFileSync(f).buffer));
  const xs = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    xs.set(p, at);
    at += p.length;
  }
  xs.sort();
  const q = (p: number) =>
    xs.length === 0 ? NaN : xs[Math.min(xs.length - 1, Math.floor(xs.length * p))];
  return {
    n: xs.length,
    p50: q(0.5),
    p99: q(0.99),
    p999: q(0.999),
    p9999: q(0.9999),
    max: q(1),
    cpuPerRow: NaN,
    waitsPerRow: NaN,
  };
}

/**
 * Writes trade rows to `w` one at a time, each once the one before it reached
 * a subscriber this process holds on `url` (and no faster than `rate`), so
 * that every read of the server's stdin holds exactly one row however loaded
 * the machine is: what it does a row is then what it does a read. For
 * counting (`--strace`), not for latency.
 */
async function feedOneByOne(
  w: WritableStreamDefaultWriter<Uint8Array>,
  url: string,
  rate: number,
): Promise<ReturnType<typeof feed>> {
  const enc = new TextEncoder();
  const make = tradeRows(7);
  const ws = new WebSocket(url);
  let got = 0;
  let wake: (() => void) | null = null;
  ws.onmessage = (e) => {
    const text = String(e.data);
    for (let at = text.indexOf('"trade_id"'); at !== -1; at = text.indexOf('"trade_id"', at + 1)) {
      got++;
    }
    wake?.();
  };
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let fed = 0;
  let stopping = false;
  const t0 = performance.now();
  const done = (async () => {
    while (!stopping) {
      const row = make(fed);
      row.event_ts = Math.round((performance.timeOrigin + performance.now()) * 1000);
      const want = ++fed;
      await w.write(enc.encode(JSON.stringify(row) + "\n"));
      while (got < want && !stopping) await new Promise<void>((r) => (wake = r));
      await sleep(Math.max(0, t0 + fed * 1000 / rate - performance.now()));
    }
  })().catch(() => {});
  return {
    fed: () => fed,
    lag: () => 0,
    stop: async () => {
      stopping = true;
      wake?.();
      await done;
      ws.close();
    },
  };
}

/**
 * One run of one contender at one rate; `oneByOne`: fed one row a read
 * ({@linkcode feedOneByOne}), `trace`: with strace attached over the window.
 */
async function once(
  who: Who,
  rate: number,
  z: Sizes,
  oneByOne = false,
  trace = false,
): Promise<TailRun> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-tail-" });
  await Deno.writeTextFile(`${dir}/trades.json`, JSON.stringify(SCHEMA));
  if (z.serverOut) {
    await Deno.writeTextFile(z.serverOut, `== ${who} ${rate} rows/s\n`, { append: true });
  }
  const server = await startServer(who, z.serverFlags, dir, z.serverOut);
  const gens: Proc[] = [];
  const latFiles: string[] = [];
  let feeder: ReturnType<typeof feed> | undefined;
  let probe: PauseProbe | undefined;
  try {
    for (let g = 0; g < z.gens; g++) {
      const latFile = z.gens > 1
        ? await Deno.makeTempFile({ prefix: "streamcast-bench-lat-" })
        : "";
      if (latFile) latFiles.push(latFile);
      const cfg: LoadConfig = {
        url: who === "bare" || who === "bare_fsync"
          ? `ws://127.0.0.1:${server.port}/`
          : `ws://127.0.0.1:${server.port}/trades?frames=batch`,
        // The subscribers spread as evenly as they go.
        subs: Math.floor(z.subs / z.gens) + (g < z.subs % z.gens ? 1 : 0),
        latency: true,
        ...(latFile ? { latFile } : {}),
      };
      gens.push(
        new Proc("generator", Deno.execPath(), ["run", "-A", GENERATOR, JSON.stringify(cfg)]),
      );
    }
    for (const gen of gens) await gen.line((l) => l === "OPEN", 60_000);
    const url = who === "bare" || who === "bare_fsync"
      ? `ws://127.0.0.1:${server.port}/`
      : `ws://127.0.0.1:${server.port}/trades?frames=batch`;
    feeder = oneByOne ? await feedOneByOne(server.stdin, url, rate) : feed(server.stdin, rate);
    for (const gen of gens) await gen.line((l) => l === "ALL", 30_000);
    await sleep(z.warmup * 1000);
    const tracer = trace ? await straceOf(server.pid) : null;
    probe = await PauseProbe.start();
    const [c0, w0, f0, t0] = [
      procCpuMs(server.pid),
      mainThreadWaits(server.pid),
      feeder.fed(),
      performance.now(),
    ];
    await Promise.all(gens.map((g) => g.mark())); // drops the warm-up's samples
    feeder.lag();
    await sleep(z.window * 1000);
    const [c1, w1, f1, t1] = [
      procCpuMs(server.pid),
      mainThreadWaits(server.pid),
      feeder.fed(),
      performance.now(),
    ];
    const marks = await Promise.all(gens.map((g) => g.mark()));
    const machine = await probe.stop();
    const counts = await tracer?.stop();
    const lag = feeder.lag();
    const ms = t1 - t0;
    const rows = f1 - f0;
    const lat = z.gens > 1
      ? mergedLatency(latFiles)
      : marks[0].lat as Omit<TailRun, "fed" | "serverCpu" | "sendLag" | "machine">;
    const syscalls = counts
      ? Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, v / rows]))
      : undefined;
    return {
      ...lat,
      fed: rows / (ms / 1000),
      serverCpu: (c1 - c0) / ms * 100,
      sendLag: lag,
      cpuPerRow: (c1 - c0) * 1000 / rows,
      waitsPerRow: (w1 - w0) / rows,
      ...(syscalls ? { syscalls } : {}),
      machine,
    };
  } finally {
    await probe?.[Symbol.asyncDispose]();
    for (const gen of gens) gen.kill();
    for (const gen of gens) await gen.child.status;
    for (const f of latFiles) await Deno.remove(f).catch(() => {});
    await feeder?.stop();
    await server.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

const QS = [["p50", "p50"], ["p99", "p99"], ["p99.9", "p999"], ["p99.99", "p9999"]] as const;
const TARGET: Record<string, number> = { p99: 1.3, p999: 2 };

/** Every round of every rate; the contenders alternate their order round by round. */
export async function measureTail(
  z: Sizes,
  log: (line: string) => void = () => {},
): Promise<Map<number, Record<Who, TailRun>[]>> {
  const whos: Who[] = [...z.whos];
  if (Deno.env.get("STREAMCAST_BENCH_BEFORE")) whos.push("before");
  const out = new Map<number, Record<Who, TailRun>[]>();
  for (const rate of z.rates) {
    const rounds: Record<Who, TailRun>[] = [];
    for (let r = 0; r < z.rounds; r++) {
      const order = r % 2 === 0 ? whos : [...whos].reverse();
      const got = {} as Record<Who, TailRun>;
      for (const who of order) {
        got[who] = await once(who, rate, z);
        const x = got[who];
        log(
          `${rate} rows/s round ${r + 1}/${z.rounds} ${who}: p50 ${x.p50.toFixed(2)} p99 ${
            x.p99.toFixed(2)
          } p99.9 ${x.p999.toFixed(2)} p99.99 ${x.p9999.toFixed(2)} max ${
            x.max.toFixed(1)
          } ms (${x.n} samples, fed ${x.fed.toFixed(0)} rows/s, server ${
            x.serverCpu.toFixed(0)
          } %, ${x.cpuPerRow.toFixed(0)} µs CPU and ${
            x.waitsPerRow.toFixed(2)
          } waits a row, feeder at most ${x.sendLag.toFixed(1)} ms late; machine: ${
            pausePhrase(x.machine)
          })`,
        );
      }
      rounds.push(got);
    }
    out.set(rate, rounds);
  }
  return out;
}

/**
 * Fed one row a read, each contender at each rate: a run for its CPU and
 * main-thread waits a row, then one with strace attached for its system
 * calls a row, by name (with "cpu_us" and "waits" from the first).
 */
export async function measureSyscalls(
  z: Sizes,
  log: (line: string) => void = () => {},
): Promise<Map<number, Partial<Record<Who, Record<string, number>>>>> {
  const whos: Who[] = [...z.whos];
  if (Deno.env.get("STREAMCAST_BENCH_BEFORE")) whos.push("before");
  const out = new Map<number, Partial<Record<Who, Record<string, number>>>>();
  for (const rate of z.rates) {
    const got: Partial<Record<Who, Record<string, number>>> = {};
    for (const who of whos) {
      const c = await once(who, rate, z, true);
      const x = await once(who, rate, z, true, true);
      got[who] = { ...x.syscalls, cpu_us: c.cpuPerRow, waits: c.waitsPerRow };
      log(
        `${rate} rows/s one row a read, ${who}: ${c.cpuPerRow.toFixed(0)} µs CPU and ${
          c.waitsPerRow.toFixed(2)
        } main-thread waits a row; under strace ${syscallLine(x.syscalls ?? {})}`,
      );
    }
    out.set(rate, got);
  }
  return out;
}

/** "N system calls a row: epoll_wait A, read B, …" (the most frequent first). */
function syscallLine(perRow: Record<string, number>): string {
  const named = Object.entries(perRow).filter(([k]) => !["total", "cpu_us", "waits"].includes(k))
    .sort((a, b) => b[1] - a[1]).slice(0, 14);
  return `${(perRow.total ?? 0).toFixed(1)} system calls a row: ${
    named.map(([k, v]) => `${k} ${v.toFixed(2)}`).join(", ")
  }`;
}

function sizes(quick: boolean, args: string[] = []): Sizes {
  const flag = (name: string, fallback: string) => {
    const i = args.indexOf(name);
    return i === -1 ? fallback : args[i + 1];
  };
  return {
    rounds: Number(flag("--rounds", quick ? "1" : "4")),
    rates: flag("--rates", "500,5000").split(",").map(Number),
    subs: Number(flag("--subs", "100")),
    gens: Number(flag("--gens", "1")),
    strace: args.includes("--strace"),
    warmup: Number(flag("--warmup", quick ? "1" : "2")),
    window: Number(flag("--window", quick ? "3" : "10")),
    serverFlags: flag("--server-flags", "").split(" ").filter(Boolean),
    serverOut: flag("--server-out", ""),
    whos: flag("--with", "streamcast,bare,bare_fsync,nofsync").split(",").map((w) => {
      if (!WHOS.includes(w as Who) || w === "before") {
        throw new Error(`bench/e2e/tail.ts: --with takes ${WHOS.filter((x) => x !== "before")}`);
      }
      return w as Who;
    }),
  };
}

/** The section: each rate's percentiles (medians over rounds) and the medians of the per-round ratios. */
function section(z: Sizes, got: Map<number, Record<Who, TailRun>[]>): BenchSection {
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  for (const [rate, rounds] of got) {
    for (const [q, key] of QS) {
      const ours = median(rounds.map((r) => r.streamcast[key]));
      const base = median(rounds.map((r) => r.bare[key]));
      const ratio = median(rounds.map((r) => r.streamcast[key] / r.bare[key]));
      const target = TARGET[key];
      const vs = (w: Who) =>
        rounds[0][w] ? median(rounds.map((r) => r[w][key] / r.bare[key])).toFixed(2) : null;
      const floor = vs("bare_fsync");
      const nofsync = vs("nofsync");
      rows.push({
        case: `${rate} rows/s, ${z.subs} batched subscribers: ${q} vs bare Deno`,
        ours,
        baseline: base,
        unit: "ms",
        ratio,
        target: target ? `≤ ${target}×` : "",
        met: target ? ratio <= target : null,
        ...(target && ratio > target
          ? {
            limit: `${ratio.toFixed(2)}× bare (${ours.toFixed(2)} ms against ${base.toFixed(2)})${
              floor ? `; the durable floor (bare + fdatasync a read) is at ${floor}× bare` : ""
            }${
              nofsync ? ` and streamcast with --no-fsync at ${nofsync}×` : ""
            } in the same rounds, so what is over ${
              floor ? "the floor" : "bare"
            } is streamcast's own path from the read of stdin to the sends (see the hand-written section on the tail).`,
          }
          : {}),
        serverCpu: [
          median(rounds.map((r) => r.streamcast.serverCpu)),
          median(rounds.map((r) => r.bare.serverCpu)),
        ],
      });
    }
    const f = (w: Who, k: Exclude<keyof TailRun, "syscalls" | "machine">) =>
      rounds.map((r) => r[w][k].toFixed(k === "n" || k === "fed" ? 0 : 2)).join(", ");
    notes.push(
      `${rate} rows/s, each round's figures (ms): streamcast p50 ${f("streamcast", "p50")}; p99 ${
        f("streamcast", "p99")
      }; p99.9 ${f("streamcast", "p999")}; p99.99 ${f("streamcast", "p9999")}; max ${
        f("streamcast", "max")
      }. Bare: p50 ${f("bare", "p50")}; p99 ${f("bare", "p99")}; p99.9 ${
        f("bare", "p999")
      }; p99.99 ${f("bare", "p9999")}; max ${f("bare", "max")}. Samples a run: ${
        f("streamcast", "n")
      } (bare ${f("bare", "n")}); rows/s fed ${f("streamcast", "fed")} (bare ${
        f("bare", "fed")
      }); the feeder at most ${f("streamcast", "sendLag")} ms late (bare ${f("bare", "sendLag")}).`,
    );
    const perRow = (w: Who) =>
      `${w} ${median(rounds.map((r) => r[w].cpuPerRow)).toFixed(0)} µs, ${
        median(rounds.map((r) => r[w].waitsPerRow)).toFixed(2)
      } waits`;
    notes.push(
      `${rate} rows/s, server CPU and main-thread waits (voluntary context switches) a row, medians: ${
        WHOS.filter((w) => rounds[0][w]).map(perRow).join("; ")
      }.`,
    );
    notes.push(
      `${rate} rows/s, machine pauses during each window (medians over rounds): ${
        WHOS.filter((w) => rounds[0][w]).map((w) =>
          `${w} ${pausePhrase(medianPauses(rounds.map((r) => r[w].machine)))}`
        ).join("; ")
      }.`,
    );
    const others: [Who, string][] = [
      ["bare_fsync", "the bare server syncing each read before it sends it (the durable floor)"],
      ["nofsync", "streamcast with --no-fsync"],
      ["before", "STREAMCAST_BENCH_BEFORE's server"],
    ];
    for (const [w, what] of others) {
      if (!rounds[0][w]) continue;
      notes.push(
        `${rate} rows/s, ${what}, in the same rounds: ${
          QS.map(([q, key]) =>
            `${q} ${median(rounds.map((r) => r[w][key])).toFixed(2)} ms (${
              median(rounds.map((r) => r[w][key] / r.bare[key])).toFixed(2)
            }× bare; streamcast ${
              median(rounds.map((r) => r.streamcast[key] / r[w][key])).toFixed(2)
            }× it)`
          ).join(", ")
        }; server CPU ${median(rounds.map((r) => r[w].serverCpu)).toFixed(0)} %.`,
      );
    }
  }
  notes.push(
    `Open loop: the benchmark writes trade rows to the server's stdin at a fixed rate, each row's send time fixed in advance and carried in its \`event_ts\`; latency is the load generator's wall clock at receipt minus \`event_ts\`, every row at each of ${z.subs} subscribers (${z.gens} load-generator process${
      z.gens > 1 ? "es" : ""
    }), over ${z.window} s after ${z.warmup} s of warm-up; exact percentiles of every sample. ${z.rounds} rounds a rate, the servers alternating their order (forwards, then backwards); each figure is the median over rounds, each ratio the median of the rounds' ratios. streamcast: \`cli.ts serve --stdin\`, fsync on, \`frames=batch\`; bare: Deno.serve + Deno.upgradeWebSocket with no log, one frame of \`[n,row]\` lines a read of stdin (with --fsync: the read appended to a file and fdatasync'd first). Machine pauses: wake-ups of a separate process sleeping 1 ms at a time that came ≥ ${PAUSE_MIN_MS} ms late over each window (their count, their sum and the longest), the VM's steal time over it (/proc/stat, all CPUs), and that process's run-queue wait (its waits for a busy CPU, the short ones too: what of its late wake-ups is the benchmark's own load rather than the VM being paused).`,
  );
  return {
    title: "Latency's tail: the tickerplant path, open loop",
    baseline:
      "the bare `Deno.upgradeWebSocket` server (no log, no fsync) fed the same rows on stdin at the same planned times, to the same subscribers, in the same run",
    rows,
    notes,
  };
}

/** Runs the benchmark (bench/run.ts). */
export async function run(quick = false): Promise<BenchSection> {
  const z = sizes(quick);
  return section(z, await measureTail(z, (l) => console.error(`  ${l}`)));
}

if (import.meta.main) {
  const z = sizes(Deno.args.includes("--quick"), Deno.args);
  const load = () => Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  console.log(`tail: ${JSON.stringify(z)}; load average ${load()}; ${new Date().toISOString()}`);
  // --rounds 0: only the strace runs.
  const s = z.rounds > 0
    ? section(z, await measureTail(z, console.log))
    : { rows: [], notes: [] } as unknown as BenchSection;
  console.log(`load average ${load()}`);
  if (z.strace) {
    for (const [rate, got] of await measureSyscalls(z, console.log)) {
      for (const [who, perRow] of Object.entries(got)) {
        console.log(`${rate} rows/s, ${who} under strace -f -c: ${syscallLine(perRow ?? {})}`);
      }
    }
  }
  for (const r of s.rows) {
    console.log(
      `${r.case}: ${r.ours.toFixed(2)} ms vs ${r.baseline.toFixed(2)} ms, ${r.ratio.toFixed(2)}×${
        r.target ? ` (target ${r.target}: ${r.met ? "met" : "not met"})` : ""
      }`,
    );
  }
  for (const n of s.notes ?? []) console.log(n);
}
