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
 * - **memory per idle subscriber**: the server's RSS (VmRSS) and JS heap
 *   after a full collection (through the V8 inspector,
 *   ../harness/inspector_gc.ts), both read before the first subscribe and
 *   again 1 s after the n-th, the difference divided by n;
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
 *   [--rounds N] [--window N] [--with streamcast,bare]
 */
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";
import { ensureNodeWs, Proc, procCpuMs, rssOf, sleep } from "../harness/contenders.ts";
import { heapAfterGc, inspectorUrl } from "../harness/inspector_gc.ts";
import { type BenchRow, type BenchSection, human } from "../harness/report.ts";

const here = new URL(".", import.meta.url).pathname;
const CLI = new URL("../../cli.ts", import.meta.url).pathname;
const BARE = `${here}../harness/bare_subs_server.ts`;
const CLIENT = `${here}../harness/subs_node.mjs`;

/** Descriptors each server gets beyond its subscribers (listener, log files, pipes). */
const SPARE_FDS = 500;
/** Rows published while the sockets are cut, for the storm's cursors to catch up on. */
const MISSED = 3;

type Who = "streamcast" | "bare";

interface Sizes {
  sizes: number[];
  rounds: number;
  /** Handshakes in flight at once. */
  window: number;
  whos: Who[];
}

/** One contender at one size. */
export interface SubsRun {
  n: number;
  /** RSS per subscriber, KiB. */
  rssKiB: number;
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
}

