/**
 * Exporting a range of a stream's log to a file: an Arrow IPC file
 * (zstd-compressed buffers), a Parquet file (zstd), or NDJSON `[offset,msg]`
 * lines exactly as stored. Arrow and Parquet files have the column `offset`
 * (int64) first, then the schema's columns in order (types as in
 * `server/arrow.ts`); they are read by pyarrow, DuckDB and Polars.
 *
 * Memory stays bounded whatever the range: rows are read in blocks and
 * written in record batches (Parquet row groups) of `batchRows` rows.
 *
 * Reading: given an open {@linkcode Log}, the export uses its readers (the
 * way a server would). Given a log folder, it reads the files without the
 * writer's lock and changes nothing — so it works beside a live server: the
 * chunks listed in the manifest, then the segments; a file that a live writer
 * deletes or merges away under the reader (a segment turned into a chunk, a
 * chunk merged) is found again in the tier that holds its rows now. Every
 * record's checksum (segments) and every chunk's lines (chunks) are checked
 * as they are read. The rows exported are those written when the export
 * reached the active segment (at least through `to`, or the end the log had
 * when the export started); an unfinished or torn record at the very end of an
 * unsealed segment is not a row yet and is left out, as recovery would.
 *
 * The file is written under a temporary name beside `out` and renamed into
 * place once complete, so a failed export leaves no partial file.
 *
 * @module
 */

import { join } from "node:path";
import { RecordBatchStreamWriter } from "apache-arrow";
import type { RecordBatch as ArrowRecordBatch } from "apache-arrow";
import {
  type ChunkEntry,
  inspectLog,
  type Log,
  LogCorruptError,
  LogEvictedError,
  type LogReport,
  type RecordBatch,
} from "../log/mod.ts";
import { ChunkCursor, chunkPath } from "../log/chunk.ts";
import { Layout, parseSegmentFileName, segmentFileName } from "../log/format.ts";
import {
  EMPTY_BATCH,
  readHeader,
  seekStart,
  SegmentCursor,
  segmentStart,
} from "../log/segment_reader.ts";
import { findLaterRecord } from "../log/recovery.ts";
import { exists, readManifest } from "../log/fs.ts";
import { ArrowFileWriter, ArrowRowBuilder, OFFSET_COLUMN, type RecordSlice } from "./arrow.ts";
import type { RowSchema } from "./schema.ts";

/**
 * The formats {@linkcode exportLog} writes.
 *
 * @example
 * ```ts
 * import type { ExportFormat } from "./export.ts";
 * const format: ExportFormat = "parquet";
 * console.log(format);
 * ```
 */
export type ExportFormat = "arrow" | "parquet" | "ndjson";

/**
 * The formats {@linkcode exportLog} writes, as a list.
 *
 * @example
 * ```ts
 * import { EXPORT_FORMATS } from "./export.ts";
 * console.log(EXPORT_FORMATS.includes("ndjson")); // true
 * ```
 */
export const EXPORT_FORMATS: readonly ExportFormat[] = ["arrow", "parquet", "ndjson"];

/**
 * Default rows per record batch (Arrow) and row group (Parquet).
 *
 * @example
 * ```ts
 * import { DEFAULT_BATCH_ROWS } from "./export.ts";
 * console.log(DEFAULT_BATCH_ROWS); // 65536
 * ```
 */
export const DEFAULT_BATCH_ROWS = 65536;

/**
 * Most rows per batch accepted (a bound on the memory an export holds).
 *
 * @example
 * ```ts
 * import { MAX_BATCH_ROWS } from "./export.ts";
 * console.log(MAX_BATCH_ROWS); // 4194304
 * ```
 */
export const MAX_BATCH_ROWS = 1 << 22;

/** Bytes read from the log per step. */
const READ_BYTES = 1 << 20;

/**
 * How a running export is doing, for {@linkcode ExportOptions.onProgress}.
 *
 * @example
 * ```ts
 * import type { ExportProgress } from "./export.ts";
 * const show = (p: ExportProgress): string => `${p.rows} rows through ${p.last} of ${p.to}`;
 * console.log(show({ rows: 10, last: 10, to: 100, bytes: 400 }));
 * ```
 */
