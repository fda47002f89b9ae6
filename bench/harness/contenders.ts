// Running a contender's server process and the load-generator process side by
// side, and measuring them over the same window.
import type { LoadConfig } from "./fanout_client.ts";
import type { ServerConfig } from "./fanout_server.ts";

const here = new URL(".", import.meta.url).pathname;
const root = new URL("../..", import.meta.url).pathname;

/** A free TCP port on 127.0.0.1. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const p = (l.addr as Deno.NetAddr).port;
  l.close();
  return p;
}

const debug = Deno.env.get("BENCH_DEBUG")
  ? (m: string) => console.error(`[${(performance.now() / 1000).toFixed(2)}] ${m}`)
  : () => {};

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A child process spoken to by lines on stdin and stdout. */
export class Proc {
  readonly child: Deno.ChildProcess;
  readonly name: string;
  /** performance.now() when it was spawned. */
  readonly started: number = performance.now();
  #lines: string[] = [];
  #waiters: (() => void)[] = [];
  #ended = false;
  #writer: WritableStreamDefaultWriter<Uint8Array>;

  constructor(name: string, cmd: string, args: string[]) {
    this.name = name;
    this.child = new Deno.Command(cmd, {
      args,
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
      cwd: root,
    }).spawn();
    this.#writer = this.child.stdin.getWriter();
    void this.#read();
  }

