/**
 * Arrow and Parquet: export speed of a trade log to an Arrow IPC file (zstd)
 * and to Parquet (zstd, parquet-wasm) against an NDJSON export of the same
 * rows (the baseline: bytes copied as stored, no parsing); and the cost of a
 * `frames=arrow` record batch of 4096 rows against the batched JSON text
 * frame of the same rows (CPU per frame and bytes on the wire).
 *
 * Run alone: deno run -A bench/micro/arrow.ts [--quick]
 *
 * @module
 */
import { Log } from "../../log/mod.ts";
import { ArrowFrameEncoder } from "../../arrow/frame_encoder.ts";
import { type ExportFormat, exportLog } from "../../arrow/export.ts";
import { renderBatch } from "../../server/frames/text_frames.ts";
import { compileSchema } from "../../schema/compile.ts";
import { type BenchRow, type BenchSection, median, renderSection } from "../harness/report.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";

const FRAME_ROWS = 4096;

async function fill(dir: string, rows: number): Promise<void> {
  const schema = compileSchema(SCHEMA);
  const log = await Log.open(dir, { timers: false, fsync: false, segmentBytes: 1 << 30 });
  const make = tradeRows(7);
  const enc = new TextEncoder();
  for (let i = 0; i < rows; i += 10_000) {
    const n = Math.min(10_000, rows - i);
    await log.appendMany(
      Array.from({ length: n }, (_, k) => enc.encode(schema.encode(make(i + k)))),
    );
  }
  await log.close();
}

async function exportRate(
  dir: string,
  format: ExportFormat,
  rows: number,
): Promise<{ rate: number; bytes: number }> {
  const out = `${dir}.${format}`;
  try {
    const t0 = performance.now();
    const report = await exportLog(dir, SCHEMA, { format, out });
    const s = (performance.now() - t0) / 1000;
    if (report.rows !== rows) throw new Error(`exported ${report.rows} rows, not ${rows}`);
    return { rate: rows / s, bytes: report.bytes };
  } finally {
    await Deno.remove(out).catch(() => {});
  }
}

/** µs per call of `fn`, median of `rounds` rounds of `reps` calls (after a warm-up round). */
function timeUs(fn: () => unknown, reps: number, rounds: number): number {
  const out: number[] = [];
  for (let r = 0; r <= rounds; r++) {
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) fn();
    if (r > 0) out.push(((performance.now() - t0) * 1000) / reps);
  }
  return median(out);
}

async function frameCost(quick: boolean) {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
  try {
    await fill(`${dir}/trades`, FRAME_ROWS);
    const log = await Log.open(`${dir}/trades`, { timers: false });
    const reader = log.reader(1);
    const batch = await reader.read(4 << 20);
    reader.close();
    await log.close();
    if (batch.count !== FRAME_ROWS) throw new Error(`read ${batch.count} rows`);
    const schema = compileSchema(SCHEMA);
    const encoder = new ArrowFrameEncoder(schema);
    const jsonText = renderBatch(batch, 0, FRAME_ROWS, 64 << 20).text;
    const frames = jsonText.split("\n");
    const reps = quick ? 10 : 40;
    const rounds = quick ? 5 : 9;
    return {
      jsonUs: timeUs(() => renderBatch(batch, 0, FRAME_ROWS, 64 << 20), reps, rounds),
      arrowUs: timeUs(() => encoder.encodeRecords(batch), reps, rounds),
      liveUs: timeUs(() => encoder.encodeFrames(frames), reps, rounds),
      liveJsonUs: timeUs(() => frames.join("\n"), reps, rounds),
      jsonBytes: new TextEncoder().encode(jsonText).length,
      arrowBytes: encoder.encodeRecords(batch).length,
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Runs the benchmark and returns its section of docs/PERFORMANCE.md.
 *
 * @example
 * ```ts ignore
 * import { renderSection } from "../harness/report.ts";
 * import { run } from "./arrow.ts";
 * console.log(renderSection(await run(true)));
 * ```
 */
export async function run(quick = false): Promise<BenchSection> {
  const rows = quick ? 200_000 : 1_000_000;
  const out: BenchRow[] = [];
  const root = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
  let ndjsonBytes = 0;
  try {
    const dir = `${root}/trades`;
    await fill(dir, rows);
    const base = await exportRate(dir, "ndjson", rows);
    ndjsonBytes = base.bytes;
    for (const format of ["arrow", "parquet"] as const) {
      const ours = await exportRate(dir, format, rows);
      out.push({
        case: `export ${rows} trade rows to ${
          format === "arrow" ? "Arrow IPC (zstd)" : "Parquet (zstd)"
        }`,
        ours: ours.rate,
        baseline: base.rate,
        unit: "rows/s",
        ratio: ours.rate / base.rate,
        target: "",
        met: null,
        note: `${ours.bytes} bytes (NDJSON: ${base.bytes})`,
      });
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
  const f = await frameCost(quick);
  out.push(
    {
      case: `frames=arrow: encode ${FRAME_ROWS} rows read from the log (catch-up)`,
      ours: f.arrowUs,
      baseline: f.jsonUs,
      unit: "µs",
      ratio: f.jsonUs / f.arrowUs,
      target: "",
      met: null,
    },
    {
      case: `frames=arrow: encode ${FRAME_ROWS} live frames (fan-out, once per commit)`,
      ours: f.liveUs,
      baseline: f.liveJsonUs,
      unit: "µs",
      ratio: f.liveJsonUs / f.liveUs,
      target: "",
      met: null,
    },
    {
      case: `frames=arrow: bytes of one ${FRAME_ROWS}-row frame`,
      ours: f.arrowBytes,
      baseline: f.jsonBytes,
      unit: "bytes",
      ratio: f.jsonBytes / f.arrowBytes,
      target: "",
      met: null,
    },
  );
  const [arrowRow, parquetRow] = out;
  return {
    title: "Arrow and Parquet (arrow/)",
    baseline:
      "for exports, an NDJSON export of the same rows from the same log (the rows copied as stored: the cost of reading and checking the log and writing the file); for frames, the batched JSON text frame of the same 4096 rows (`renderBatch` from log records; `frames.join` for live frames). Ratios above 1 favour Arrow; for µs and bytes the ratio is baseline / ours.",
    rows: out,
    notes: [
      `Exports read the log folder without its lock, as \`cli.ts export\` does, and write record batches (row groups) of 65536 rows; file sizes: Arrow ${arrowRow.note}; Parquet ${parquetRow.note}. NDJSON is ${ndjsonBytes} bytes uncompressed.`,
      "An Arrow export parses every row's JSON text and builds columns; a Parquet export then hands each batch to parquet-wasm (arrow-rs compiled to WebAssembly) through Arrow IPC. Arrow frames are uncompressed (browsers have no zstd); bytes on the wire shrink because offsets and numbers become fixed-width binary and keys are not repeated per row.",
    ],
  };
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