export interface ExportProgress {
  /** Rows written so far. */
  rows: number;
  /** The last offset written so far (null before the first row). */
  last: number | null;
  /** The last offset the export will write at most (`to`, or the log's end when it started). */
  to: number;
  /** Bytes written to the file so far. */
  bytes: number;
}

/**
 * Options of {@linkcode exportLog}.
 *
 * @example
 * ```ts
 * import type { ExportOptions } from "./export.ts";
 * const options: ExportOptions = {
 *   format: "parquet",
 *   out: "trades.parquet",
 *   from: 1000,
 *   to: 1999,
 *   onProgress: (p) => console.error(`${p.rows} rows`),
 * };
 * console.log(options.format);
 * ```
 */
export interface ExportOptions {
  /** The file format. */
  format: ExportFormat;
  /** The file to write (replaced if it exists). */
  out: string;
  /**
   * First offset to export, inclusive. `0` or absent: the earliest offset the
   * log holds. An offset below the earliest (evicted by retention, or only
   * in the archive) is refused with {@linkcode LogEvictedError}.
   * @default 0
   */
  from?: number;
  /** Last offset to export, inclusive. @default the last offset the log holds when the export starts */
  to?: number;
  /** Rows per Arrow record batch and per Parquet row group. @default 65536 */
  batchRows?: number;
  /** Called after each block written. */
  onProgress?: (progress: ExportProgress) => void;
}

/**
 * What {@linkcode exportLog} wrote.
 *
 * @example
 * ```ts
 * import type { ExportReport } from "./export.ts";
 * const r: ExportReport = { format: "arrow", out: "t.arrow", rows: 0, first: null, last: null, bytes: 530 };
 * console.log(r.rows === 0 ? "empty" : `${r.first}..${r.last}`); // empty
 * ```
 */
export interface ExportReport {
  /** The format written. */
  format: ExportFormat;
  /** The file written. */
  out: string;
  /** Rows written. */
  rows: number;
  /** The first offset written, or null for an empty export. */
  first: number | null;
  /** The last offset written, or null for an empty export. */
  last: number | null;
  /** Size of the file in bytes. */
  bytes: number;
}

/**
 * Writes the rows of a log from `from` through `to` to a file, streaming
 * with bounded memory.
 *
 * @param log An open log, or the path of a log folder (read without a lock,
 *   beside a live writer if there is one).
 * @param schema The stream's schema (compiled or JSON); not used (and may be
 *   `null`) for `ndjson`, which writes the rows exactly as stored.
 * @param options Format, output file, range.
 * @returns What was written.
 * @throws {LogEvictedError} If `from` is below the earliest offset held.
 * @throws {LogCorruptError} If a record or chunk read fails its checks.
 * @throws {TypeError} If a stored row does not fit the schema (naming the
 *   offset and column), or the schema has a column named `offset`.
 * @throws {RangeError} For a bad range or batch size.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { tableFromIPC } from "apache-arrow";
 * import { Log } from "../log/mod.ts";
 * import { exportLog } from "./export.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(`${dir}/trades`);
 * const enc = new TextEncoder();
 * await log.appendMany([1, 2, 3].map((i) => enc.encode(`{"price":${i}.5}`)));
 * await log.close();
 * const schema = { type: "object", properties: { price: { type: "number" } }, required: ["price"] };
 * const report = await exportLog(`${dir}/trades`, schema, {
 *   format: "arrow",
 *   out: `${dir}/trades.arrow`,
 *   from: 2,
 * });
 * equal(report.rows, 2);
 * const table = tableFromIPC(await Deno.readFile(`${dir}/trades.arrow`));
 * equal(table.getChild("price")?.get(0), 2.5);
 * equal(table.getChild("offset")?.get(1), 3n);
 * ```
 */
