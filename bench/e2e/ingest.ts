/**
 * Ingest from stdin: durable rows/s of a real `cli.ts serve --stdin` process
 * fed NDJSON trade rows through a pipe (fsync on), against a bare in-process
 * `Log.appendMany` of the same encoded rows in the same run (the ceiling: the
 * disk and the committer, no reading, parsing or validating). Also the cost of
 * each stage of the stdin path on the same rows, in ns per row, measured in
 * this process. The peer, in the same run: NATS JetStream (nats-server on a
 * file store, started by `../harness/nats.ts`; the benchmark fails if it cannot start)
 * taking the same rows from this process, interleaved with our runs round by
 * round: published without acks and timed until the stream holds every row
 * (like a pipe: nothing acknowledges a row), and once with one ack a row,
 * pipelined with a sliding window of acks outstanding.
 *
 * `STREAMCAST_BENCH_BEFORE=/path/to/checkout` also runs that checkout's
 * `cli.ts` in the same run (a before/after comparison).
 *
 * Run alone: deno run -A bench/e2e/ingest.ts [--quick]
 */
import { connect as natsConnect, type JetStreamClient } from "nats";
import { Log } from "../../log/mod.ts";
import { compileSchema } from "../../schema/compile.ts";
import { LineSplitter } from "../../server/ingest/_line_splitter.ts";
import { decodeLine } from "../../server/ingest/_decode.ts";
import {
  type BenchRow,
  type BenchSection,
  human,
  median,
  renderSection,
} from "../harness/report.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";
import { publishUnacked, startNats } from "../harness/nats.ts";
import { procCpuMs, rssOf } from "../harness/contenders.ts";

/** This checkout's `cli.ts`. */
export const CLI: string = new URL("../../cli.ts", import.meta.url).pathname;

/** The NDJSON input: `n` trade rows, one a line, and each row's encoded JSON. */
export function makeInput(n: number): { bytes: Uint8Array; jsons: string[] } {
  const make = tradeRows(7);
  const jsons = new Array<string>(n);
  for (let i = 0; i < n; i++) jsons[i] = JSON.stringify(make(i));
  return { bytes: new TextEncoder().encode(jsons.join("\n") + "\n"), jsons };
}

/** One `serve --stdin` run: rows/s, server CPU (% of one core), wall time, peak RSS (MiB). */
export interface ServeRun {
  rate: number;
  cpu: number;
  wallMs: number;
  hwmMiB: number;
}

/** The least server CPU a row took over the runs, µs (CPU is steadier than wall time on a shared machine). */
function cpuPerRow(runs: Omit<ServeRun, "hwmMiB">[], n: number): string {
  return (Math.min(...runs.map((x) => x.cpu / 100 * x.wallMs)) * 1000 / n).toFixed(2);
}

/**
 * Feeds `bytes` to a fresh `cli` serve --stdin and times it until every row
 * is durable; `denoFlags` go to the server's `deno run` (e.g. `--cpu-prof`).
 */
