/**
 * Durable append throughput of the log (group commit) against a bare
 * write + syncData loop writing the same bytes in the same group sizes, and
 * seek time in a 1 GiB log against one random 4 KiB read.
 *
 * Run alone: deno run -A bench/micro/log_append.ts [--quick]
 */
import process from "node:process";
import { Log } from "../../log/mod.ts";
import { Stream } from "../../server/stream/stream.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";
import { type BenchSection, human, median, renderSection } from "../harness/report.ts";

const ROW = new TextEncoder().encode(
  JSON.stringify({
    event_ts: 1790038800123456,
    symbol: "BTC-USD",
    price: 85565.12,
    amount: 0.015,
    side: 1,
    trade_id: 123456789,
    venue: "bitstamp-x",
  }).padEnd(150, " ").slice(0, 150),
);

async function bareLoop(dir: string, group: number, ms: number): Promise<number> {
  const f = await Deno.open(`${dir}/bare`, { write: true, create: true, truncate: true });
  const rec = new Uint8Array((ROW.length + 25) * group);
  for (let i = 0; i < group; i++) rec.set(ROW, i * (ROW.length + 25) + 20);
  let rows = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    let done = 0;
    while (done < rec.length) done += f.writeSync(rec.subarray(done));
    await f.syncData();
    rows += group;
  }
  const s = (performance.now() - t0) / 1000;
  f.close();
  return rows / s;
}

async function ours(dir: string, mode: "single" | "batch", group: number, ms: number) {
  await Deno.remove(`${dir}/log`, { recursive: true }).catch(() => {});
  const log = await Log.open(`${dir}/log`, { timers: false });
  let rows = 0;
  let commits = 0;
  log.listen({ committed: () => void commits++ });
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    if (mode === "batch") {
      await log.appendMany(Array.from({ length: group }, () => ROW));
    } else {
      const ps = new Array(group);
      for (let i = 0; i < group; i++) ps[i] = log.append(ROW);
      await Promise.all(ps);
    }
    rows += group;
  }
  const s = (performance.now() - t0) / 1000;
  await log.close();
  return { rate: rows / s, rowsPerCommit: rows / commits };
}

/** `c` concurrent `Stream.send`s of trade rows (validate + encode + append), awaited together. */
async function streamSends(dir: string, c: number, ms: number) {
  await Deno.remove(`${dir}/root`, { recursive: true }).catch(() => {});
  const stream = await Stream.open("trades", {
    schema: SCHEMA,
    root: `${dir}/root`,
    logOptions: { timers: false, chunks: false },
  });
  const make = tradeRows(9);
  const pool = Array.from({ length: 65536 }, (_, i) => make(i));
  let rows = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    const ps = new Array(c);
    for (let i = 0; i < c; i++) ps[i] = stream.send(pool[(rows + i) & 65535]);
    await Promise.all(ps);
    rows += c;
  }
  const wallMs = performance.now() - t0;
  const cu = process.cpuUsage(cpu0);
  await stream.close();
  return { rate: rows / (wallMs / 1000), cpu: (cu.user + cu.system) / 1000 / wallMs * 100 };
}