export async function exportLog(
  log: Log | string,
  schema: RowSchema | Record<string, unknown> | null,
  options: ExportOptions,
): Promise<ExportReport> {
  const { format, out } = options;
  if (!EXPORT_FORMATS.includes(format)) {
    throw new TypeError(`format must be arrow, parquet or ndjson, got ${JSON.stringify(format)}`);
  }
  if (typeof out !== "string" || out === "") throw new TypeError("out must be a file path");
  const batchRows = options.batchRows ?? DEFAULT_BATCH_ROWS;
  if (!Number.isSafeInteger(batchRows) || batchRows < 1 || batchRows > MAX_BATCH_ROWS) {
    throw new RangeError(
      `batchRows must be an integer from 1 to ${MAX_BATCH_ROWS}, got ${batchRows}`,
    );
  }
  for (const key of ["from", "to"] as const) {
    const v = options[key];
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0)) {
      throw new RangeError(`${key} must be an offset (an integer >= 0), got ${v}`);
    }
  }
  if (options.from !== undefined && options.to !== undefined && options.from > options.to) {
    throw new RangeError(`from ${options.from} is after to ${options.to}`);
  }
  let builder: ArrowRowBuilder | null = null;
  if (format !== "ndjson") {
    if (schema === null) throw new TypeError(`a schema is needed to export ${format}`);
    builder = new ArrowRowBuilder(schema);
  }

  const source = typeof log === "string" ? await openDir(log) : openLog(log);
  const from = options.from || source.earliest;
  if (options.from && source.earliest !== null && options.from < source.earliest) {
    throw new LogEvictedError(options.from, source.earliest);
  }
  const to = options.to ?? source.last;

  const tmp = `${out}.tmp-${crypto.randomUUID().slice(0, 8)}`;
  let file: Deno.FsFile;
  try {
    file = await Deno.open(tmp, { write: true, create: true, truncate: true });
  } catch (err) {
    // Name the file asked for, not the temporary one (the error's class is kept).
    if (err instanceof Error) err.message = `cannot write ${out}: ${err.message.split(":")[0]}`;
    await source.close();
    throw err;
  }
  const progress: ExportProgress = { rows: 0, last: null, to: to ?? 0, bytes: 0 };
  let first: number | null = null;
  const write = async (bytes: Uint8Array): Promise<void> => {
    let done = 0;
    while (done < bytes.length) done += await file.write(bytes.subarray(done));
    progress.bytes += bytes.length;
  };
  const rows = async function* (): AsyncGenerator<RecordBatch> {
    if (from === null || to === null || from > to) return;
    for await (const batch of source.read(from, to)) {
      first ??= batch.offsets[0];
      yield batch;
    }
  };
  const counted = (batchRows: number, last: number | null): void => {
    progress.rows += batchRows;
    progress.last = last;
    options.onProgress?.({ ...progress });
  };
  let ok = false;
  try {
    if (format === "ndjson") await writeNdjson(rows(), write, counted);
    else if (format === "arrow") await writeArrow(rows(), builder!, batchRows, write, counted);
    else await writeParquet(rows(), builder!, batchRows, write, counted);
    file.close();
    await Deno.rename(tmp, out);
    ok = true;
  } finally {
    if (!ok) {
      try {
        file.close();
      } catch {
        // already closed before a failed rename
      }
      await Deno.remove(tmp).catch(() => {});
    }
    await source.close();
  }
  return {
    format,
    out,
    rows: progress.rows,
    first: progress.rows > 0 ? first : null,
    last: progress.last,
    bytes: progress.bytes,
  };
}

type Write = (bytes: Uint8Array) => Promise<void>;
type Counted = (rows: number, last: number | null) => void;

async function writeNdjson(
  batches: AsyncIterable<RecordBatch>,
  write: Write,
  counted: Counted,
): Promise<void> {
  let buf = new Uint8Array(READ_BYTES * 2);
  for await (const b of batches) {
    let need = 0;
    for (let i = 0; i < b.count; i++) need += b.lengths[i] + 20;
    if (buf.length < need) buf = new Uint8Array(need);
    let o = 0;
    for (let i = 0; i < b.count; i++) {
      buf[o++] = 91; // [
      const digits = String(b.offsets[i]);
      for (let k = 0; k < digits.length; k++) buf[o++] = digits.charCodeAt(k);
      buf[o++] = 44; // ,
      const s = b.starts[i];
      buf.set(b.buf.subarray(s, s + b.lengths[i]), o);
      o += b.lengths[i];
      buf[o++] = 93; // ]
      buf[o++] = 10; // \n
    }
    await write(buf.subarray(0, o));
    counted(b.count, b.offsets[b.count - 1]);
  }
}