export async function serveStdin(
  cli: string,
  bytes: Uint8Array,
  n: number,
  denoFlags: string[] = [],
): Promise<ServeRun> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-ingest-" });
  await Deno.writeTextFile(`${dir}/trades.json`, JSON.stringify(SCHEMA));
  const proc = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      ...denoFlags,
      cli,
      "serve",
      "--stream",
      `trades=${dir}/trades.json`,
      "--stdin",
      "trades",
      "--root",
      `${dir}/data`,
      "--port",
      "0",
      "--seal-every",
      "0",
    ],
    stdin: "piped",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    // From its checkout's folder, so that it runs with that checkout's deno.json.
    cwd: cli.slice(0, cli.lastIndexOf("/") + 1),
  }).spawn();
  let text = "";
  const wake: (() => void)[] = [];
  const drained = (async () => {
    const decoder = new TextDecoder();
    for await (const c of proc.stderr) {
      text += decoder.decode(c, { stream: true });
      for (const w of wake.splice(0)) w();
    }
  })();
  const waitFor = async (re: RegExp, ms: number): Promise<void> => {
    const t0 = performance.now();
    while (!re.test(text)) {
      if (performance.now() - t0 > ms) {
        throw new Error(`serve did not print ${re} within ${ms} ms; stderr: ${text.slice(-2000)}`);
      }
      await new Promise<void>((r) => {
        wake.push(r);
        setTimeout(r, 50);
      });
    }
  };
  try {
    await waitFor(/listening on/, 30_000);
    const writer = proc.stdin.getWriter();
    const cpu0 = procCpuMs(proc.pid);
    const t0 = performance.now();
    const step = 1 << 20;
    for (let at = 0; at < bytes.length; at += step) {
      await writer.write(bytes.subarray(at, Math.min(bytes.length, at + step)));
    }
    await writer.close();
    await waitFor(/end of stdin/, 300_000);
    const wallMs = performance.now() - t0;
    const cpuMs = procCpuMs(proc.pid) - cpu0;
    const hwmMiB = rssOf(proc.pid).hwm;
    const m = /\((\d+) rows accepted, (\d+) rejected\)/.exec(text);
    if (!m || Number(m[1]) !== n || Number(m[2]) !== 0) {
      throw new Error(`serve stored ${m?.[1]} of ${n} rows (${m?.[2]} rejected)`);
    }
    return { rate: n / (wallMs / 1000), cpu: cpuMs / wallMs * 100, wallMs, hwmMiB };
  } finally {
    try {
      proc.kill("SIGTERM");
    } catch { /* exited */ }
    await proc.status;
    await drained;
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** The ceiling: the same encoded rows appended in-process with `Log.appendMany`, fsync on. */
async function bareAppend(jsons: string[], batch: number): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-ingest-" });
  const log = await Log.open(`${dir}/log`, { timers: false, chunks: false });
  try {
    const t0 = performance.now();
    const done: Promise<number>[] = [];
    for (let at = 0; at < jsons.length; at += batch) {
      done.push(log.appendMany(jsons.slice(at, at + batch)));
      // Bounded like ingest's in-flight window: two batches ahead.
      if (done.length > 2) await done.shift();
    }
    await Promise.all(done);
    return jsons.length / ((performance.now() - t0) / 1000);
  } finally {
    await log.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** The peer's run: rows/s, its server's CPU (% of one core), wall time. */
interface NatsRun extends Omit<ServeRun, "hwmMiB"> {
  /** Acks outstanding (0: published without acks). */
  window: number;
}

// Acks outstanding in the acked publish: of 64, 1024 and 8192 tried on
// 200 k rows here, 1024 was the fastest (9.0, 11.1, 10.3 k rows/s).
const NATS_WINDOW = 1024;
// Publishes between flushes (a PING/PONG: the bound on what is unsent) in the
// publish without acks.
const NATS_FLUSH_EVERY = 1024;

/**
 * Publishes `rows` to JetStream pipelined: up to `window` publishes awaiting
 * their PubAck, the oldest awaited when the window is full (a sliding window,
 * so that the connection never drains between batches).
 */
async function natsPublish(
  js: JetStreamClient,
  subject: string,
  rows: Uint8Array[],
  window: number,
): Promise<void> {
  const ring = new Array<Promise<unknown>>(window);
  let n = 0;
  for (const r of rows) {
    const slot = n % window;
    if (n >= window) await ring[slot];
    ring[slot] = js.publish(subject, r);
    n++;
  }
  await Promise.all(ring.slice(0, Math.min(n, window)));
}

/** The peer, started: one measured publish of every row per call. */
interface NatsPeer {
  version: string;
  /**
   * Publishes every row to a fresh stream with `window` acks outstanding or,
   * with 0, without acks, timed until the stream holds every row.
   */
  publish(window: number): Promise<NatsRun>;
  close(): Promise<void>;
}

/**
 * The peer: the same rows (one line each, as bytes) published to a NATS
 * JetStream stream on a file store, each publish acknowledged, after a
 * warm-up. Throws if nats-server cannot start (the row would mean nothing
 * without it).
 */
async function startPeer(jsons: string[]): Promise<NatsPeer> {
  const nats = await startNats();
  if ("missing" in nats) throw new Error(`the ingest benchmark needs NATS: ${nats.missing}`);
  const enc = new TextEncoder();
  const rows = jsons.map((j) => enc.encode(j));
  let nc;
  try {
    nc = await natsConnect({ servers: nats.url });
  } catch (err) {
    await nats.stop();
    throw err;
  }
  const conn = nc;
  const jsm = await conn.jetstreamManager();
  const js = conn.jetstream();
  await jsm.streams.add({ name: "WARM", subjects: ["warm"], storage: "file" as never });
  await natsPublish(js, "warm", rows.slice(0, 50_000), 1024);
  await jsm.streams.delete("WARM");
  let k = 0;
  return {
    version: nats.version,
    async publish(window) {
      const name = `INGEST${k++}`;
      await jsm.streams.add({ name, subjects: [name], storage: "file" as never });
      const cpu0 = procCpuMs(nats.pid);
      const t0 = performance.now();
      if (window > 0) await natsPublish(js, name, rows, window);
      else await publishUnacked(conn, name, name, rows, NATS_FLUSH_EVERY, 300_000);
      const wallMs = performance.now() - t0;
      const cpuMs = procCpuMs(nats.pid) - cpu0;
      const info = await jsm.streams.info(name);
      await jsm.streams.delete(name);
      if (info.state.messages !== rows.length) {
        throw new Error(`JetStream stored ${info.state.messages} of ${rows.length} rows`);
      }
      return { rate: rows.length / (wallMs / 1000), cpu: cpuMs / wallMs * 100, wallMs, window };
    },
    async close() {
      await conn.close();
      await nats.stop();
    },
  };
}

/** ns per row of `fn` over the rows, best of `reps` passes. */
function perRow(n: number, reps: number, fn: () => void): number {
  const times: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  return (Math.min(...times) * 1e6) / n;
}

/** The stages of the stdin path, each on the same rows, ns per row. */
function stages(bytes: Uint8Array, jsons: string[]): { name: string; ns: number }[] {
  const n = jsons.length;
  const schema = compileSchema(SCHEMA);
  const chunks: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; at += 65536) {
    chunks.push(bytes.subarray(at, Math.min(bytes.length, at + 65536)));
  }
  const lines = jsons.map((j) => new TextEncoder().encode(j));
  const texts = jsons;
  const rows = texts.map((t) => JSON.parse(t));
  let sink = 0;
  const out: { name: string; ns: number }[] = [];
  out.push({
    name: "split and decode (LineSplitter, 64 KiB chunks)",
    ns: perRow(n, 5, () => {
      const s = new LineSplitter(1 << 24);
      for (const c of chunks) {
        s.feed(c);
        for (let l = s.next(); l !== null; l = s.next()) sink++;
      }
    }),
  });
  out.push({
    name: "decode one line (TextDecoder, the old way)",
    ns: perRow(n, 5, () => {
      for (const l of lines) sink += decodeLine(l)!.length;
    }),
  });
  out.push({
    name: "check the encoded form (isEncoded)",
    ns: perRow(n, 5, () => {
      for (const t of texts) sink += schema.isEncoded(t) ? 1 : 0;
    }),
  });
  out.push({
    name: "JSON.parse",
    ns: perRow(n, 5, () => {
      for (const t of texts) sink += JSON.parse(t) === null ? 0 : 1;
    }),
  });
  out.push({
    name: "validate (ajv)",
    ns: perRow(n, 5, () => {
      for (const r of rows) sink += schema.validate(r) === null ? 1 : 0;
    }),
  });
  out.push({
    name: "encode",
    ns: perRow(n, 5, () => {
      for (const r of rows) sink += schema.encode(r).length;
    }),
  });
  if (sink < 0) console.log(sink);
  return out;
}

/** The log's share: `Log.appendMany` of the encoded rows, fsync off (writes, no syncs), ns a row. */
async function appendStage(jsons: string[]): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-ingest-" });
  const log = await Log.open(`${dir}/log`, { timers: false, chunks: false, fsync: false });
  try {
    let best = Infinity;
    for (let r = 0; r < 3; r++) {
      const t0 = performance.now();
      const done: Promise<number>[] = [];
      for (let at = 0; at < jsons.length; at += 4096) {
        done.push(log.appendMany(jsons.slice(at, at + 4096)));
        if (done.length > 2) await done.shift();
      }
      await Promise.all(done);
      best = Math.min(best, performance.now() - t0);
    }
    return (best * 1e6) / jsons.length;
  } finally {
    await log.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const n = quick ? 200_000 : 1_000_000;
  const { bytes, jsons } = makeInput(n);
  const before = Deno.env.get("STREAMCAST_BENCH_BEFORE");
  const rounds = quick ? 1 : 3;
  const ours: ServeRun[] = [];
  const old: ServeRun[] = [];
  const bare: number[] = [];
  const theirs: NatsRun[] = [];
  const acked: NatsRun[] = [];
  const peer = await startPeer(jsons);
  try {
    // Interleaved, so that the machine's load falls on every contender alike.
    for (let r = 0; r < rounds; r++) {
      bare.push(await bareAppend(jsons, 4096));
      ours.push(await serveStdin(CLI, bytes, n));
      if (before) old.push(await serveStdin(`${before}/cli.ts`, bytes, n));
      theirs.push(await peer.publish(0));
      // Acked, once: at its rate the same rows take minutes.
      if (r === 0) acked.push(await peer.publish(NATS_WINDOW));
    }
  } finally {
    await peer.close();
  }
  const best = <T extends Omit<ServeRun, "hwmMiB">>(xs: T[]): T =>
    xs.reduce((a, b) => (b.rate > a.rate ? b : a));
  const o = best(ours);
  const ceiling = Math.max(...bare);
  const rows: BenchSection["rows"] = [{
    case: `${
      human(n)
    } trade rows piped into \`cli.ts serve --stdin\` (fsync on), best of ${rounds}`,
    ours: o.rate,
    baseline: ceiling,
    unit: "rows/s",
    ratio: o.rate / ceiling,
    target: "≥ 500 k rows/s",
    met: o.rate >= 500_000,
    serverCpu: [o.cpu],
    note: `median ${human(median(ours.map((x) => x.rate)))} rows/s; ${
      (o.wallMs * 1000 / n).toFixed(2)
    } µs a row of wall time, ${cpuPerRow(ours, n)} µs of server CPU (best run)`,
  }];
  if (before) {
    const b = best(old);
    rows.push({
      case: `the same, the code before (${before})`,
      ours: b.rate,
      baseline: ceiling,
      unit: "rows/s",
      ratio: b.rate / ceiling,
      target: "",
      met: null,
      serverCpu: [b.cpu],
      note: `median ${human(median(old.map((x) => x.rate)))} rows/s, ${
        cpuPerRow(old, n)
      } µs of server CPU a row; now ${(o.rate / b.rate).toFixed(2)}× the rows/s (best runs), ${
        (median(old.map((x) => x.cpu * x.wallMs)) / median(ours.map((x) => x.cpu * x.wallMs)))
          .toFixed(2)
      }× less CPU a row (medians)`,
    });
  }
  const peerRow = (t: NatsRun, runs: NatsRun[], how: string): BenchRow => ({
    case: `the same rows published to NATS JetStream (file store), ${how}, best of ${runs.length}`,
    ours: o.rate,
    baseline: t.rate,
    unit: "rows/s",
    ratio: o.rate / t.rate,
    target: "",
    met: null,
    serverCpu: [o.cpu, t.cpu],
    note: `JetStream ${human(t.rate)} rows/s (median ${human(median(runs.map((x) => x.rate)))}), ${
      cpuPerRow(runs, n)
    } µs of nats-server CPU a row; ours ${
      (o.rate / t.rate).toFixed(2)
    }× its rows/s (best runs) at ${
      (Number(cpuPerRow(ours, n)) / Number(cpuPerRow(runs, n))).toFixed(2)
    }× its server CPU a row`,
  });
  rows.push(
    peerRow(
      best(theirs),
      theirs,
      `no acks (a flush every ${human(NATS_FLUSH_EVERY)}), timed until the stream holds every row`,
    ),
    peerRow(best(acked), acked, `pipelined, one ack a row, ${human(NATS_WINDOW)} acks outstanding`),
  );
  const st = stages(bytes, jsons);
  const append = await appendStage(jsons);
  st.push({ name: "append (Log.appendMany, fsync off)", ns: append });
  const cpuUs = Number(cpuPerRow(ours, n));
  rows[0].limit = `${((5e5 - o.rate) / 5e5 * 100).toFixed(0)} % short at ${
    o.cpu.toFixed(0)
  } % server CPU (${cpuUs.toFixed(2)} µs of CPU a row, of which the log's append is about ${
    (append / 1000).toFixed(2)
  }); the bare appendMany ceiling of the same run is ${human(ceiling)} rows/s.`;
  return {
    title: "Ingest from stdin",
    baseline: "`Log.appendMany` of the same encoded rows in 4096-row batches, in-process, " +
      "fsync on (the ceiling: no reading, parsing or validating)",
    rows,
    notes: [
      rows.map((r) => `${r.case}: ${r.note}.`).join(" "),
      "Stage costs on the same rows, in this process (ns a row, best of several passes): " +
      st.map((s) => `${s.name} ${s.ns.toFixed(0)}`).join("; ") + ". " +
      "The stdin path now splits a 64 KiB read into lines and decodes them in one call, checks " +
      "each line against the schema's encoded form (one generated regular expression: a row " +
      "printed by JSON.stringify with its keys in column order is stored as it is), and sends " +
      "each read's rows to the stream in one batch (one commit, one promise); only lines that " +
      "are not in the encoded form are parsed, validated and encoded. The log's segment writer " +
      "encodes a commit's run of ASCII rows with one UTF-8 encode straight into their places " +
      "in the file's bytes (a gap left for each record's head and tail, filled in after) and " +
      "hands the committer one of two buffers in turn, with no copy. The old path decoded, " +
      "parsed, validated and encoded every line and sent it with a promise of its own.",
    ],
  };
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