/** A server process fed rows on its stdin, with its port, pid and inspector. */
async function startServer(who: Who, n: number, dir: string) {
  const args = who === "bare" ? ["run", "-A", "--inspect=127.0.0.1:0", BARE] : [
    "run",
    "-A",
    "--inspect=127.0.0.1:0",
    CLI,
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
    cwd: CLI.slice(0, CLI.lastIndexOf("/") + 1),
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
    const t = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch { /* exited */ }
    }, 10_000);
    try {
      child.kill("SIGINT");
    } catch { /* exited */ }
    await child.status;
    clearTimeout(t);
    await drained;
  };
  const deadline = Date.now() + 30_000;
  let m: RegExpExecArray | null;
  while (!(m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(head))) {
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${who} server did not start:\n${head.slice(-2000)}`);
    }
    await sleep(20);
  }
  const inspector = inspectorUrl(head);
  if (!inspector) {
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
    port: Number(m[1]),
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

/** One contender at one size. */
async function once(who: Who, n: number, z: Sizes, log: (l: string) => void): Promise<SubsRun> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-subs-" });
  await Deno.writeTextFile(`${dir}/trades.json`, JSON.stringify(SCHEMA));
  const server = await startServer(who, n, dir);
  const gen = new Proc("subscribers", "node", [CLIENT]);
  const ask = async (cmd: Record<string, unknown>, timeoutMs = 300_000) => {
    await gen.send(JSON.stringify(cmd));
    return JSON.parse(await gen.line((l) => l.startsWith("{"), timeoutMs));
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
    const heap0 = await heapAfterGc(server.inspector);
    const rss0 = rssOf(server.pid).rss;
    const fds0 = openFds(server.pid);
    const c0 = procCpuMs(server.pid);
    const burst = await ask({ cmd: "open", url, n, window: z.window });
    const burstCpu = (procCpuMs(server.pid) - c0) / burst.ms * 100;
    await sleep(1000);
    const heap1 = await heapAfterGc(server.inspector);
    const rss1 = rssOf(server.pid).rss;
    const lat: number[] = [];
    const rounds: number[] = [];
    let missing = 0;
    for (let r = 0; r < z.rounds; r++) {
      await publish(1);
      const got = await ask({ cmd: "await", rows: published, timeoutMs: 30_000 });
      missing += got.missing;
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
    const storm = await ask({ cmd: "reconnect", url, window: z.window, rows: published });
    missing += storm.missing;
    const stats = await ask({ cmd: "stats" });
    const run: SubsRun = {
      n,
      rssKiB: (rss1 - rss0) * 1024 / n,
      heapKiB: (heap1.used - heap0.used) / 1024 / n,
      burst: burst.opened / (burst.ms / 1000),
      storm: storm.opened / (storm.ms / 1000),
      p50: pct(lat, 0.5),
      p99: pct(lat, 0.99),
      p999: pct(lat, 0.999),
      roundMs: rounds[Math.floor(rounds.length / 2)],
      refused: stats.refused,
      dropped: stats.dropped,
      missing,
      burstCpu,
    };
    log(
      `${who} n=${n}: RSS ${run.rssKiB.toFixed(1)} KiB/sub (${rss0.toFixed(0)} → ${
        rss1.toFixed(0)
      } MiB), heap ${run.heapKiB.toFixed(1)} KiB/sub; burst ${run.burst.toFixed(0)}/s (${
        burst.ms.toFixed(0)
      } ms, server ${burstCpu.toFixed(0)} %), storm ${run.storm.toFixed(0)}/s (${
        storm.ms.toFixed(0)
      } ms); broadcast p50 ${run.p50.toFixed(1)} p99 ${run.p99.toFixed(1)} ms, round ${
        run.roundMs.toFixed(1)
      } ms; refused ${run.refused}, dropped ${run.dropped}, missing ${missing}; stderr ${server.stderr().bytes} bytes`,
    );
    return run;
  } finally {
    await gen.send(JSON.stringify({ cmd: "exit" }));
    const t = setTimeout(() => gen.kill(), 10_000);
    await gen.child.status;
    clearTimeout(t);
    await server.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Every size, streamcast and bare alternating which goes first. */
export async function measureSubscribers(
  z: Sizes,
  log: (line: string) => void = () => {},
): Promise<Map<number, Record<Who, SubsRun>>> {
  await ensureNodeWs();
  const out = new Map<number, Record<Who, SubsRun>>();
  for (const [k, n] of z.sizes.entries()) {
    const order = k % 2 === 0 ? z.whos : [...z.whos].reverse();
    const got = {} as Record<Who, SubsRun>;
    for (const who of order) got[who] = await once(who, n, z, log);
    out.set(n, got);
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
    rounds: Number(flag("--rounds", quick ? "5" : "20")),
    window: Number(flag("--window", "500")),
    whos: flag("--with", "streamcast,bare").split(",") as Who[],
  };
  for (const n of z.sizes) {
    if (!Number.isInteger(n) || n < 1) {
      throw new Error(`bench/e2e/subscribers.ts: --sizes takes positive integers, got ${n}`);
    }
  }
  if (!z.whos.includes("streamcast") || !z.whos.includes("bare")) {
    throw new Error("bench/e2e/subscribers.ts: --with needs streamcast and bare");
  }
  return z;
}

const MEMORY = 1.2;
const SUBSCRIBES = 0.5;

function section(z: Sizes, got: Map<number, Record<Who, SubsRun>>): BenchSection {
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  for (const [n, { streamcast: s, bare: b }] of got) {
    const at = `${human(n)} subscribers`;
    const mem = s.rssKiB / b.rssKiB;
    rows.push({
      case: `${at}: RSS per idle subscriber vs bare Deno`,
      ours: s.rssKiB,
      baseline: b.rssKiB,
      unit: "KiB",
      ratio: mem,
      target: `≤ ${MEMORY}×`,
      met: mem <= MEMORY,
      note: `JS heap after a full collection: ${s.heapKiB.toFixed(2)} KiB a subscriber (bare ${
        b.heapKiB.toFixed(2)
      })`,
      ...(mem > MEMORY
        ? {
          limit: `${mem.toFixed(2)}× bare: ${
            (s.rssKiB - b.rssKiB).toFixed(1)
          } KiB more a subscriber`,
        }
        : {}),
    });
    for (
      const [what, key] of [["a burst", "burst"], [
        "a reconnect storm from cursors",
        "storm",
      ]] as const
    ) {
      const ratio = s[key] / b[key];
      rows.push({
        case: `${at}: subscribes/s, ${what}`,
        ours: s[key],
        baseline: b[key],
        unit: "subscribes/s",
        ratio,
        target: `≥ ${SUBSCRIBES}×`,
        met: ratio >= SUBSCRIBES,
        ...(key === "burst" ? { serverCpu: [s.burstCpu, b.burstCpu] as [number, number] } : {}),
        ...(ratio < SUBSCRIBES ? { limit: `${ratio.toFixed(2)}× bare` } : {}),
      });
    }
    for (const q of ["p50", "p99"] as const) {
      rows.push({
        case: `${at}: a broadcast round, ${q} over every subscriber`,
        ours: s[q],
        baseline: b[q],
        unit: "ms",
        ratio: s[q] / b[q],
        target: "",
        met: null,
      });
    }
    const lost = s.refused + s.dropped + s.missing;
    rows.push({
      case: `${at}: refused, dropped or missing a row`,
      ours: lost,
      baseline: b.refused + b.dropped + b.missing,
      unit: "subscribers",
      ratio: NaN,
      target: "0",
      met: lost === 0,
      ...(lost
        ? { limit: `refused ${s.refused}, dropped ${s.dropped}, rows missing ${s.missing}` }
        : {}),
    });
    notes.push(
      `${at}: streamcast p99.9 ${s.p999.toFixed(1)} ms, median round's slowest ${
        s.roundMs.toFixed(1)
      } ms (bare ${b.p999.toFixed(1)} and ${b.roundMs.toFixed(1)}); server CPU during the burst ${
        s.burstCpu.toFixed(0)
      } % (bare ${b.burstCpu.toFixed(0)} %).`,
    );
  }
  notes.push(
    `Each size runs streamcast (\`cli.ts serve --stdin\`, fsync on, \`frames=batch\`, \`--max-connections\`/\`--max-subscribers\` n + ${SPARE_FDS}) and the bare server, each a fresh process, in alternating order. The subscribers are one Node process (\`ws\`), sockets spread over 200 source addresses, at most ${z.window} handshakes in flight. Memory: RSS and the JS heap after a full collection (V8 inspector) before the first subscribe and 1 s after the last, divided by n. A broadcast round: one row written to the server's stdin with its send time in \`event_ts\`, latency taken at every subscriber, ${z.rounds} rounds 100 ms apart. The storm: every socket cut by the client, ${MISSED} rows published, every subscriber reconnected at its cursor (\`offset=\`), counted once it has the rows it missed.`,
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
  const s = section(z, await measureSubscribers(z, console.log));
  console.log(`load average ${load()}`);
  for (const r of s.rows) {
    console.log(
      `${r.case}: ${r.ours.toFixed(2)} ${r.unit} vs ${r.baseline.toFixed(2)}, ${
        Number.isFinite(r.ratio) ? r.ratio.toFixed(2) + "×" : "-"
      }${r.target ? ` (target ${r.target}: ${r.met ? "met" : "not met"})` : ""}`,
    );
  }
}
