/**
 * Exporting a range of a stream's log to a file: an Arrow IPC file
 * (zstd-compressed buffers), a Parquet file (zstd), or NDJSON `[offset,msg]`
 * lines exactly as stored. Arrow and Parquet files have the column `offset`
 * (int64) first, then the schema's columns in order (types as in
 * `arrow/schema.ts`); they are read by pyarrow, DuckDB and Polars.
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

import type { RecordBatch as ArrowRecordBatch } from "apache-arrow";
import { markParquetJson } from "./_parquet_json.ts";
import { isJsonField } from "./nested_type.ts";
import { FolderReader, type Log, LogEvictedError, type RecordBatch } from "../log/mod.ts";
import type { RowSchema } from "../schema/row_schema.ts";
import { openLog, READ_BYTES, type Source } from "./_log_source.ts";
import { ArrowFileWriter } from "./file_writer.ts";
import { writeParquet } from "./parquet_writer.ts";
import { ArrowRowBuilder, type RecordSlice } from "./row_builder.ts";
import { compileFilter, type Filter, type Where } from "../wire/filter.ts";
import { selectRecords } from "./_select_records.ts";

/**
 * The formats {@linkcode exportLog} writes.
 */
export type ExportFormat = "arrow" | "parquet" | "ndjson";

/**
 * The formats {@linkcode exportLog} writes, as a list.
 */
export const EXPORT_FORMATS: readonly ExportFormat[] = ["arrow", "parquet", "ndjson"];

/**
 * Default rows per record batch (Arrow) and row group (Parquet).
 */
export const DEFAULT_BATCH_ROWS = 65536;

/**
 * Most rows per batch accepted (a bound on the memory an export holds).
 */
export const MAX_BATCH_ROWS = 1 << 22;

/**
 * How a running export is doing, for {@linkcode ExportOptions.onProgress}.
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
  /**
   * Export only rows appended at or after this time (µs since the epoch):
   * it starts at the offset the log's time lookup gives (`Log.offsetAt`,
   * as `since=` does). A time before the earliest row held while older rows
   * were dropped is refused with {@linkcode LogEvictedError}. With `from`,
   * the later of the two starts. Exact in segments and in chunks with a
   * time index; inside the span of a chunk without one (an older log, a
   * chunk from the archive) it starts at the chunk's first row: earlier,
   * never later.
   * @default undefined
   */
  since?: number;
  /**
   * Export only rows appended before this time (µs since the epoch,
   * exclusive). With `to`, the earlier of the two ends. Exact like `since`;
   * inside the span of a chunk without a time index it ends before that
   * chunk: never past the time.
   * @default undefined
   */
  until?: number;
  /** Rows per Arrow record batch and per Parquet row group. @default 65536 */
  batchRows?: number;
  /**
   * At most this many bytes of rows (as stored) per batch besides
   * `batchRows`: large rows (nested values) make smaller batches, so memory
   * stays bounded. From 1 MiB to 1 GiB. @default 67108864 (64 MiB)
   */
  batchBytes?: number;
  /** Called after each block written. */
  onProgress?: (progress: ExportProgress) => void;
  /**
   * Only the rows this `where=` filter matches (an object or its JSON text,
   * as a subscribe takes it; see `wire/filter.ts`), in all three formats.
   * It needs the schema, for `ndjson` too. A filter that does not fit the
   * schema throws `FilterError` (its `detail` names `where`).
   * @default undefined
   */
  where?: Where | string;
}