async function seekBench(dir: string, quick: boolean) {
  const target = quick ? 64 << 20 : 1 << 30;
  await Deno.remove(`${dir}/big`, { recursive: true }).catch(() => {});
  const log = await Log.open(`${dir}/big`, {
    timers: false,
    fsync: false,
    segmentBytes: 256 << 20,
  });
  const batch = Array.from({ length: 4096 }, () => ROW);
  while (log.sizeBytes < target) await log.appendMany(batch);
  await log.close();
  const t0 = performance.now();
  const reopened = await Log.open(`${dir}/big`, { timers: false });
  const openMs = performance.now() - t0;
  const end = reopened.endOffset;
  const seeks: number[] = [];
  for (let i = 0; i < 300; i++) {
    const o = 1 + Math.floor(Math.random() * (end - 1));
    const t = performance.now();
    const r = reopened.reader(o);
    const b = await r.read(4096);
    seeks.push(performance.now() - t);
    r.close();
    if (b.offsets[0] !== o) throw new Error(`seek to ${o} returned ${b.offsets[0]}`);
  }
  const bytes = reopened.sizeBytes;
  await reopened.close();
  const f = await Deno.open(reopened.segments()[0].path, { read: true });
  const buf = new Uint8Array(4096);
  const reads: number[] = [];
  for (let i = 0; i < 300; i++) {
    const t = performance.now();
    await f.seek(Math.floor(Math.random() * (200 << 20)), Deno.SeekMode.Start);
    await f.read(buf);
    reads.push(performance.now() - t);
  }
  f.close();
  await Deno.remove(`${dir}/big`, { recursive: true });
  return {
    seekUs: median(seeks) * 1000,
    readUs: median(reads) * 1000,
    openMs,
    bytes,
    rows: end - 1,
  };
}

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
  const ms = quick ? 300 : 1500;
  const rows: BenchSection["rows"] = [];
  try {
    {
      const base = await bareLoop(dir, 1000, ms);
      const r = await streamSends(dir, 1000, ms);
      rows.push({
        case: "1000 concurrent `Stream.send`s (validate, encode, append, group commit)",
        ours: r.rate,
        baseline: base,
        unit: "rows/s",
        ratio: r.rate / base,
        target: "≥ 100 k rows/s",
        met: r.rate >= 100_000,
        serverCpu: [r.cpu],
        limit: `${((1e5 - r.rate) / 1e5 * 100).toFixed(0)} % short; the process ran at ${
          r.cpu.toFixed(0)
        } % CPU; the disk's write + syncData loop in 1000-row groups does ${
          human(base)
        } rows/s in the same run.`,
      });
    }
    for (const c of [1, 10, 100, 1000]) {
      const base = await bareLoop(dir, c, ms);
      const r = await ours(dir, "single", c, ms);
      const target = c === 1000 ? "≥ 100 k rows/s" : "";
      rows.push({
        case: `${c} concurrent single appends (Log.append)`,
        ours: r.rate,
        baseline: base,
        unit: "rows/s",
        ratio: r.rate / base,
        target,
        met: c === 1000 ? r.rate >= 100_000 : null,
        note: `${r.rowsPerCommit.toFixed(0)} rows/commit`,
        limit: `${((1e5 - r.rate) / 1e5 * 100).toFixed(0)} % short; the disk's loop does ${
          human(base)
        } rows/s in the same run.`,
      });
    }
    for (const c of [10, 100, 1000]) {
      const base = await bareLoop(dir, c, ms);
      const r = await ours(dir, "batch", c, ms);
      rows.push({
        case: `appendMany of ${c}`,
        ours: r.rate,
        baseline: base,
        unit: "rows/s",
        ratio: r.rate / base,
        target: "",
        met: null,
      });
    }
    const s = await seekBench(dir, quick);
    rows.push({
      case: `seek to a random offset in a ${(s.bytes / (1 << 30)).toFixed(2)} GiB log`,
      ours: s.seekUs,
      baseline: s.readUs,
      unit: "µs",
      ratio: s.seekUs / s.readUs,
      target: "O(log n) beacon reads",
      met: null,
      note: `open with full verification of ${s.rows} rows took ${s.openMs.toFixed(0)} ms`,
    });
    return {
      title: "Durable appends and seeks (log/)",
      baseline:
        "a bare `writeSync` + `syncData` loop writing the same 175-byte framed records in the same group sizes; for seeks, one 4 KiB read at a random position of a segment.",
      rows,
      notes: [
        `150-byte rows. Each single-append case keeps that many appends in flight. ` +
        `The seek row: median time to open a reader at a random offset and read its first record; the ratio is against one random 4 KiB read. ` +
        rows.at(-1)!.note!,
      ],
    };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

if (import.meta.main) {
  const section = await run(Deno.args.includes("--quick"));
  console.log(renderSection(section));
}
