/**
 * This checkout against another, in one sitting: paired runs (ABBA order, as
 * ../harness/ab.ts pairs them) of fan-out, replay, ingest and open-loop
 * publish → delivery latency, each against a real `cli.ts serve` process of
 * either checkout, spawned with `Deno.execPath()` from that checkout's folder.
 * Only the server differs between the two sides: the load generators, the
 * input rows and the logs replayed are this checkout's, the same for both.
 *
 * - fan-out: `serve --stdin` fed trade rows at a fixed pace (more than it can
 *   deliver), `--subs` batched subscribers in one load-generator process
 *   (../harness/fanout_client.ts); rows delivered per second over a window,
 *   and the server's CPU per delivered row;
 * - replay: a log of `--rows` trade rows (written once by this checkout's
 *   Log, copied afresh for every run), from one unsealed segment (so that
 *   nothing is sealed while it replays) and from chunks, to one batched
 *   subscriber from offset 1 (`--max-replay none`); rows/s;
 * - ingest: the same rows piped into `serve --stdin`, fsync on (./ingest.ts's
 *   run); rows/s and server CPU a row;
 * - latency: `serve --publish`, one WebSocket publisher (client/publisher.ts)
 *   in this process sending one row at a time at a fixed rate, open loop
 *   (each row is sent at its planned time whatever the acks do, and carries
 *   that time in `event_ts`), `--lat-subs` batched subscribers in the load
 *   generator; latency from the planned send to the receipt, p50, p99 and
 *   p99.9 over a window.
 *
 * Every pair runs every case, both sides back to back, so each case's pairs
 * are spread over the whole sitting. Reported: each figure's after / before
 * ratio in every pair, and their median, least and most. A progress line is
 * printed for every pair of every case.
 *
 * Not in bench/run.ts's list: it needs the other checkout.
 *
 * Run: STREAMCAST_BENCH_BEFORE=/path/to/checkout deno run --config deno.dev.json -A \
 *   bench/e2e/ab.ts [--quick] [--pairs P] [--only fanout,replay,ingest,latency] \
 *   [--subs N] [--rows N] [--rate R] [--lat-subs N] [--window S]
 */
import { stopChild, waitListening } from "../harness/listening.ts";
import { publisher } from "../../client/publisher.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";
import { type Pair, type Ratios, ratios, runPair, type Side } from "../harness/ab.ts";
import { Proc, procCpuMs, sleep } from "../harness/contenders.ts";
import type { LoadConfig } from "../harness/fanout_client.ts";
import { fill } from "../harness/trade_log.ts";
import { CLI, makeInput, type ServeRun, serveStdin } from "./ingest.ts";

function flag(name: string, fallback: string): string {
  const i = Deno.args.indexOf(name);
  return i === -1 ? fallback : Deno.args[i + 1];
}

const CASES = ["fanout", "replay", "ingest", "latency"] as const;
type Case = typeof CASES[number];

const quick = Deno.args.includes("--quick");
const SIZES = {
  pairs: Number(flag("--pairs", quick ? "2" : "8")),
  /** Fan-out: subscribers, and the rows/s fed to the server's stdin. */
  subs: Number(flag("--subs", quick ? "100" : "1000")),
  feed: Number(flag("--feed", "50000")),
  /** Fan-out: ms between writes to the server's stdin. */
  tick: Number(flag("--tick", "1")),
  /** Fan-out and latency: warm-up and measured window, s. */
  warmup: Number(flag("--warmup", quick ? "1" : "2")),
  window: Number(flag("--window", quick ? "2" : "5")),
  /** Replay and ingest: rows. */
  rows: Number(flag("--rows", quick ? "100000" : "1000000")),
  /** Latency: rows/s published, subscribers, window, s. */
  rate: Number(flag("--rate", "1000")),
  latSubs: Number(flag("--lat-subs", "10")),
  latWindow: Number(flag("--lat-window", quick ? "3" : "10")),
};
const only = new Set(flag("--only", CASES.join(",")).split(",")) as Set<Case>;
for (const c of only) if (!CASES.includes(c)) throw new Error(`bench/e2e/ab.ts: no case ${c}`);

