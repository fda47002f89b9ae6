/**
 * Thousands of subscribers, against a bare Deno server holding the same
 * sockets in the same run: a real `cli.ts serve --stdin` process (fsync on,
 * `frames=batch`, the client library's mode) and ../harness/bare_subs_server.ts
 * (Deno.serve + Deno.upgradeWebSocket, a greeting, one frame a row to every
 * socket, a ring of recent frames for reconnects), each fed NDJSON trade rows
 * on stdin. The subscribers are one Node process (../harness/subs_node.mjs, the
 * `ws` client) whose sockets are spread over source addresses 127.0.0.2–201.
 *
 * At each size n (1k, 5k and 18k by default; this machine allows 20,000
 * descriptors a process, and each server is checked to have n + 500):
 * - **memory per idle subscriber**: the server's RSS (VmRSS) and JS heap,
 *   each read after a full collection (through the V8 inspector,
 *   ../harness/inspector_gc.ts) before the first subscribe and again 1 s
 *   after the n-th, the difference divided by n. Memory is read in a pass
 *   of its own: a Deno process with its inspector open reports every
 *   WebSocket and every frame sent to it, which would weigh on every figure
 *   timed, so the timed passes run without one;
 * - **subscribes per second, a burst**: n subscribers opened at once (at most
 *   `--window` handshakes in flight), counted when the greeting arrives;
 * - **a broadcast round**: one row written to the server's stdin carrying its
 *   send time in `event_ts`; its latency at every subscriber (the load
 *   generator's wall clock at receipt minus `event_ts`), p50/p99 over every
 *   subscriber and `--rounds` rounds, and the median round's slowest;
 * - **subscribes per second, a reconnect storm**: every socket cut at once
 *   (the client ends its TCP connections), three rows published meanwhile, then
 *   every subscriber back at its cursor (`offset=` the next offset it has
 *   not seen), counted when it has the rows it missed;
 * - **refused and dropped**: handshakes that failed or closed before their
 *   greeting, and sockets the server closed while held, over the whole run.
 *
 * Run alone: deno run -A bench/e2e/subscribers.ts [--quick] [--sizes 1000,5000,18000]
 *   [--rounds N] [--window N] [--passes N] [--with streamcast,bare]
 *   STREAMCAST_BENCH_BEFORE=/path/to/checkout adds that checkout's server as a third contender.
 *   [--server-flags "--cpu-prof --cpu-prof-dir=DIR"]   (flags of each server's `deno run`;
 *   with one contender in --with, only its figures are printed)
 */
import { stopChild, waitListening } from "../harness/listening.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";
import { ensureNodeWs, Proc, procCpuMs, rssOf, sleep } from "../harness/contenders.ts";
import { heapAfterGc, inspectorUrl } from "../harness/inspector_gc.ts";
import {
  type BenchRow,
  type BenchSection,
  human,
  median,
  renderSection,
} from "../harness/report.ts";

const here = new URL(".", import.meta.url).pathname;
const CLI = new URL("../../cli.ts", import.meta.url).pathname;
const BARE = `${here}../harness/bare_subs_server.ts`;
const CLIENT = `${here}../harness/subs_node.mjs`;

/** STREAMCAST_BENCH_BEFORE: another checkout whose server runs as a third contender, or "". */
const beforeCheckout = (): string =>
  (Deno.env.get("STREAMCAST_BENCH_BEFORE") ?? "").replace(/\/$/, "");

/** Descriptors each server gets beyond its subscribers (listener, log files, pipes). */
const SPARE_FDS = 500;
/** Rows published while the sockets are cut, for the storm's cursors to catch up on. */
const MISSED = 3;

/** This checkout's server, the bare one, or STREAMCAST_BENCH_BEFORE's checkout's server. */
type Who = "streamcast" | "bare" | "before";

interface Sizes {
  sizes: number[];
  rounds: number;
  /** Timed passes of each contender at each size (figures: medians; ratios: medians of each pass's). */
  passes: number;
  /** Handshakes in flight at once. */
  window: number;
  whos: Who[];
  /** Flags of each server's `deno run` (e.g. --cpu-prof). */
  serverFlags: string[];
}