/** Gathers log reads into Arrow record batches of `batchRows` rows. */
async function* arrowBatches(
  batches: AsyncIterable<RecordBatch>,
  builder: ArrowRowBuilder,
  batchRows: number,
): AsyncGenerator<ArrowRecordBatch> {
  let slices: RecordSlice[] = [];
  let pending = 0;
  for await (const batch of batches) {
    let from = 0;
    while (from < batch.count) {
      const count = Math.min(batch.count - from, batchRows - pending);
      slices.push({ batch, from, count });
      pending += count;
      from += count;
      if (pending === batchRows) {
        yield builder.fromRecordSlices(slices);
        slices = [];
        pending = 0;
      }
    }
  }
  if (pending > 0) yield builder.fromRecordSlices(slices);
}

function lastOffset(batch: ArrowRecordBatch): number | null {
  if (batch.numRows === 0) return null;
  return Number(batch.getChildAt(0)!.get(batch.numRows - 1));
}

async function writeArrow(
  batches: AsyncIterable<RecordBatch>,
  builder: ArrowRowBuilder,
  batchRows: number,
  write: Write,
  counted: Counted,
): Promise<void> {
  const writer = new ArrowFileWriter(builder.schema, { compression: "zstd" });
  await write(writer.start());
  for await (const batch of arrowBatches(batches, builder, batchRows)) {
    await write(writer.write(batch));
    counted(batch.numRows, lastOffset(batch));
  }
  await write(writer.finish());
}

async function writeParquet(
  batches: AsyncIterable<RecordBatch>,
  builder: ArrowRowBuilder,
  batchRows: number,
  write: Write,
  counted: Counted,
): Promise<void> {
  // Loaded on first use: 5 MB of WebAssembly that only Parquet exports need.
  const pw = await import("parquet-wasm");
  let props = new pw.WriterPropertiesBuilder()
    .setCompression(pw.Compression.ZSTD)
    .setMaxRowGroupSize(batchRows)
    .setCreatedBy("streamcast (parquet-wasm)")
    // Offsets (and int64 columns: times, ids) mostly rise: delta-packed they
    // take a fraction of a dictionary's space and time; prices and amounts
    // rarely repeat, so a dictionary is tried and dropped for nothing. On 1M
    // trade rows this makes the file 45% smaller and the export 40% faster.
    .setColumnEncoding(OFFSET_COLUMN, pw.Encoding.DELTA_BINARY_PACKED)
    .setColumnDictionaryEnabled(OFFSET_COLUMN, false);
  for (const c of builder.columns) {
    if (c.type === "int64") {
      props = props
        .setColumnEncoding(c.name, pw.Encoding.DELTA_BINARY_PACKED)
        .setColumnDictionaryEnabled(c.name, false);
    } else if (c.type === "double" || c.type === "float") {
      props = props.setColumnDictionaryEnabled(c.name, false);
    }
  }
  const properties = props.build();
  const it = arrowBatches(batches, builder, batchRows);
  let sent = false;
  const input = new ReadableStream({
    async pull(controller) {
      const r = await it.next();
      // A file needs the schema, which parquet-wasm takes from the batches:
      // an empty range still sends one empty batch.
      const batch = r.done ? (sent ? null : builder.empty()) : r.value;
      if (batch === null) {
        controller.close();
        return;
      }
      sent = true;
      const table = pw.Table.fromIPCStream(toIpcStream(batch));
      try {
        for (const b of table.recordBatches()) controller.enqueue(b);
      } finally {
        table.free();
      }
      if (batch.numRows > 0) counted(batch.numRows, lastOffset(batch));
    },
    async cancel() {
      await it.return(undefined);
    },
  }, { highWaterMark: 0 });
  const bytes = await pw.transformParquetStream(input, properties);
  for await (const chunk of bytes as ReadableStream<Uint8Array>) await write(chunk);
}

function toIpcStream(batch: ArrowRecordBatch): Uint8Array {
  const writer = new RecordBatchStreamWriter();
  writer.write(batch);
  writer.finish();
  return writer.toUint8Array(true);
}