  async #read(): Promise<void> {
    let buf = "";
    try {
      for await (const chunk of this.child.stdout.pipeThrough(new TextDecoderStream())) {
        buf += chunk;
        const parts = buf.split("\n");
        buf = parts.pop()!;
        for (const p of parts) if (p.trim()) this.#lines.push(p.trim());
        this.#wake();
      }
    } catch {
      // the process went away
    }
    this.#ended = true;
    this.#wake();
  }

  #wake(): void {
    const ws = this.#waiters;
    this.#waiters = [];
    for (const w of ws) w();
  }

  /** The process id. */
  get pid(): number {
    return this.child.pid;
  }

  /** Waits for a line matching `pred` (earlier lines are dropped); throws on timeout or exit. */
  async line(pred: (l: string) => boolean, timeoutMs = 60_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (true) {
      while (this.#lines.length > 0) {
        const l = this.#lines.shift()!;
        if (pred(l)) return l;
      }
      if (this.#ended) throw new Error(`${this.name} exited`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${this.name}: timed out`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.#waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  /** Sends one command line. */
  async send(cmd: string): Promise<void> {
    await this.#writer.write(new TextEncoder().encode(cmd + "\n")).catch(() => {});
  }

  /** Asks for a mark and returns its JSON. */
  async mark(): Promise<Record<string, unknown>> {
    await this.send("mark");
    return JSON.parse(await this.line((l) => l.startsWith("{")));
  }

  /** Says "stop", waits a little for the exit, then kills it. */
  async stop(): Promise<void> {
    await this.send("stop");
    const t = setTimeout(() => this.kill(), 5000);
    await this.child.status;
    clearTimeout(t);
    await this.#writer.close().catch(() => {});
  }

  kill(): void {
    try {
      this.child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
}

/** Clock ticks a second of /proc's CPU times (`getconf CLK_TCK`; 100 where it cannot be asked). */
const TICK = (() => {
  try {
    const out = new Deno.Command("getconf", { args: ["CLK_TCK"] }).outputSync().stdout;
    return Number(new TextDecoder().decode(out).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * CPU time a process has used so far (user + system, every thread), ms, from
 * /proc; NaN once it is gone.
 */
export function procCpuMs(pid: number): number {
  try {
    const f = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const parts = f.slice(f.lastIndexOf(")") + 2).split(" ");
    return (Number(parts[11]) + Number(parts[12])) * 1000 / TICK;
  } catch {
    return NaN;
  }
}

/** Resident and peak memory of a process, MiB, from /proc. */
export function rssOf(pid: number): { rss: number; hwm: number } {
  const s = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = (k: string) => Number(new RegExp(`${k}:\\s*(\\d+)`).exec(s)?.[1] ?? 0);
  return { rss: kb("VmRSS") / 1024, hwm: kb("VmHWM") / 1024 };
}

/** Makes sure `ws` (pinned in deno.dev.json) is in node_modules for the Node contender. */
export async function ensureNodeWs(): Promise<void> {
  try {
    await Deno.stat(`${root}node_modules/ws/package.json`);
    return;
  } catch {
    // not installed yet
  }
  console.error("bench: installing npm:ws into node_modules (deno install)");
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["install", "--config", "deno.dev.json"],
    cwd: root,
  }).output();
  if (!out.success) throw new Error("deno install failed: " + new TextDecoder().decode(out.stderr));
}

/** A contender: which server program, with what configuration. */
export interface Contender {
  /** Short name (chart legend). */
  name: string;
  /** "deno": bench/harness/fanout_server.ts; "node": bench/harness/fanout_node.mjs under node. */
  runtime: "deno" | "node";
  /** The server's configuration, without port, subs and rate. */
  server: Omit<ServerConfig, "port" | "subs" | "rate">;
  /** The path and query subscribers open. */
  path: string;
  /** Paths and queries to spread subscribers over instead (subscriber i opens `paths[i % n]`). */
  paths?: string[];
}

/** What one measured case gave. */
export interface CaseResult {
  /** Rows delivered to all subscribers together, per second. */
  rate: number;
  /** Server CPU as % of wall time (100 = one core). */
  serverCpu: number;
  /** Load generator CPU, % of wall time. */
  genCpu: number;
  /** Rows published per second by the server (in its own window). */
  published: number;
  /** Latency percentiles (ms), when asked for. */
  lat?: { n: number; p50: number; p99: number; p999?: number; max: number };
  /** Server RSS samples over the window, MiB. */
  rss?: { peak: number; first: number; mid: number; last: number; hwm: number };
  /** The server's JavaScript heap used and external memory at the end of the window, MiB (Deno servers, with `rssEveryMs`). */
  heap?: { used: number; external: number; buffered?: number; states?: string; live?: number };
  /** Rows each subscriber got in the window: least, median, most. */
  perSub?: { min: number; median: number; max: number };
  /** ms from the server's spawn to its READY. */
  readyMs?: number;
  /** Why the case failed, if it did. */
  error?: string;
}

/** Options of {@linkcode measure}. */
export interface MeasureOptions {
  subs: number;
  rate?: number;
  warmupMs: number;
  windowMs: number;
  latency?: boolean;
  stalled?: number;
  /** Sample the server's RSS every this many ms during warm-up and window. */
  rssEveryMs?: number;
  /** Extra deno flags for the server process (e.g. --cpu-prof). */
  denoFlags?: string[];
  /** The generator counts binary frames as batched text (see LoadConfig.binaryText). */
  binaryText?: boolean;
}

/**
 * Starts the contender's server and the load generator, waits until rows
 * flow to every subscriber, lets it warm up, then measures over one window:
 * the generator's delivered rows/s, and each process's CPU over its own view
 * of the window (both are marked at the same moment over their stdin).
 */
export async function measure(c: Contender, o: MeasureOptions): Promise<CaseResult> {
  // A port picked free can be taken by another process before the server
  // binds it (other work shares this machine): try again on a failed start.
  for (let attempt = 1;; attempt++) {
    const r = await measureOnce(c, o);
    if (!r.error?.includes("server exited") || attempt === 3) return r;
    console.error(`bench: ${c.name}: the server did not start; trying again`);
  }
}

async function measureOnce(c: Contender, o: MeasureOptions): Promise<CaseResult> {
  const port = freePort();
  const scfg: ServerConfig = {
    ...c.server,
    port,
    subs: o.subs + (o.stalled ?? 0),
    rate: o.rate ?? 0,
  };
  const server = c.runtime === "node"
    ? new Proc(`${c.name} server`, "node", [`${here}fanout_node.mjs`, JSON.stringify(scfg)])
    : new Proc(`${c.name} server`, Deno.execPath(), [
      "run",
      "-A",
      ...(o.denoFlags ?? []),
      `${here}fanout_server.ts`,
      JSON.stringify(scfg),
    ]);
  // The generator starts with the server, and connects once told to.
  const lcfg: LoadConfig = {
    url: `ws://127.0.0.1:${port}${c.path}`,
    ...(c.paths ? { urls: c.paths.map((p) => `ws://127.0.0.1:${port}${p}`) } : {}),
    subs: o.subs,
    stalled: o.stalled,
    latency: o.latency,
    waitGo: true,
    ...(o.binaryText ? { binaryText: true } : {}),
  };
  const gen = new Proc(`${c.name} generator`, Deno.execPath(), [
    "run",
    "-A",
    `${here}fanout_client.ts`,
    JSON.stringify(lcfg),
  ]);
  const rssSamples: number[] = [];
  let sampler: ReturnType<typeof setInterval> | undefined;
  try {
    await server.line((l) => l === "READY", 30_000);
    const readyMs = performance.now() - server.started;
    debug(`${c.name}: ready`);
    await gen.send("go");
    await gen.line((l) => l === "OPEN", 60_000);
    debug(`${c.name}: open`);
    await gen.line((l) => l === "FLOWING", 60_000);
    debug(`${c.name}: flowing`);
    if (o.rssEveryMs) {
      sampler = setInterval(() => {
        try {
          rssSamples.push(rssOf(server.pid).rss);
        } catch {
          // gone
        }
      }, o.rssEveryMs);
    }
    await sleep(o.warmupMs);
    const rssStart = rssSamples.length;
    const [g0, s0] = await Promise.all([gen.mark(), server.mark()]);
    debug(`${c.name}: marked`);
    await sleep(o.windowMs);
    const [g1, s1] = await Promise.all([gen.mark(), server.mark()]);
    debug(`${c.name}: marked again`);
    clearInterval(sampler);
    const gms = (g1.t as number) - (g0.t as number);
    const sms = (s1.t as number) - (s0.t as number);
    const out: CaseResult = {
      rate: ((g1.rows as number) - (g0.rows as number)) / (gms / 1000),
      genCpu: ((g1.cpuUs as number) - (g0.cpuUs as number)) / 1000 / gms * 100,
      serverCpu: ((s1.cpuUs as number) - (s0.cpuUs as number)) / 1000 / sms * 100,
      published: ((s1.rows as number) - (s0.rows as number)) / (sms / 1000),
      perSub: g1.perSub as CaseResult["perSub"],
      readyMs,
    };
    if (o.latency) out.lat = g1.lat as CaseResult["lat"];
    if (o.rssEveryMs && c.runtime === "deno") {
      await server.send("memory");
      const m = JSON.parse(await server.line((l) => l.startsWith('{"heapUsed"')));
      out.heap = {
        used: m.heapUsed / 2 ** 20,
        external: m.external / 2 ** 20,
        buffered: m.buffered / 2 ** 20,
        states: m.states,
        live: m.live / 2 ** 20,
      };
    }
    if (o.rssEveryMs) {
      const w = rssSamples.slice(rssStart);
      const all = rssSamples.length ? rssSamples : [0];
      out.rss = {
        peak: Math.max(...all),
        first: w[0] ?? all[0],
        mid: w[Math.floor(w.length / 2)] ?? all[0],
        last: w.at(-1) ?? all[0],
        hwm: rssOf(server.pid).hwm,
      };
    }
    return out;
  } catch (err) {
    console.error(`bench: ${c.name} with ${o.subs} subscribers failed: ${err}`);
    return { rate: NaN, serverCpu: NaN, genCpu: NaN, published: NaN, error: String(err) };
  } finally {
    clearInterval(sampler);
    gen.kill(); // nothing to flush; closing a thousand busy sockets politely is slow
    await gen.child.status;
    debug(`${c.name}: generator stopped`);
    await server.stop();
    debug(`${c.name}: server stopped`);
  }
}

/** "96 %" or "-". */
export function pct(x: number | undefined): string {
  return x === undefined || !Number.isFinite(x) ? "-" : `${x.toFixed(0)} %`;
}