/** One contender at one size. */
export interface SubsRun {
  n: number;
  /** RSS per subscriber after a full collection, KiB. */
  rssKiB: number;
  /** RSS per subscriber in the timed pass (no collection forced), KiB. */
  rssTimedKiB: number;
  /** JS heap after a full collection per subscriber, KiB. */
  heapKiB: number;
  burst: number;
  storm: number;
  p50: number;
  p99: number;
  p999: number;
  /** The median round's slowest receipt, ms. */
  roundMs: number;
  refused: number;
  dropped: number;
  missing: number;
  /** Server CPU over the burst, % of one core. */
  burstCpu: number;
  /** Server CPU time per subscribe, ms: in the burst, and in the storm. */
  burstCpuMs: number;
  stormCpuMs: number;
}

/** A server process fed rows on its stdin. */
interface Server {
  port: number;
  pid: number;
  /** Its inspector's URL (null: started without one). */
  inspector: string | null;
  stdin: WritableStreamDefaultWriter<Uint8Array>;
  stop(): Promise<void>;
  /** What it wrote on stderr: bytes, and the last 4 KiB. */
  stderr(): { bytes: number; tail: string };
}

/** A server process fed rows on its stdin, with its port, pid and (when `inspect`) inspector. */
async function startServer(
  who: Who,
  n: number,
  dir: string,
  inspect: boolean,
  flags: string[],
): Promise<Server> {
  const run = ["run", "-A", ...(inspect ? ["--inspect=127.0.0.1:0"] : []), ...flags];
  const cli = who === "before" ? `${beforeCheckout()}/cli.ts` : CLI;
  const args = who === "bare" ? [...run, BARE] : [
    ...run,
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
    "--max-connections",
    String(n + SPARE_FDS),
    "--max-subscribers",
    String(n + SPARE_FDS),
    "--port",
    "0",
  ];
  const child = new Deno.Command(Deno.execPath(), {
    args,
    stdin: "piped",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    cwd: cli.slice(0, cli.lastIndexOf("/") + 1),
  }).spawn();
  // The first lines (inspector, listening) and a tail; the log lines in between are only counted.
  let head = "";
  let tail = "";
  let stderrBytes = 0;
  const drained = (async () => {
    for await (const c of child.stderr.pipeThrough(new TextDecoderStream())) {
      stderrBytes += c.length;
      if (head.length < 8192) head += c;
      tail = (tail + c).slice(-4096);
    }
  })().catch(() => {});
  const stdin = child.stdin.getWriter();
  const stop = async () => {
    await stdin.close().catch(() => {});
    await stopChild(child, "SIGINT", [drained]);
  };
  const port = await waitListening(() => head, `${who} server`, stop);
  const inspector = inspect ? inspectorUrl(head) : null;
  if (inspect && !inspector) {
    await stop();
    throw new Error(`${who} server printed no inspector URL:\n${head.slice(-2000)}`);
  }
  const limits = Deno.readTextFileSync(`/proc/${child.pid}/limits`);
  const soft = Number(/Max open files\s+(\d+)/.exec(limits)?.[1] ?? 0);
  if (soft < n + SPARE_FDS) {
    await stop();
    throw new Error(
      `${who} server may open ${soft} descriptors, fewer than ${n} subscribers + ${SPARE_FDS}: raise ulimit -n`,
    );
  }
  return {
    port,
    pid: child.pid,
    inspector,
    stdin,
    stop,
    stderr: () => ({ bytes: stderrBytes, tail }),
  };
}

const openFds = (pid: number): number => [...Deno.readDirSync(`/proc/${pid}/fd`)].length;

const pct = (sorted: number[], q: number): number =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN;