/** Where rows come from: an open log, or a folder read without its lock. */
interface Source {
  /** The earliest offset held, or null when the log holds no row. */
  earliest: number | null;
  /** The last offset held when the export started, or null. */
  last: number | null;
  /** Record batches with offsets in `[from, to]`, in order. */
  read(from: number, to: number): AsyncIterable<RecordBatch>;
  close(): Promise<void>;
}

function clip(batch: RecordBatch, from: number, to: number): RecordBatch {
  let lo = 0;
  while (lo < batch.count && batch.offsets[lo] < from) lo++;
  let hi = batch.count;
  while (hi > lo && batch.offsets[hi - 1] > to) hi--;
  if (lo === 0 && hi === batch.count) return batch;
  if (lo >= hi) return EMPTY_BATCH;
  return {
    buf: batch.buf,
    count: hi - lo,
    offsets: batch.offsets.subarray(lo, hi),
    times: batch.times.subarray(lo, hi),
    starts: batch.starts.subarray(lo, hi),
    lengths: batch.lengths.subarray(lo, hi),
  };
}

function openLog(log: Log): Source {
  const last = log.endOffset - 1;
  return {
    earliest: log.earliest,
    last: log.earliest === null ? null : last,
    async *read(from, to) {
      const reader = log.reader(from);
      try {
        while (true) {
          const batch = await reader.read(READ_BYTES);
          if (batch.count === 0) return;
          const out = clip(batch, from, to);
          if (out.count > 0) yield out;
          if (batch.offsets[batch.count - 1] >= to) return;
        }
      } finally {
        reader.close();
      }
    },
    close: () => Promise.resolve(),
  };
}

/** Retries of a lock-free read when files move under it (a live writer chunking or merging). */
const MAX_REPLANS = 8;

async function inspect(dir: string): Promise<LogReport> {
  for (let attempt = 0;; attempt++) {
    try {
      return await inspectLog(dir);
    } catch (err) {
      // A segment chunked and deleted between listing and opening it.
      if (!(err instanceof Deno.errors.NotFound) || attempt >= MAX_REPLANS) throw err;
      if (!(await exists(join(dir, "log.json")))) throw err;
    }
  }
}

async function segmentFirsts(dir: string): Promise<number[]> {
  const firsts: number[] = [];
  for await (const e of Deno.readDir(dir)) {
    const first = e.isFile ? parseSegmentFileName(e.name) : null;
    if (first !== null) firsts.push(first);
  }
  return firsts.sort((a, b) => a - b);
}

async function openDir(dir: string): Promise<Source> {
  const report = await inspect(dir);
  const segs = report.segments.filter((s) => s.rows > 0);
  const chunks = report.manifest?.chunks ?? [];
  const firstSeg = report.segments[0]?.firstOffset ?? Infinity;
  const lows = [chunks[0]?.first, segs[0]?.firstOffset].filter((x) => x !== undefined);
  const earliest = lows.length > 0 ? Math.min(...lows as number[]) : null;
  let last: number | null = null;
  for (const s of segs) last = Math.max(last ?? 0, s.lastOffset ?? 0);
  for (const c of chunks) {
    if (c.first < firstSeg || last === null) last = Math.max(last ?? 0, c.last);
  }
  return {
    earliest,
    last,
    read: (from, to) => readDir(dir, from, to),
    close: () => Promise.resolve(),
  };
}

/**
 * Reads `[from, to]` from a log folder without its lock: plan from the
 * manifest and the segment files on disk, read, and plan again from where it
 * stopped whenever a file has gone (chunked, merged, or expired under us).
 */