const here = new URL(".", import.meta.url).pathname;
const GENERATOR = `${here}../harness/fanout_client.ts`;

const loadavg = (): string => {
  try {
    return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  } catch {
    return "?";
  }
};

/** A running `cli.ts serve` of one checkout. */
interface CliServer {
  port: number;
  pid: number;
  /** Its stdin (with `stdin: true`). */
  stdin?: WritableStreamDefaultWriter<Uint8Array>;
  /** What it printed on stderr so far. */
  stderr(): string;
  stop(): Promise<void>;
}

/** Starts `cli serve ARGS --port 0` from the cli's folder and waits for its port. */
async function startCli(cli: string, args: string[], stdin = false): Promise<CliServer> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", cli, "serve", ...args, "--port", "0"],
    stdin: stdin ? "piped" : "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    cwd: cli.slice(0, cli.lastIndexOf("/") + 1),
  }).spawn();
  let text = "";
  const drained = (async () => {
    for await (const c of child.stderr.pipeThrough(new TextDecoderStream())) text += c;
  })().catch(() => {});
  const writer = stdin ? child.stdin.getWriter() : undefined;
  const stop = async () => {
    await writer?.close().catch(() => {});
    await stopChild(child, "SIGTERM", [drained]);
  };
  const port = await waitListening(() => text, `${cli} serve`, stop);
  return { port, pid: child.pid, stdin: writer, stderr: () => text, stop };
}

/** Starts the load generator (this checkout's) and waits until its sockets are open. */
async function startGenerator(cfg: LoadConfig): Promise<Proc> {
  const gen = new Proc("generator", Deno.execPath(), ["run", "-A", GENERATOR, JSON.stringify(cfg)]);
  if (!cfg.until) await gen.line((l) => l === "OPEN", 60_000);
  return gen;
}

async function schemaDir(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-ab-" });
  await Deno.writeTextFile(`${dir}/trades.json`, JSON.stringify(SCHEMA));
  return dir;
}

// --- fan-out ---

interface FanoutRun {
  /** Rows delivered to all subscribers together, per second. */
  rate: number;
  /** Server CPU, µs a delivered row. */
  cpuUs: number;
  /** Rows fed per second over the window. */
  fed: number;
  serverCpu: number;
  genCpu: number;
}

/**
 * Writes `rate` rows/s of `jsons` (cycled) to `w`, a write every `SIZES.tick` ms, until
 * `stop()`; `fed()` is the rows written so far.
 */
function feed(w: WritableStreamDefaultWriter<Uint8Array>, jsons: string[], rate: number) {
  const enc = new TextEncoder();
  let fed = 0;
  let stopping = false;
  const done = (async () => {
    const t0 = performance.now();
    while (!stopping) {
      const due = Math.floor((performance.now() - t0) * rate / 1000);
      if (due > fed) {
        const lines: string[] = [];
        for (let i = fed; i < due; i++) lines.push(jsons[i % jsons.length]);
        await w.write(enc.encode(lines.join("\n") + "\n"));
        fed = due;
      }
      await sleep(SIZES.tick);
    }
  })().catch(() => {});
  return {
    fed: () => fed,
    stop: async () => {
      stopping = true;
      await done;
    },
  };
}

