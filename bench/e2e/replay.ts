/**
 * Replay from the local log to one batched subscriber over a real socket (the
 * server in its own process), from segments and from chunks, against reading
 * the same rows with the log's own reader in-process (the parse ceiling).
 * Also: sealing speed against a bare zstd compress of the same bytes, and the
 * compression ratio of a trade feed.
 *
 * Run alone: deno run -A bench/e2e/replay.ts [--quick]
 */
import { Log } from "../../log/mod.ts";
import { compress } from "../../log/chunk/chunk.ts";
import type { LoadConfig } from "../harness/fanout_client.ts";
import { freePort, Proc } from "../harness/contenders.ts";
import { type BenchRow, type BenchSection, renderSection } from "../harness/report.ts";
import { tradeRows } from "../../tests/harness/trades.ts";
import { fill } from "../harness/trade_log.ts";

const here = new URL(".", import.meta.url).pathname;

async function readerRate(root: string, chunks: boolean): Promise<number> {
  const log = await Log.open(`${root}/trades`, { chunks, timers: false, verify: "tail" });
  const t0 = performance.now();
  const r = log.reader(1);
  let n = 0;
  while (true) {
    const b = await r.read(512 * 1024);
    if (b.count === 0) break;
    n += b.count;
  }
  const s = (performance.now() - t0) / 1000;
  r.close();
  await log.close();
  return n / s;
}

export async function socketRate(
  root: string,
  rows: number,
): Promise<{ rate: number; serverCpu: number; genCpu: number }> {
  const port = freePort();
  const server = new Proc("replay server", Deno.execPath(), [
    "run",
    "-A",
    `${here}../harness/replay_server.ts`,
    root,
    String(port),
  ]);
  try {
    await server.line((l) => l === "READY", 30_000);
    const s0 = await server.mark();
    const cfg: LoadConfig = {
      url: `ws://127.0.0.1:${port}/trades?offset=1&frames=batch`,
      subs: 1,
      until: rows,
    };
    const gen = new Proc("replay generator", Deno.execPath(), [
      "run",
      "-A",
      `${here}../harness/fanout_client.ts`,
      JSON.stringify(cfg),
    ]);
    const r = JSON.parse(await gen.line((l) => l.startsWith("{"), 120_000));
    await gen.child.status;
    const s1 = await server.mark();
    return {
      rate: r.rate,
      genCpu: r.cpuUs / 1000 / r.ms * 100,
      // The server idles before the subscriber comes and after it is done.
      serverCpu: ((s1.cpuUs as number) - (s0.cpuUs as number)) / 1000 / r.ms * 100,
    };
  } finally {
    await server.stop();
  }
}

async function sealing(rows: number) {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
  try {
    const log = await Log.open(dir, {
      chunks: { fanIn: 1000 },
      timers: false,
      segmentBytes: 1 << 30,
    });
    const make = tradeRows(3);
    const enc = new TextEncoder();
    const payloads: Uint8Array[] = [];
    for (let i = 0; i < rows; i++) payloads.push(enc.encode(JSON.stringify(make(i))));
    for (let i = 0; i < rows; i += 10_000) await log.appendMany(payloads.slice(i, i + 10_000));
    const segBytes = log.segments()[0].size;
    const t0 = performance.now();
    await log.roll();
    await log.chunks.settled();
    const sealMs = performance.now() - t0;
    const chunk = log.chunks.manifest!.chunks[0];
    await log.close();
    // The ceiling: compress the same NDJSON bytes once, in this thread.
    let raw = 0;
    const lines = payloads.map((p, i) => `[${i + 1},${new TextDecoder().decode(p)}]\n`).join("");
    const bytes = enc.encode(lines);
    raw = bytes.length;
    const t1 = performance.now();
    compress(bytes);
    const zstdMs = performance.now() - t1;
    return {
      sealMBs: segBytes / 1e6 / (sealMs / 1000),
      zstdMBs: raw / 1e6 / (zstdMs / 1000),
      ratio: raw / chunk.bytes,
      raw,
      zipped: chunk.bytes,
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const rows = quick ? 200_000 : 1_000_000;
  const out: BenchRow[] = [];
  for (const chunks of [false, true]) {
    const root = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
    try {
      await fill(root, rows, chunks);
      const base = await readerRate(root, chunks);
      const r = await socketRate(root, rows);
      out.push({
        case: `replay ${rows} rows from ${
          chunks ? "chunks" : "segments"
        } to one batched subscriber`,
        ours: r.rate,
        baseline: base,
        unit: "rows/s",
        ratio: r.rate / base,
        target: "≥ 1 M rows/s",
        met: r.rate >= 1_000_000,
        serverCpu: [r.serverCpu],
        genCpu: [r.genCpu],
        limit: `${((1e6 - r.rate) / 1e6 * 100).toFixed(0)} % short; server CPU ${
          r.serverCpu.toFixed(0)
        } %, generator CPU ${r.genCpu.toFixed(0)} %; the log's own reader in-process does ${
          (base / 1e6).toFixed(2)
        } M rows/s.`,
      });
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  }
  const s = await sealing(quick ? 100_000 : 500_000);
  out.push({
    case: "sealing a segment into a chunk (worker)",
    ours: s.sealMBs,
    baseline: s.zstdMBs,
    unit: "MB/s",
    ratio: s.sealMBs / s.zstdMBs,
    target: "",
    met: null,
    note: `compression ratio ${s.ratio.toFixed(1)}× (${s.raw} → ${s.zipped} bytes)`,
  });
  return {
    title: "Replay and sealing (log/ and server/)",
    baseline:
      "for replay, the log's own reader reading the same rows in-process with no socket (the parse ceiling); for sealing, one zstd compress of the same NDJSON in the calling thread.",
    rows: out,
    notes: [
      "Replay: the server runs in its own process; the load generator subscribes at offset 1 with `frames=batch` and counts rows to the end. The chunk path decompresses zstd as it streams. The server's CPU counts all its threads: it opens the stream with chunks on (the default), so in the segment case its worker seals the segments into chunks while the replay runs, which is why it can exceed 100 %.",
      `Sealing: the worker reads and checks every record of the segment, writes the NDJSON lines, compresses them with zstd level 3, hashes, writes and syncs the chunk and the manifest. ${
        out.at(-1)!.note
      }, on random-walk trade rows.`,
    ],
  };
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