async function* readDir(dir: string, from: number, to: number): AsyncGenerator<RecordBatch> {
  let next = from;
  let replans = 0;
  while (next <= to) {
    const firsts = await segmentFirsts(dir);
    const manifest = await readManifest(dir);
    const chunks = manifest?.chunks ?? [];
    const segStart = firsts[0] ?? Infinity;
    let step: { kind: "chunk"; entry: ChunkEntry } | { kind: "segment"; i: number } | null = null;
    if (next < segStart) {
      const entry = chunks.find((c) => c.last >= next);
      if (entry && entry.first < segStart) {
        const earliest = chunks[0].first;
        if (next < earliest) throw new LogEvictedError(next, earliest);
        step = { kind: "chunk", entry };
      } else if (firsts.length > 0) {
        if (chunks.length > 0 && next < chunks[0].first) {
          throw new LogEvictedError(next, chunks[0].first);
        }
        next = segStart; // a gap (a fence), or the chunks end below the segments
        continue;
      } else {
        return;
      }
    } else {
      let i = firsts.length - 1;
      while (firsts[i] > next) i--;
      step = { kind: "segment", i };
    }
    try {
      if (step.kind === "chunk") {
        const entry = step.entry;
        const cursor = new ChunkCursor(chunkPath(dir, entry.sha256), entry);
        await cursor.open();
        try {
          while (true) {
            const batch = await cursor.read(READ_BYTES);
            if (batch.count === 0) break;
            const out = clip(batch, next, to);
            if (out.count > 0) {
              next = out.offsets[out.count - 1] + 1;
              yield out;
            }
            if (batch.offsets[batch.count - 1] >= to) return;
          }
        } finally {
          cursor.close();
        }
        next = Math.max(next, entry.last + 1);
      } else {
        const path = join(dir, segmentFileName(firsts[step.i]));
        const segment = readSegment(path, next, to, step.i === firsts.length - 1);
        let r: IteratorResult<RecordBatch, { done: boolean; nextOffset: number }>;
        try {
          while (!(r = await segment.next()).done) {
            next = r.value.offsets[r.value.count - 1] + 1;
            yield r.value;
          }
        } finally {
          await segment.return({ done: true, nextOffset: next }); // closes the file if we stopped early
        }
        const after = r.value;
        if (after.done) return;
        // A sealed segment ended: on to the next one (past any fenced gap).
        const following = firsts[step.i + 1];
        if (following === undefined) return;
        next = Math.max(next, after.nextOffset, following);
      }
      replans = 0;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound) || ++replans > MAX_REPLANS) throw err;
      // The file went away under us: a live writer moved its rows; plan again.
    }
  }
}

/**
 * Reads one segment file from `from` through `to`, checking every record
 * (`last`: it is the log's last segment, which may end in a torn record).
 * Returns whether the range is complete (it reached `to`, or the end of what
 * an unsealed segment holds) and, for a sealed segment, the offset after its
 * last record.
 */
async function* readSegment(
  path: string,
  from: number,
  to: number,
  last: boolean,
): AsyncGenerator<RecordBatch, { done: boolean; nextOffset: number }> {
  const file = await Deno.open(path, { read: true });
  try {
    const size = (await file.stat()).size;
    const header = await readHeader(file, path);
    const layout = new Layout(header.beaconInterval);
    let limit = size;
    let want = from;
    const cursorAt = async (): Promise<SegmentCursor> =>
      new SegmentCursor(
        file,
        path,
        layout,
        want <= header.firstOffset
          ? segmentStart(header)
          : await seekStart(file, header, limit, want),
        { maxPayloadBytes: 0xffff_ff00, blockBytes: Math.max(READ_BYTES, layout.interval + 4096) },
      );
    let cursor = await cursorAt();
    while (true) {
      let batch: RecordBatch;
      try {
        batch = await cursor.read(limit, READ_BYTES);
      } catch (err) {
        if (!last || !(err instanceof LogCorruptError) || limit !== size) throw err;
        // Damage in the last segment is a torn tail (never a row) only when no
        // valid record follows it: the rule recovery applies on open. The
        // records before it are good: read again up to where it starts.
        const later = await findLaterRecord(file, layout, err.position, size, cursor.nextOffset);
        if (later !== null) throw err;
        limit = err.position;
        cursor = await cursorAt();
        continue;
      }
      if (batch.count === 0) {
        // The end mark of a sealed segment, or the end of what an unsealed one holds.
        return { done: cursor.endMark === null, nextOffset: cursor.nextOffset };
      }
      const out = clip(batch, want, to);
      if (out.count > 0) {
        want = out.offsets[out.count - 1] + 1;
        yield out;
      }
      if (batch.offsets[batch.count - 1] >= to) return { done: true, nextOffset: to + 1 };
    }
  } finally {
    file.close();
  }
}