/** A server of `who` for `n` subscribers, its feeder and the load generator, for `body`. */
async function withServer<T>(
  who: Who,
  n: number,
  z: Sizes,
  inspect: boolean,
  body: (h: {
    server: Server;
    ask: (cmd: Record<string, unknown>) => Promise<Record<string, unknown>>;
    publish: (rows: number) => Promise<void>;
    published: () => number;
    url: string;
  }) => Promise<T>,
): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-subs-" });
  await Deno.writeTextFile(`${dir}/trades.json`, JSON.stringify(SCHEMA));
  const server = await startServer(who, n, dir, inspect, z.serverFlags);
  const gen = new Proc("subscribers", "node", [CLIENT]);
  const ask = async (cmd: Record<string, unknown>) => {
    await gen.send(JSON.stringify(cmd));
    return JSON.parse(await gen.line((l) => l.startsWith("{"), 300_000));
  };
  const enc = new TextEncoder();
  const make = tradeRows(11);
  let published = 0;
  const publish = async (rows: number) => {
    let text = "";
    for (let i = 0; i < rows; i++) {
      const row = make(published++);
      row.event_ts = Math.round((performance.timeOrigin + performance.now()) * 1000);
      text += JSON.stringify(row) + "\n";
    }
    await server.stdin.write(enc.encode(text));
  };
  const url = who === "bare"
    ? `ws://127.0.0.1:${server.port}/`
    : `ws://127.0.0.1:${server.port}/trades?frames=batch`;
  try {
    await sleep(500);
    return await body({ server, ask, publish, published: () => published, url });
  } finally {
    await gen.send(JSON.stringify({ cmd: "exit" }));
    const t = setTimeout(() => gen.kill(), 10_000);
    await gen.child.status;
    clearTimeout(t);
    await server.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/**
 * What a subscriber holds, KiB: RSS and JS heap, each after a full
 * collection, in a server with its inspector open (which reports every
 * socket and frame to it, so nothing is timed here), before the first
 * subscribe and 1 s after the n-th; and the subscribes refused.
 */
function memoryPass(
  who: Who,
  n: number,
  z: Sizes,
): Promise<{ rssKiB: number; heapKiB: number; refused: number }> {
  return withServer(who, n, z, true, async ({ server, ask, url }) => {
    const heap0 = await heapAfterGc(server.inspector!);
    const rss0 = rssOf(server.pid).rss;
    const burst = await ask({ cmd: "open", url, n, window: z.window });
    await sleep(1000);
    const heap1 = await heapAfterGc(server.inspector!);
    const rss1 = rssOf(server.pid).rss;
    return {
      rssKiB: (rss1 - rss0) * 1024 / n,
      heapKiB: (heap1.used - heap0.used) / 1024 / n,
      refused: Number(burst.refused),
    };
  });
}

/** One timed pass of one contender at one size (its memory figures are filled in apart). */
function timed(who: Who, n: number, z: Sizes, log: (l: string) => void): Promise<SubsRun> {
  return withServer(
    who,
    n,
    z,
    false,
    async ({ server, ask, publish, published, url }) => {
      const rss0 = rssOf(server.pid).rss;
      const fds0 = openFds(server.pid);
      const c0 = procCpuMs(server.pid);
      const burst = await ask({ cmd: "open", url, n, window: z.window });
      const burstMs = Number(burst.ms);
      const c1 = procCpuMs(server.pid);
      const burstCpu = (c1 - c0) / burstMs * 100;
      await sleep(1000);
      const rss1 = rssOf(server.pid).rss;
      const lat: number[] = [];
      const rounds: number[] = [];
      let missing = 0;
      for (let r = 0; r < z.rounds; r++) {
        await publish(1);
        const got = await ask({ cmd: "await", rows: published(), timeoutMs: 30_000 });
        missing += Number(got.missing);
        const l = (got.lat as number[]).map((us) => us / 1000);
        for (const x of l) lat.push(x);
        rounds.push(l.length ? l[l.length - 1] : NaN);
        await sleep(100);
      }
      lat.sort((a, b) => a - b);
      rounds.sort((a, b) => a - b);
      await ask({ cmd: "drop" });
      // The storm starts once the server has let go of the cut sockets (else it
      // would briefly hold 2n).
      const until = Date.now() + 60_000;
      while (openFds(server.pid) > fds0 + 50 && Date.now() < until) await sleep(50);
      await publish(MISSED);
      await sleep(200);
      const c2 = procCpuMs(server.pid);
      const storm = await ask({ cmd: "reconnect", url, window: z.window, rows: published() });
      const c3 = procCpuMs(server.pid);
      missing += Number(storm.missing);
      const stats = await ask({ cmd: "stats" });
      const r: SubsRun = {
        n,
        rssKiB: NaN,
        rssTimedKiB: (rss1 - rss0) * 1024 / n,
        heapKiB: NaN,
        burst: Number(burst.opened) / (burstMs / 1000),
        storm: Number(storm.opened) / (Number(storm.ms) / 1000),
        p50: pct(lat, 0.5),
        p99: pct(lat, 0.99),
        p999: pct(lat, 0.999),
        roundMs: rounds[Math.floor(rounds.length / 2)],
        refused: Number(stats.refused),
        dropped: Number(stats.dropped),
        missing,
        burstCpu,
        burstCpuMs: (c1 - c0) / Number(burst.opened),
        stormCpuMs: (c3 - c2) / Number(storm.opened),
      };
      log(
        `${who} n=${n}: RSS ${r.rssTimedKiB.toFixed(1)} KiB/sub (${rss0.toFixed(0)} → ${
          rss1.toFixed(0)
        } MiB); burst ${r.burst.toFixed(0)}/s (${burstMs.toFixed(0)} ms, server ${
          burstCpu.toFixed(0)
        } %, ${r.burstCpuMs.toFixed(3)} ms CPU a subscribe), storm ${r.storm.toFixed(0)}/s (${
          Number(storm.ms).toFixed(0)
        } ms, ${r.stormCpuMs.toFixed(3)} ms CPU a subscribe); broadcast p50 ${
          r.p50.toFixed(1)
        } p99 ${r.p99.toFixed(1)} ms, round ${
          r.roundMs.toFixed(1)
        } ms; refused ${r.refused}, dropped ${r.dropped}, missing ${missing}; stderr ${server.stderr().bytes} bytes`,
      );
      return r;
    },
  );
}

/** One size's passes: each contender's memory, and its timed passes. */
export interface SizeRuns {
  memory: Record<Who, { rssKiB: number; heapKiB: number; refused: number }>;
  passes: Record<Who, SubsRun>[];
}

/** Every size: the memory pass, then the timed passes, streamcast and bare alternating which goes first. */
export async function measureSubscribers(
  z: Sizes,
  log: (line: string) => void = () => {},
): Promise<Map<number, SizeRuns>> {
  await ensureNodeWs();
  const whos: Who[] = beforeCheckout() ? [...z.whos, "before"] : z.whos;
  const out = new Map<number, SizeRuns>();
  let k = 0;
  for (const n of z.sizes) {
    const memory = {} as SizeRuns["memory"];
    for (const who of k++ % 2 === 0 ? whos : [...whos].reverse()) {
      memory[who] = await memoryPass(who, n, z);
      const m = memory[who];
      log(
        `${who} n=${n}: after a full collection, RSS ${m.rssKiB.toFixed(2)} KiB/sub, heap ${
          m.heapKiB.toFixed(2)
        } KiB/sub; refused ${m.refused}`,
      );
    }
    const passes: Record<Who, SubsRun>[] = [];
    for (let p = 0; p < z.passes; p++) {
      const got = {} as Record<Who, SubsRun>;
      for (const who of k++ % 2 === 0 ? whos : [...whos].reverse()) {
        got[who] = await timed(who, n, z, log);
      }
      passes.push(got);
    }
    out.set(n, { memory, passes });
  }
  return out;
}

function sizes(quick: boolean, args: string[] = []): Sizes {
  const flag = (name: string, fallback: string) => {
    const i = args.indexOf(name);
    return i === -1 ? fallback : args[i + 1];
  };
  const z: Sizes = {
    sizes: flag("--sizes", quick ? "1000,5000" : "1000,5000,18000").split(",").map(Number),
    rounds: Number(flag("--rounds", quick ? "5" : "10")),
    passes: Number(flag("--passes", quick ? "1" : "2")),
    window: Number(flag("--window", "500")),
    whos: flag("--with", "streamcast,bare").split(",") as Who[],
    serverFlags: flag("--server-flags", "").split(" ").filter(Boolean),
  };
  for (const n of z.sizes) {
    if (!Number.isInteger(n) || n < 1) {
      throw new Error(`bench/e2e/subscribers.ts: --sizes takes positive integers, got ${n}`);
    }
  }
  if (!z.whos.length || z.whos.some((w) => w !== "streamcast" && w !== "bare")) {
    throw new Error("bench/e2e/subscribers.ts: --with takes streamcast, bare or both");
  }
  return z;
}

const MEMORY = 1.2;
const SUBSCRIBES = 0.5;

function section(z: Sizes, got: Map<number, SizeRuns>): BenchSection {
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  for (const [n, { memory, passes }] of got) {
    const at = `${human(n)} subscribers`;
    const sm = memory.streamcast;
    const bm = memory.bare;
    // A figure: the median over passes; a ratio: the median of each pass's.
    const fig = (w: Who, k: keyof SubsRun) => median(passes.map((p) => p[w][k]));
    const ratioOf = (k: keyof SubsRun, w: Who = "streamcast", base: Who = "bare") =>
      median(passes.map((p) => p[w][k] / p[base][k]));
    const each = (w: Who, k: keyof SubsRun) => passes.map((p) => p[w][k].toFixed(0)).join(", ");
    const mem = sm.rssKiB / bm.rssKiB;
    rows.push({
      case: `${at}: RSS per idle subscriber vs bare Deno`,
      ours: sm.rssKiB,
      baseline: bm.rssKiB,
      unit: "KiB",
      ratio: mem,
      target: `≤ ${MEMORY}×`,
      met: mem <= MEMORY,
      note: `JS heap after a full collection: ${sm.heapKiB.toFixed(2)} KiB a subscriber (bare ${
        bm.heapKiB.toFixed(2)
      }); RSS in the timed passes, no collection forced: ${
        fig("streamcast", "rssTimedKiB").toFixed(1)
      } KiB (bare ${fig("bare", "rssTimedKiB").toFixed(1)})`,
      ...(mem > MEMORY
        ? {
          limit: `${mem.toFixed(2)}× bare: ${
            (sm.rssKiB - bm.rssKiB).toFixed(1)
          } KiB more a subscriber`,
        }
        : {}),
    });
    const kinds = [["a burst", "burst"], ["a reconnect storm from cursors", "storm"]] as const;
    for (const [what, key] of kinds) {
      const ratio = ratioOf(key);
      rows.push({
        case: `${at}: subscribes/s, ${what}`,
        ours: fig("streamcast", key),
        baseline: fig("bare", key),
        unit: "subscribes/s",
        ratio,
        target: `≥ ${SUBSCRIBES}×`,
        met: ratio >= SUBSCRIBES,
        note: `each pass: ${each("streamcast", key)} (bare ${each("bare", key)})`,
        ...(key === "burst"
          ? {
            serverCpu: [fig("streamcast", "burstCpu"), fig("bare", "burstCpu")] as [number, number],
          }
          : {}),
        ...(ratio < SUBSCRIBES ? { limit: `${ratio.toFixed(2)}× bare` } : {}),
      });
    }
    for (const [what, key] of [["a burst", "burstCpuMs"], ["a storm", "stormCpuMs"]] as const) {
      rows.push({
        case: `${at}: server CPU time per subscribe, ${what}`,
        ours: fig("streamcast", key),
        baseline: fig("bare", key),
        unit: "ms",
        ratio: ratioOf(key),
        target: "",
        met: null,
      });
    }
    for (const q of ["p50", "p99"] as const) {
      rows.push({
        case: `${at}: a broadcast round, ${q} over every subscriber`,
        ours: fig("streamcast", q),
        baseline: fig("bare", q),
        unit: "ms",
        ratio: ratioOf(q),
        target: "",
        met: null,
      });
    }
    const sum = (w: Who) =>
      memory[w].refused +
      passes.reduce((t, p) => t + p[w].refused + p[w].dropped + p[w].missing, 0);
    const lost = sum("streamcast");
    rows.push({
      case: `${at}: refused, dropped or missing a row (every pass)`,
      ours: lost,
      baseline: sum("bare"),
      unit: "subscribers",
      ratio: NaN,
      target: "0",
      met: lost === 0,
      ...(lost
        ? {
          limit: `refused ${
            sm.refused + passes.reduce((t, p) => t + p.streamcast.refused, 0)
          }, dropped ${passes.reduce((t, p) => t + p.streamcast.dropped, 0)}, rows missing ${
            passes.reduce((t, p) => t + p.streamcast.missing, 0)
          }`,
        }
        : {}),
    });
    if (memory.before) {
      const bf = memory.before;
      const vs = (k: keyof SubsRun) =>
        `${fig("before", k).toFixed(k.endsWith("Ms") ? 3 : 0)} (${
          ratioOf(k, "before").toFixed(2)
        }× bare; this checkout ${ratioOf(k, "streamcast", "before").toFixed(2)}× it)`;
      notes.push(
        `${at}, STREAMCAST_BENCH_BEFORE's server in the same passes: RSS ${
          bf.rssKiB.toFixed(2)
        } KiB a subscriber (${(bf.rssKiB / bm.rssKiB).toFixed(2)}× bare), heap ${
          bf.heapKiB.toFixed(2)
        } KiB; subscribes/s in the burst ${vs("burst")}, in the storm ${
          vs("storm")
        }; CPU ms a subscribe in the burst ${vs("burstCpuMs")}, in the storm ${
          vs("stormCpuMs")
        }; broadcast p50 ${vs("p50")} ms, p99 ${vs("p99")} ms.`,
      );
    }
    notes.push(
      `${at}: streamcast p99.9 ${
        fig("streamcast", "p999").toFixed(1)
      } ms, the median round's slowest receipt ${
        fig("streamcast", "roundMs").toFixed(1)
      } ms (bare ${fig("bare", "p999").toFixed(1)} and ${
        fig("bare", "roundMs").toFixed(1)
      }); bare refused ${bm.refused + passes.reduce((t, p) => t + p.bare.refused, 0)}, dropped ${
        passes.reduce((t, p) => t + p.bare.dropped, 0)
      }, rows missing ${passes.reduce((t, p) => t + p.bare.missing, 0)}.`,
    );
  }
  notes.push(
    `At each size, first a memory pass of each server, then ${z.passes} timed pass${
      z.passes === 1 ? "" : "es"
    } of each (a fresh process each time, the order alternating); figures are medians over the timed passes, ratios the medians of each pass's ratio. streamcast: \`cli.ts serve --stdin\`, fsync on, \`frames=batch\`, \`--max-connections\`/\`--max-subscribers\` n + ${SPARE_FDS}. The subscribers are one Node process (\`ws\`), sockets spread over 200 source addresses, at most ${z.window} handshakes in flight. Memory: RSS and the JS heap, each after a full collection (V8 inspector), before the first subscribe and 1 s after the last, divided by n (an open inspector is told of every socket and frame, so nothing is timed in that pass). A broadcast round: one row written to the server's stdin with its send time in \`event_ts\`, latency taken at every subscriber, ${z.rounds} rounds 100 ms apart. The storm: every socket cut by the client, ${MISSED} rows published, every subscriber reconnected at its cursor (\`offset=\`), counted once it has the rows it missed.`,
  );
  return {
    title: "Many subscribers against bare Deno",
    baseline:
      "a bare `Deno.upgradeWebSocket` server (a greeting, one frame a row to every socket, a ring of recent frames for cursors) holding the same sockets, fed the same rows, in the same run",
    rows,
    notes,
  };
}

/** Runs the benchmark (bench/run.ts). */
export async function run(quick = false): Promise<BenchSection> {
  const z = sizes(quick);
  return section(z, await measureSubscribers(z, (l) => console.error(`  ${l}`)));
}

if (import.meta.main) {
  const z = sizes(Deno.args.includes("--quick"), Deno.args);
  const load = () => Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  console.log(
    `subscribers: ${JSON.stringify(z)}; load average ${load()}; ${new Date().toISOString()}`,
  );
  const got = await measureSubscribers(z, console.log);
  console.log(`load average ${load()}`);
  if (z.whos.length < 2) Deno.exit(0);
  const s = section(z, got);
  for (const r of s.rows) {
    console.log(
      `${r.case}: ${r.ours.toFixed(2)} ${r.unit} vs ${r.baseline.toFixed(2)}, ${
        Number.isFinite(r.ratio) ? r.ratio.toFixed(2) + "×" : "-"
      }${r.target ? ` (target ${r.target}: ${r.met ? "met" : "not met"})` : ""}`,
    );
  }
  console.log("\n" + renderSection(s));
}
