/**
 * The rows of a commit as the table's Parquet data files: one file per day
 * of `streamcast_time` (the partition), zstd-compressed, every column with
 * its Iceberg field id, and the table schema in the file's key-value
 * metadata (`iceberg.schema`, as Iceberg's own writers put it).
 *
 * Rows are parsed from their stored JSON by the Arrow row builder
 * (`arrow/row_builder.ts`, the one export uses), which gives `offset` and
 * the stream's columns; the offset becomes `streamcast_offset`, the append
 * times `streamcast_time`, and each column is retyped to the field (with
 * its id) the table schema gives it. A row stored before the schema grew a
 * column reads as null in it, as in export.
 *
 * @module
 */

import {
  type Data,
  type DataType,
  makeData,
  RecordBatch,
  type Schema,
  Struct,
  Table,
  tableToIPC,
  TimestampMicrosecond,
  Type,
} from "apache-arrow";
import type { RecordBatch as LogRecordBatch } from "../log/mod.ts";
import { ArrowRowBuilder, type RecordSlice } from "../arrow/row_builder.ts";
import { arrowSchema, type IcebergSchema } from "./schema.ts";

/**
 * µs in a day: `day(streamcast_time)` is `floor(µs / DAY_US)`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { DAY_US } from "./data_files.ts";
 * equal(Math.floor(Date.UTC(2026, 0, 2) * 1000 / DAY_US), 20455);
 * ```
 */
export const DAY_US = 86_400_000_000;

/**
 * Rows per Parquet row group in a data file.
 */
export const ROW_GROUP_ROWS = 1 << 18;

/** Rows gathered before they are parsed into one Arrow record batch (as export's batches). */
const BATCH_ROWS = 1 << 16;

/**
 * One data file, made: its partition, bytes and bounds.
 */
export interface MadeFile {
  /** Days since 1970-01-01 of its rows' append times. */
  day: number;
  /** The Parquet file. */
  bytes: Uint8Array;
  /** Rows. */
  rows: number;
  /** First and last offsets. */
  firstOffset: number;
  /** @see firstOffset */
  lastOffset: number;
  /** First and last append times, µs. */
  firstTimeUs: number;
  /** @see firstTimeUs */
  lastTimeUs: number;
}

/**
 * `YYYY-MM-DD` of a day number (the partition folder's value).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { dayText } from "./data_files.ts";
 * equal(dayText(0), "1970-01-01");
 * equal(dayText(20454), "2026-01-01");
 * ```
 */
export function dayText(day: number): string {
  return new Date(day * 86_400_000).toISOString().slice(0, 10);
}

// `data` as `type`: the same buffers under the table's field (names, ids).
function retype(data: Data, type: DataType): Data {
  if (type.typeId === Type.Struct || type.typeId === Type.List) {
    const children = data.children.map((c, i) => retype(c, type.children[i].type));
    return data.clone(type, data.offset, data.length, data.nullCount, undefined, children);
  }
  return data.clone(type);
}

interface DayRows {
  day: number;
  batches: RecordBatch[];
  rows: number;
  firstOffset: number;
  lastOffset: number;
  firstTimeUs: number;
  lastTimeUs: number;
}

/**
 * Gathers a commit's rows, day by day, and writes them as Parquet data files.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { DataFileBuilder } from "./data_files.ts";
 * import { tableSchemas } from "./schema.ts";
 * const json = { type: "object", properties: { px: { type: "number" } }, required: ["px"] };
 * const { schemas } = tableSchemas([json]);
 * const builder = new DataFileBuilder(schemas[0], json);
 * const enc = new TextEncoder();
 * const payloads = [enc.encode('{"px":1.5}'), enc.encode('{"px":2.5}')];
 * const buf = new Uint8Array([...payloads[0], ...payloads[1]]);
 * builder.add({
 *   buf, count: 2, offsets: new Float64Array([7, 8]),
 *   times: new Float64Array([86_399_999_999, 86_400_000_000]), // across midnight
 *   starts: new Int32Array([0, 10]), lengths: new Int32Array([10, 10]),
 * });
 * const files = await builder.finish();
 * equal(files.length, 2);
 * equal(files[1].day, 1);
 * equal(files[1].firstOffset, 8);
 * ```
 */
export class DataFileBuilder {
  /** The table schema the files are written with. */
  readonly schema: IcebergSchema;
  readonly #arrow: Schema;
  readonly #rows: ArrowRowBuilder;
  readonly #days = new Map<number, DayRows>();
  #total = 0;
  #pending: LogRecordBatch[] = [];
  #pendingRows = 0;