async function fanout(cli: string, jsons: string[]): Promise<FanoutRun> {
  const dir = await schemaDir();
  const server = await startCli(cli, [
    "--stream",
    `trades=${dir}/trades.json`,
    "--stdin",
    "trades",
    "--root",
    `${dir}/data`,
    "--seal-every",
    "0",
  ], true);
  let gen: Proc | undefined;
  let feeder: ReturnType<typeof feed> | undefined;
  try {
    gen = await startGenerator({
      url: `ws://127.0.0.1:${server.port}/trades?frames=batch`,
      subs: SIZES.subs,
    });
    feeder = feed(server.stdin!, jsons, SIZES.feed);
    await gen.line((l) => l === "FLOWING", 30_000);
    await sleep(SIZES.warmup * 1000);
    const [g0, c0, f0] = [await gen.mark(), procCpuMs(server.pid), feeder.fed()];
    await sleep(SIZES.window * 1000);
    const [g1, c1, f1] = [await gen.mark(), procCpuMs(server.pid), feeder.fed()];
    const ms = (g1.t as number) - (g0.t as number);
    const rate = ((g1.rows as number) - (g0.rows as number)) / (ms / 1000);
    const serverCpu = (c1 - c0) / ms * 100;
    return {
      rate,
      cpuUs: (c1 - c0) * 1000 / ((g1.rows as number) - (g0.rows as number)),
      fed: (f1 - f0) / (ms / 1000),
      serverCpu,
      genCpu: ((g1.cpuUs as number) - (g0.cpuUs as number)) / 1000 / ms * 100,
    };
  } finally {
    gen?.kill(); // closing a thousand busy sockets politely is slow
    await gen?.child.status;
    await feeder?.stop();
    await server.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

// --- replay ---

/** Segment size of the replayed logs: the segments case's log is one segment. */
const ONE_SEGMENT = 1 << 30;

interface ReplayRun {
  rate: number;
  /** Server CPU, µs a row (from the subscriber's connect to its last row). */
  cpuUs: number;
}

async function replay(cli: string, from: string): Promise<ReplayRun> {
  const dir = await schemaDir();
  // A fresh copy: opening a log may seal its segments, and each run must start alike.
  const cp = await new Deno.Command("cp", { args: ["-a", from, `${dir}/data`] }).output();
  if (!cp.success) throw new Error(`cp: ${new TextDecoder().decode(cp.stderr)}`);
  const server = await startCli(cli, [
    "--stream",
    `trades=${dir}/trades.json`,
    "--root",
    `${dir}/data`,
    "--seal-every",
    "0",
    "--max-replay",
    "none",
    "--segment-bytes",
    String(ONE_SEGMENT),
  ]);
  try {
    const c0 = procCpuMs(server.pid);
    const gen = await startGenerator({
      url: `ws://127.0.0.1:${server.port}/trades?offset=1&frames=batch`,
      subs: 1,
      until: SIZES.rows,
    });
    const r = JSON.parse(await gen.line((l) => l.startsWith("{"), 300_000));
    await gen.child.status;
    const c1 = procCpuMs(server.pid);
    return { rate: r.rate, cpuUs: (c1 - c0) * 1000 / r.rows };
  } finally {
    await server.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

// --- latency ---

interface LatencyRun {
  p50: number;
  p99: number;
  p999: number;
  max: number;
  /** Samples (rows × subscribers) in the window. */
  n: number;
  serverCpu: number;
  /** The latest a row was sent after its planned time, ms (this process's own stalls). */
  sendLag: number;
}

async function latency(cli: string): Promise<LatencyRun> {
  const dir = await schemaDir();
  const server = await startCli(cli, [
    "--stream",
    `trades=${dir}/trades.json`,
    "--publish",
    "trades",
    "--root",
    `${dir}/data`,
    "--seal-every",
    "0",
  ]);
  let gen: Proc | undefined;
  try {
    gen = await startGenerator({
      url: `ws://127.0.0.1:${server.port}/trades?frames=batch`,
      subs: SIZES.latSubs,
      latency: true,
    });
    const pub = await publisher(`ws://127.0.0.1:${server.port}/trades`, {
      producer: `bench-ab-${crypto.randomUUID().slice(0, 8)}`,
    });
    const make = tradeRows(11);
    const acks: Promise<unknown>[] = [];
    let failed = 0;
    let stopping = false;
    let sendLag = 0;
    let measuring = false;
    // Open loop: row i is planned at t0 + i / rate and sent then (or as soon
    // after as this process's timers allow), without waiting for any ack.
    const sending = (async () => {
      const t0 = performance.now();
      const origin = performance.timeOrigin;
      let i = 0;
      while (!stopping) {
        const due = Math.floor((performance.now() - t0) * SIZES.rate / 1000);
        for (; i < due; i++) {
          const row = make(i);
          const planned = t0 + i * 1000 / SIZES.rate;
          row.event_ts = Math.round((origin + planned) * 1000);
          if (measuring) sendLag = Math.max(sendLag, performance.now() - planned);
          acks.push(pub.send(row).catch(() => void failed++));
        }
        await sleep(Math.max(0, t0 + (i + 1) * 1000 / SIZES.rate - performance.now()));
      }
    })();
    await gen.line((l) => l === "FLOWING", 30_000);
    await sleep(SIZES.warmup * 1000);
    const g0 = await gen.mark(); // drops the warm-up's samples
    measuring = true;
    const c0 = procCpuMs(server.pid);
    await sleep(SIZES.latWindow * 1000);
    const g1 = await gen.mark();
    const c1 = procCpuMs(server.pid);
    measuring = false;
    stopping = true;
    await sending;
    await Promise.all(acks);
    await pub.close();
    if (failed) throw new Error(`${failed} of ${acks.length} publishes failed`);
    const lat = g1.lat as LatencyRun;
    return {
      ...lat,
      serverCpu: (c1 - c0) / ((g1.t as number) - (g0.t as number)) * 100,
      sendLag,
    };
  } finally {
    gen?.kill();
    await gen?.child.status;
    await server.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

// --- the sitting ---

const before = Deno.env.get("STREAMCAST_BENCH_BEFORE");
if (!before) {
  throw new Error("bench/e2e/ab.ts: set STREAMCAST_BENCH_BEFORE to the checkout to compare");
}
const cliOf = (side: Side) => side === "before" ? `${before.replace(/\/$/, "")}/cli.ts` : CLI;

const t0 = performance.now();
const load0 = loadavg();
console.log(
  `A/B: before ${before}, after ${new URL("../..", import.meta.url).pathname}; ` +
    `${SIZES.pairs} pairs; load average ${load0}; ${new Date().toISOString()}`,
);

const { bytes, jsons } = makeInput(SIZES.rows);
const logs: Record<"segments" | "chunks", string> = { segments: "", chunks: "" };
const work = await Deno.makeTempDir({ prefix: "streamcast-bench-ab-logs-" });
if (only.has("replay")) {
  for (const kind of ["segments", "chunks"] as const) {
    logs[kind] = `${work}/${kind}`;
    // From segments: one segment, so that the server has none to seal while it replays.
    await fill(
      logs[kind],
      SIZES.rows,
      kind === "chunks",
      kind === "segments" ? ONE_SEGMENT : undefined,
    );
  }
}

// Each side's server started and stopped once before the pairs, so that the
// first measured run of neither pays for compiling its modules.
for (const side of ["before", "after"] as const) {
  const dir = await schemaDir();
  const s = await startCli(cliOf(side), [
    "--stream",
    `trades=${dir}/trades.json`,
    "--root",
    `${dir}/data`,
  ]);
  await s.stop();
  await Deno.remove(dir, { recursive: true });
}

const got = {
  fanout: [] as Pair<FanoutRun>[],
  segments: [] as Pair<ReplayRun>[],
  chunks: [] as Pair<ReplayRun>[],
  ingest: [] as Pair<ServeRun>[],
  latency: [] as Pair<LatencyRun>[],
};
const k = (x: number) => `${(x / 1000).toFixed(1)} k`;
const at = () => `${((performance.now() - t0) / 1000).toFixed(0)} s, load ${loadavg()}`;
const progress = <T>(name: string, p: number, pair: Pair<T>, show: (t: T) => string) =>
  console.log(
    `pair ${p + 1}/${SIZES.pairs} ${name} (${p % 2 ? "after first" : "before first"}): before ${
      show(pair.before)
    }; after ${show(pair.after)} [${at()}]`,
  );

try {
  for (let p = 0; p < SIZES.pairs; p++) {
    if (only.has("fanout")) {
      const pair = await runPair(p, (side) => fanout(cliOf(side), jsons));
      got.fanout.push(pair);
      progress(
        "fan-out",
        p,
        pair,
        (r) =>
          `${k(r.rate)} deliveries/s (${r.cpuUs.toFixed(2)} µs server CPU each, ` +
          `server ${r.serverCpu.toFixed(0)} %, generator ${r.genCpu.toFixed(0)} %, fed ${
            k(r.fed)
          } rows/s)`,
      );
    }
    if (only.has("replay")) {
      for (const kind of ["segments", "chunks"] as const) {
        const pair = await runPair(p, (side) => replay(cliOf(side), logs[kind]));
        got[kind].push(pair);
        progress(
          `replay from ${kind}`,
          p,
          pair,
          (r) => `${k(r.rate)} rows/s (${r.cpuUs.toFixed(2)} µs server CPU a row)`,
        );
      }
    }
    if (only.has("ingest")) {
      const pair = await runPair(p, (side) => serveStdin(cliOf(side), bytes, SIZES.rows));
      got.ingest.push(pair);
      progress(
        "ingest",
        p,
        pair,
        (r) =>
          `${k(r.rate)} rows/s (${(r.cpu / 100 * r.wallMs * 1000 / SIZES.rows).toFixed(2)} µs ` +
          `server CPU a row, ${r.hwmMiB.toFixed(0)} MiB peak RSS)`,
      );
    }
    if (only.has("latency")) {
      const pair = await runPair(p, (side) => latency(cliOf(side)));
      got.latency.push(pair);
      progress(
        "latency",
        p,
        pair,
        (r) =>
          `p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, p99.9 ${
            r.p999.toFixed(2)
          } ms, max ${r.max.toFixed(1)} ms (${r.n} samples, server ${
            r.serverCpu.toFixed(0)
          } %, sends at most ${r.sendLag.toFixed(1)} ms late)`,
      );
    }
  }
} finally {
  await Deno.remove(work, { recursive: true }).catch(() => {});
}

// --- the report ---

const rows: [string, string, Ratios][] = [];
const add = <T>(pairs: Pair<T>[], name: string, better: string, f: (t: T) => number) => {
  if (pairs.length) rows.push([name, better, ratios(pairs, f)]);
};
add(
  got.fanout,
  `fan-out, ${SIZES.subs} subscribers (batched frames): deliveries/s`,
  "higher",
  (r) => r.rate,
);
add(got.fanout, "fan-out: server CPU a delivered row", "lower", (r) => r.cpuUs);
add(got.segments, `replay of ${SIZES.rows} rows from segments: rows/s`, "higher", (r) => r.rate);
add(got.segments, "replay from segments: server CPU a row", "lower", (r) => r.cpuUs);
add(got.chunks, `replay of ${SIZES.rows} rows from chunks: rows/s`, "higher", (r) => r.rate);
add(got.chunks, "replay from chunks: server CPU a row", "lower", (r) => r.cpuUs);
add(
  got.ingest,
  `ingest of ${SIZES.rows} rows from stdin (fsync on): rows/s`,
  "higher",
  (r) => r.rate,
);
add(got.ingest, "ingest: server CPU a row", "lower", (r) => r.cpu * r.wallMs);
add(got.ingest, "ingest: peak RSS", "lower", (r) => r.hwmMiB);
for (const [q, key] of [["p50", "p50"], ["p99", "p99"], ["p99.9", "p999"]] as const) {
  add(
    got.latency,
    `latency, ${SIZES.rate} rows/s to ${SIZES.latSubs} subscribers: ${q}`,
    "lower",
    (r) => r[key],
  );
}
const minutes = (performance.now() - t0) / 60_000;
const f2 = (x: number) => `${x.toFixed(2)}×`;
console.log(
  `\nafter / before, ${SIZES.pairs} pairs ABBA, ${minutes.toFixed(1)} minutes; ` +
    `load average ${load0} at the start, ${loadavg()} at the end\n`,
);
console.log("| figure | better | median | min–max | each pair |");
console.log("|---|---|---|---|---|");
for (const [name, better, r] of rows) {
  console.log(
    `| ${name} | ${better} | ${f2(r.median)} | ${f2(r.min)}–${f2(r.max)} | ${
      r.each.map((x) => x.toFixed(2)).join(", ")
    } |`,
  );
}
// A publisher's or generator's leftover timer must not keep the finished run alive.
Deno.exit(0);