/**
 * What {@linkcode exportLog} wrote.
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
 * await Deno.remove(dir, { recursive: true });
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
  const batchBytes = options.batchBytes ?? MAX_BATCH_BYTES;
  if (!Number.isSafeInteger(batchBytes) || batchBytes < 1 << 20 || batchBytes > 1 << 30) {
    throw new RangeError(`batchBytes must be an integer from 1 MiB to 1 GiB, got ${batchBytes}`);
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
  let filter: Filter | null = null;
  if (options.where !== undefined) {
    if (schema === null) throw new TypeError("a schema is needed to export with where");
    const rs = schema as Partial<RowSchema>;
    const json = typeof rs.encode === "function" ? rs.json! : schema as Record<string, unknown>;
    filter = compileFilter(options.where, json);
  }
  // since/until: times in µs, until exclusive.
  for (const key of ["since", "until"] as const) {
    const v = options[key];
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0)) {
      throw new RangeError(`${key} must be µs since the epoch (an integer >= 0), got ${v}`);
    }
  }
  if (
    options.since !== undefined && options.until !== undefined && options.since >= options.until
  ) {
    throw new RangeError(`since ${options.since} is not before until ${options.until}`);
  }
  let builder: ArrowRowBuilder | null = null;
  if (format !== "ndjson") {
    if (schema === null) throw new TypeError(`a schema is needed to export ${format}`);
    builder = new ArrowRowBuilder(schema);
  }

  // A folder is read without its lock, beside a live writer if there is one.
  const source: Source = typeof log === "string" ? await FolderReader.open(log) : openLog(log);
  let from = options.from || source.earliest;
  if (options.from && source.earliest !== null && options.from < source.earliest) {
    throw new LogEvictedError(options.from, source.earliest);
  }
  let to = options.to ?? source.last;
  ({ from, to } = await timeRange(source, options, from, to));

  const tmp = `${out}.tmp-${crypto.randomUUID().slice(0, 8)}`;
  let file: Deno.FsFile;
  try {
    file = await Deno.open(tmp, { read: true, write: true, create: true, truncate: true });
  } catch (err) {
    // Name the file asked for, not the temporary one (the error's class is kept).
    if (err instanceof Error) err.message = `cannot write ${out}: ${err.message.split(":")[0]}`;
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
    for await (const read of source.read(from, to)) {
      const batch = filter ? selectRecords(read, filter) : read;
      if (batch.count === 0) continue;
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
    else if (format === "arrow") {
      await writeArrow(rows(), builder!, batchRows, batchBytes, write, counted);
    } else {
      await writeParquet(arrowBatches(rows(), builder!, batchRows, batchBytes), builder!, {
        rowGroupRows: batchRows,
        write,
        onBatch: (batch) => counted(batch.numRows, lastOffset(batch)),
      });
      // JSON text columns get Parquet's JSON logical type, so readers see JSON, not text.
      const json = builder!.schema.fields.filter(isJsonField).map((f) => f.name);
      await markParquetJson(file, new Set(json));
    }
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

// Narrows [from, to] to the rows appended in [since, until) through the
// source's time lookup (O(log n), the one since= uses).
async function timeRange(
  source: Source,
  options: ExportOptions,
  from: number | null,
  to: number | null,
): Promise<{ from: number | null; to: number | null }> {
  if (options.since !== undefined) {
    const at = await source.offsetAt(options.since);
    if (at.evicted) throw new LogEvictedError(at.offset, source.earliest);
    from = Math.max(from ?? 0, at.offset);
  }
  if (options.until !== undefined) {
    const end = (await source.offsetAt(options.until)).offset - 1;
    to = to === null ? null : Math.min(to, end);
  }
  return { from, to };
}

/**
 * The default of {@linkcode ExportOptions.batchBytes}: row bytes gathered
 * into one record batch at most (besides `batchRows`), so that large rows
 * (nested values) make smaller batches and an export's memory stays bounded
 * whatever the rows' size.
 */
export const MAX_BATCH_BYTES: number = 64 << 20;

/** Gathers log reads into Arrow record batches of `batchRows` rows and at most `batchBytes`. */
async function* arrowBatches(
  batches: AsyncIterable<RecordBatch>,
  builder: ArrowRowBuilder,
  batchRows: number,
  batchBytes: number,
): AsyncGenerator<ArrowRecordBatch> {
  let slices: RecordSlice[] = [];
  let pending = 0;
  let bytes = 0;
  for await (const batch of batches) {
    let from = 0;
    while (from < batch.count) {
      let count = Math.min(batch.count - from, batchRows - pending);
      // Stop the slice where the batch's bytes would pass the cap (one row at least).
      for (let i = 0; i < count; i++) {
        bytes += batch.lengths[from + i];
        if (bytes >= batchBytes) {
          count = i + 1;
          break;
        }
      }
      slices.push({ batch, from, count });
      pending += count;
      from += count;
      if (pending === batchRows || bytes >= batchBytes) {
        yield builder.fromRecordSlices(slices);
        slices = [];
        pending = 0;
        bytes = 0;
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
  batchBytes: number,
  write: Write,
  counted: Counted,
): Promise<void> {
  const writer = new ArrowFileWriter(builder.schema, { compression: "zstd" });
  await write(writer.start());
  for await (const batch of arrowBatches(batches, builder, batchRows, batchBytes)) {
    await write(writer.write(batch));
    counted(batch.numRows, lastOffset(batch));
  }
  await write(writer.finish());
}