  /**
   * A builder of files with table schema `schema`, parsing rows with the
   * stream's JSON Schema `json` (the version `schema` maps).
   */
  constructor(schema: IcebergSchema, json: Record<string, unknown>) {
    this.schema = schema;
    this.#arrow = arrowSchema(schema);
    this.#rows = new ArrowRowBuilder(json);
    if (this.#rows.columns.length + 2 !== schema.fields.length) {
      throw new TypeError(
        `table schema ${schema["schema-id"]} has ${schema.fields.length - 2} columns, ` +
          `the stream's schema ${this.#rows.columns.length}`,
      );
    }
  }

  /** Rows added so far. */
  get rows(): number {
    return this.#total;
  }

  /** Adds rows (in offset order), with their append times in `batch.times`. */
  add(batch: LogRecordBatch): void {
    if (batch.count === 0) return;
    this.#pending.push(batch);
    this.#pendingRows += batch.count;
    this.#total += batch.count;
    if (this.#pendingRows >= BATCH_ROWS) this.#flush();
  }

  // Parses the rows gathered as one Arrow batch and files its rows by day.
  #flush(): void {
    const parts = this.#pending;
    const n = this.#pendingRows;
    if (n === 0) return;
    this.#pending = [];
    this.#pendingRows = 0;
    const slices: RecordSlice[] = parts.map((batch) => ({ batch, from: 0, count: batch.count }));
    const built = this.#rows.fromRecordSlices(slices);
    const [offsets, ...columns] = built.data.children;
    const times = new BigInt64Array(n);
    const words = new Int32Array(times.buffer); // little-endian halves: no BigInt per row
    const timesUs = new Float64Array(n);
    const offsetOf = new Float64Array(n);
    let k = 0;
    for (const b of parts) {
      for (let i = 0; i < b.count; i++, k++) {
        const t = b.times[i];
        words[2 * k] = t % 0x1_0000_0000;
        words[2 * k + 1] = Math.floor(t / 0x1_0000_0000);
        timesUs[k] = t;
        offsetOf[k] = b.offsets[i];
      }
    }
    const timeData = makeData({ type: new TimestampMicrosecond("UTC"), length: n, data: times });
    const fields = this.#arrow.fields;
    const children = [
      retype(offsets, fields[0].type),
      timeData,
      ...columns.map((c, i) => retype(c, fields[i + 2].type)),
    ];
    const data = makeData({ type: new Struct(fields), length: n, nullCount: 0, children });
    const whole = new RecordBatch(this.#arrow, data);
    // Times never decrease in offset order: each day is one run of rows.
    let from = 0;
    while (from < n) {
      const day = Math.floor(timesUs[from] / DAY_US);
      let to = from + 1;
      while (to < n && Math.floor(timesUs[to] / DAY_US) === day) to++;
      let d = this.#days.get(day);
      if (!d) {
        d = {
          day,
          batches: [],
          rows: 0,
          firstOffset: offsetOf[from],
          lastOffset: 0,
          firstTimeUs: timesUs[from],
          lastTimeUs: 0,
        };
        this.#days.set(day, d);
      }
      d.batches.push(from === 0 && to === n ? whole : whole.slice(from, to));
      d.rows += to - from;
      d.lastOffset = offsetOf[to - 1];
      d.lastTimeUs = timesUs[to - 1];
      from = to;
    }
  }

  /** The data files: one per day, in day order. */
  async finish(): Promise<MadeFile[]> {
    this.#flush();
    // Loaded on first use: 5 MB of WebAssembly.
    const pw = await import("parquet-wasm");
    // Built afresh per file: writing takes the properties over.
    const properties = () => {
      let props = new pw.WriterPropertiesBuilder()
        .setCompression(pw.Compression.ZSTD)
        .setMaxRowGroupSize(ROW_GROUP_ROWS)
        .setCreatedBy("streamcast (parquet-wasm)")
        .setKeyValueMetadata(new Map([["iceberg.schema", JSON.stringify(this.schema)]]));
      // Offsets, times and int64 columns mostly rise: delta-packed, as export writes them.
      for (const f of this.schema.fields) {
        if (f.type === "long" || f.type === "timestamptz") {
          props = props
            .setColumnEncoding(f.name, pw.Encoding.DELTA_BINARY_PACKED)
            .setColumnDictionaryEnabled(f.name, false);
        } else if (f.type === "double" || f.type === "float") {
          props = props.setColumnDictionaryEnabled(f.name, false);
        }
      }
      return props.build();
    };
    const out: MadeFile[] = [];
    for (const d of [...this.#days.values()].sort((a, b) => a.day - b.day)) {
      const table = pw.Table.fromIPCStream(tableToIPC(new Table(d.batches), "stream"));
      // Writing takes the table over (and frees it).
      const bytes = pw.writeParquet(table, properties());
      out.push({
        day: d.day,
        bytes,
        rows: d.rows,
        firstOffset: d.firstOffset,
        lastOffset: d.lastOffset,
        firstTimeUs: d.firstTimeUs,
        lastTimeUs: d.lastTimeUs,
      });
    }
    return out;
  }
}
