/**
 * Arrow for streamcast: the mapping between a stream's JSON Schema and an
 * Arrow schema, building Arrow record batches from rows as stored (their JSON
 * text), and the `frames=arrow` encoder.
 *
 * | column type (JSON Schema)               | Arrow type |
 * |-----------------------------------------|------------|
 * | `boolean`                               | `Bool`     |
 * | `integer`, `format: "int32"`            | `Int32`    |
 * | `integer`, `format: "int64"` (default)  | `Int64`    |
 * | `number`, `format: "float"`             | `Float32`  |
 * | `number`, `format: "double"` (default)  | `Float64`  |
 * | `string`                                | `Utf8`     |
 *
 * A column declared `[T, "null"]` is a nullable field; every other field is
 * not nullable. Record batches built here have the column `offset` (`Int64`,
 * not nullable; nullable and all null on an ephemeral stream) first, then the
 * schema's columns in order. A stream with a column named `offset` cannot be
 * given that shape and is refused with a `TypeError`.
 *
 * Values: rows are parsed from their stored JSON text. An `int64` value that
 * is not a safe integer in the text (beyond ±(2^53-1), which the schema's
 * validator never lets a `send` store, but which a log written otherwise may
 * hold) is read again from its digits, exactly, as a `BigInt`; a value
 * outside the int64 range is a `RangeError`. `float` columns are `Float32`,
 * so their values are rounded to single precision as declared. A value of the
 * wrong type, or `null` in a column that is not nullable, is a `TypeError`
 * naming the offset and the column: nothing is written silently wrong.
 *
 * Importing this module registers a zstd codec (`node:zlib`) with
 * apache-arrow's `compressionRegistry`, so zstd-compressed IPC can be written
 * and read ({@linkcode registerZstd}).
 *
 * ## `frames=arrow` on the wire
 *
 * With `frames=arrow` the greeting stays the first frame (text, JSON). Every
 * frame after it is a **binary** frame holding exactly one encapsulated Arrow
 * IPC message (the streaming format's unit: `0xFFFFFFFF`, a little-endian
 * int32 metadata length, the flatbuffer `Message`, padding to 8 bytes, then the
 * body), uncompressed:
 *
 * 1. the first binary frame is the **Schema** message: `offset` (Int64) and
 *    then the stream's columns, mapped as above;
 * 2. every later binary frame is one **RecordBatch** message holding one or
 *    more rows, offsets increasing with no gap and no duplicate across frames
 *    (a batch holds what was coalesced for the subscriber: a commit group or a
 *    catch-up read, at most 4096 rows).
 *
 * There is no end-of-stream marker: the close frame ends the stream, with the
 * same close codes as the other frame modes. The frames concatenated, followed
 * by the 8 bytes `FF FF FF FF 00 00 00 00`, are a valid Arrow IPC stream that
 * any Arrow library reads. `offset` is null in every row of an ephemeral stream.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowFrameEncoder, toArrow } from "./arrow.ts";
 * import { compileSchema } from "./schema.ts";
 * const schema = compileSchema({
 *   type: "object",
 *   properties: { symbol: { type: "string" }, price: { type: "number" } },
 *   required: ["symbol", "price"],
 * });
 * equal(String(toArrow(schema)), "Schema<{ 0: symbol: Utf8, 1: price: Float64 }>");
 * const encoder = new ArrowFrameEncoder(schema);
 * const frame = encoder.encode([7], ['{"symbol":"BTC-USD","price":101.5}']);
 * equal(frame instanceof Uint8Array, true);
 * ```
 *
 * @module
 */

import zlib from "node:zlib";
import {
  AsyncByteQueue,
  Bool,
  compressionRegistry,
  CompressionType,
  type Data,
  type DataType,
  Field,
  Float32,
  Float64,
  Int32,
  Int64,
  makeData,
  RecordBatch,
  RecordBatchFileWriter,
  RecordBatchStreamWriter,
  Schema,
  Struct,
  Type,
  Utf8,
} from "apache-arrow";
import type { RecordBatch as LogRecordBatch } from "../log/mod.ts";
import { type Column, type ColumnType, compileSchema, type RowSchema } from "./schema.ts";

/**
 * The name of the offset column, first in every exported file and Arrow frame.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowRowBuilder, OFFSET_COLUMN } from "./arrow.ts";
 * const builder = new ArrowRowBuilder({
 *   type: "object",
 *   properties: { px: { type: "number" } },
 *   required: ["px"],
 * });
 * equal(builder.schema.fields[0].name, OFFSET_COLUMN);
 * ```
 */
export const OFFSET_COLUMN = "offset";

let zstdRegistered = false;

/**
 * Registers zstd (`node:zlib` `zstdCompressSync`/`zstdDecompressSync`) with
 * apache-arrow's `compressionRegistry`. Idempotent; this module calls it when
 * it is first imported, so callers only need it to make the dependency plain.
 *
 * @example
 * ```ts
 * import { compressionRegistry, CompressionType } from "apache-arrow";
 * import { registerZstd } from "./arrow.ts";
 * registerZstd();
 * console.log(compressionRegistry.get(CompressionType.ZSTD) !== null); // true
 * ```
 */
export function registerZstd(): void {
  if (zstdRegistered) return;
  compressionRegistry.set(CompressionType.ZSTD, {
    encode: (data: Uint8Array): Uint8Array => zlib.zstdCompressSync(data),
    decode: (data: Uint8Array): Uint8Array => zlib.zstdDecompressSync(data),
  });
  zstdRegistered = true;
}
registerZstd();

function isRowSchema(schema: unknown): schema is RowSchema {
  const s = schema as RowSchema;
  return typeof s === "object" && s !== null && Array.isArray(s.columns) &&
    typeof s.encode === "function";
}

function rowSchemaOf(schema: RowSchema | Record<string, unknown>): RowSchema {
  return isRowSchema(schema) ? schema : compileSchema(schema);
}

function arrowType(type: ColumnType): DataType {
  switch (type) {
    case "boolean":
      return new Bool();
    case "int32":
      return new Int32();
    case "int64":
      return new Int64();
    case "float":
      return new Float32();
    case "double":
      return new Float64();
    case "string":
      return new Utf8();
  }
}

/**
 * The Arrow schema of a stream's rows: one field per column, in order, typed
 * and nullable as declared (see the module doc for the mapping).
 *
 * @param schema A compiled schema, or a JSON Schema (compiled here).
 * @returns The Arrow schema (without the offset column).
 * @throws {SchemaError} If a JSON Schema is given and refused by `compileSchema`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { toArrow } from "./arrow.ts";
 * const schema = toArrow({
 *   type: "object",
 *   properties: {
 *     side: { type: "integer", format: "int32" },
 *     venue: { type: ["string", "null"] },
 *   },
 *   required: ["side", "venue"],
 * });
 * equal(String(schema), "Schema<{ 0: side: Int32, 1: venue: Utf8 }>");
 * equal(schema.fields[1].nullable, true);
 * ```
 */
export function toArrow(schema: RowSchema | Record<string, unknown>): Schema {
  const { columns } = rowSchemaOf(schema);
  return new Schema(columns.map((c) => new Field(c.name, arrowType(c.type), c.nullable)));
}

const SUPPORTED_ARROW = "Bool, Int32, Int64, Float32, Float64, Utf8";

function columnOf(field: Field): { type: string; format?: string } {
  const t = field.type;
  switch (t.typeId) {
    case Type.Bool:
      return { type: "boolean" };
    case Type.Int: {
      const int = t as Int32 | Int64;
      if (int.isSigned && int.bitWidth === 32) return { type: "integer", format: "int32" };
      if (int.isSigned && int.bitWidth === 64) return { type: "integer", format: "int64" };
      break;
    }
    case Type.Float: {
      const f = t as Float32 | Float64;
      if (f.precision === 1) return { type: "number", format: "float" };
      if (f.precision === 2) return { type: "number", format: "double" };
      break;
    }
    case Type.Utf8:
      return { type: "string" };
  }
  throw new TypeError(
    `column ${JSON.stringify(field.name)}: Arrow type ${t} is not supported ` +
      `(supported: ${SUPPORTED_ARROW})`,
  );
}

/**
 * The JSON Schema for an Arrow schema: the inverse of {@linkcode toArrow}.
 * Every field becomes a required column (`[T, "null"]` when the field is
 * nullable) with an explicit `format` for integers and numbers, and
 * `additionalProperties: false`; `fromArrow(toArrow(s))` has the columns of
 * `s`, and `toArrow(fromArrow(a))` equals `a`, for every supported type.
 *
 * @param schema An Arrow schema whose fields are Bool, Int32, Int64, Float32,
 *   Float64 or Utf8.
 * @returns A JSON Schema that `compileSchema` accepts.
 * @throws {TypeError} For any other Arrow type (named in the message, e.g.
 *   `Timestamp<MICROSECOND>`), or a name used by two fields.
 * @throws {SchemaError} For a field name no stream column may have.
 *
 * @example
 * ```ts
 * import { deepEqual, throws } from "node:assert/strict";
 * import { Field, Float64, Schema, TimestampMicrosecond, Utf8 } from "apache-arrow";
 * import { fromArrow } from "./arrow.ts";
 * deepEqual(
 *   fromArrow(new Schema([new Field("symbol", new Utf8()), new Field("px", new Float64(), true)])),
 *   {
 *     type: "object",
 *     properties: {
 *       symbol: { type: "string" },
 *       px: { type: ["number", "null"], format: "double" },
 *     },
 *     required: ["symbol", "px"],
 *     additionalProperties: false,
 *   },
 * );
 * throws(
 *   () => fromArrow(new Schema([new Field("ts", new TimestampMicrosecond())])),
 *   /Arrow type Timestamp<MICROSECOND> is not supported/,
 * );
 * ```
 */
export function fromArrow(schema: Schema): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const field of schema.fields) {
    if (Object.hasOwn(properties, field.name)) {
      throw new TypeError(`column ${JSON.stringify(field.name)} appears twice in the Arrow schema`);
    }
    const { type, format } = columnOf(field);
    // defineProperty: a field named __proto__ must become an own property.
    Object.defineProperty(properties, field.name, {
      value: {
        type: field.nullable ? [type, "null"] : type,
        ...(format === undefined ? {} : { format }),
      },
      enumerable: true,
      writable: true,
      configurable: true,
    });
    required.push(field.name);
  }
  const json = { type: "object", properties, required, additionalProperties: false };
  compileSchema(json); // throws SchemaError for a name no column may have
  return json;
}

/**
 * Options of {@linkcode ArrowRowBuilder} and {@linkcode ArrowFrameEncoder}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowFrameEncoder, type ArrowRowOptions } from "./arrow.ts";
 * const ephemeral: ArrowRowOptions = { durable: false };
 * const encoder = new ArrowFrameEncoder({
 *   type: "object",
 *   properties: { px: { type: "number" } },
 *   required: ["px"],
 * }, ephemeral);
 * equal(encoder.schema.fields[0].nullable, true);
 * ```
 */
export interface ArrowRowOptions {
  /**
   * Whether rows have offsets (a durable stream). `false` (an ephemeral
   * stream) makes the offset column nullable and every offset null.
   * @default true
   */
  durable?: boolean;
}

/**
 * Records `[from, from + count)` of a log record batch.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log/mod.ts";
 * import { ArrowRowBuilder, type RecordSlice } from "./arrow.ts";
 * const log = await Log.open(await Deno.makeTempDir());
 * await log.appendMany(['{"n":1}', '{"n":2}', '{"n":3}'].map((t) => new TextEncoder().encode(t)));
 * const reader = log.reader(1);
 * const batch = await reader.read();
 * reader.close();
 * await log.close();
 * const slices: RecordSlice[] = [{ batch, from: 0, count: 1 }, { batch, from: 2, count: 1 }];
 * const builder = new ArrowRowBuilder({
 *   type: "object",
 *   properties: { n: { type: "integer" } },
 *   required: ["n"],
 * });
 * equal(String(builder.fromRecordSlices(slices).getChild("n")?.toArray()), "1,3");
 * ```
 */
export interface RecordSlice {
  /** The batch, as a log reader returned it. */
  batch: LogRecordBatch;
  /** First record of the slice. */
  from: number;
  /** Records in the slice. */
  count: number;
}

/** Rows as UTF-8 JSON text in one buffer: row `i` is `buf[starts[i], ends[i])`. */
interface RowBytes {
  n: number;
  buf: Uint8Array;
  starts: Int32Array;
  ends: Int32Array;
  offsetAt: (i: number) => number | null;
}

const TWO_32 = 4294967296;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const utf8 = new TextEncoder();
const textDecoder = new TextDecoder();
/** Exact powers of ten (every one up to 1e22 is a double exactly). */
const POW10 = Array.from({ length: 23 }, (_, k) => Number(`1e${k}`));
const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const JSON_INTEGER = /^-?(?:0|[1-9][0-9]*)$/;

enum Kind {
  Bool,
  Int32,
  Int64,
  Float,
  Double,
  String,
}

const KINDS: Record<ColumnType, Kind> = {
  boolean: Kind.Bool,
  int32: Kind.Int32,
  int64: Kind.Int64,
  float: Kind.Float,
  double: Kind.Double,
  string: Kind.String,
};

/** One column being filled: values, validity, and for strings the UTF-8 bytes. */
interface Acc {
  readonly name: string;
  readonly kind: Kind;
  readonly nullable: boolean;
  /** `"name":` as bytes, with the `,` before it for every column but the first. */
  readonly key: Uint8Array;
  readonly valid: Uint8Array | null;
  readonly bits: Uint8Array | null;
  readonly i32: Int32Array | null;
  readonly i64: BigInt64Array | null;
  readonly f32: Float32Array | null;
  readonly f64: Float64Array | null;
  readonly offs: Int32Array | null;
  str: Uint8Array;
  strAt: number;
}

function where(offset: number | null, column: string): string {
  return `${offset === null ? "row" : `offset ${offset}`}: column ${JSON.stringify(column)}`;
}

function describeValue(v: unknown): string {
  if (v === undefined) return "nothing (the key is missing)";
  const text = typeof v === "bigint" ? String(v) : JSON.stringify(v);
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}

function utf8Length(s: string): number {
  let n = 0;
  const len = s.length;
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n++;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < len) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3; // a lone surrogate is written as U+FFFD
    } else n += 3;
  }
  return n;
}

/** The UTF-8 of `texts` joined by `sep`, and where each text starts and ends. */
function encodeTexts(texts: readonly string[], sep: string): RowBytes & { n: number } {
  const n = texts.length;
  const buf = utf8.encode(texts.join(sep));
  const starts = new Int32Array(n);
  const ends = new Int32Array(n);
  let chars = 0;
  for (let i = 0; i < n; i++) chars += texts[i].length;
  chars += Math.max(0, n - 1) * sep.length;
  // All ASCII (the common case): byte positions are character positions.
  const ascii = buf.length === chars;
  let at = 0;
  for (let i = 0; i < n; i++) {
    starts[i] = at;
    at += ascii ? texts[i].length : utf8Length(texts[i]);
    ends[i] = at;
    at += sep.length;
  }
  return { n, buf, starts, ends, offsetAt: () => null };
}

// Where the number scanner stopped (a typed array: two results without allocating,
// and cheaper to write than a module-level binding).
const scanEnd = new Int32Array(1);

/**
 * Scans a JSON number at `p`. Returns its value when it is an integer up to
 * 2^53, or has at most 15 digits and no exponent — then mantissa / 10^k is
 * one correctly rounded division of two exact doubles, the same double
 * JSON.parse gives — else NaN (the caller falls back to the exact path).
 * Sets `scanEnd`.
 */
function scanNumber(buf: Uint8Array, p: number): number {
  let neg = false;
  if (buf[p] === 45) {
    neg = true;
    p++;
  }
  let m = 0;
  let digits = 0;
  let b = buf[p];
  if (b === 48 && buf[p + 1] >= 48 && buf[p + 1] <= 57) return NaN; // a leading zero
  while (b >= 48 && b <= 57) {
    m = m * 10 + (b - 48);
    digits++;
    b = buf[++p];
  }
  if (digits === 0) return NaN;
  let k = 0;
  if (b === 46) {
    b = buf[++p];
    while (b >= 48 && b <= 57) {
      m = m * 10 + (b - 48);
      k++;
      b = buf[++p];
    }
    if (k === 0) return NaN;
  }
  // Integers are exact up to 2^53 (every step below the result is exact too);
  // decimals need mantissa and 10^k exact: at most 15 digits.
  if (b === 101 || b === 69 || (k === 0 ? m > MAX_SAFE : digits + k > 15)) return NaN;
  scanEnd[0] = p;
  const v = k === 0 ? m : m / POW10[k];
  return neg ? -v : v;
}

/**
 * Builds Arrow record batches — `offset` first, then the stream's columns —
 * from rows as stored: their JSON text, log record batches (payload bytes),
 * or wire frames `[offset,msg]`.
 *
 * Rows are scanned from their UTF-8 bytes against the schema: keys in column
 * order and no whitespace, as the stream's encoder writes them, numbers with
 * up to 15 digits, strings copied byte for byte. Any other row (escapes,
 * non-ASCII text, exponents, long numbers, a different shape) is parsed
 * exactly (`JSON.parse`, int64 digits as `BigInt`) and checked the same way.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowRowBuilder } from "./arrow.ts";
 * const builder = new ArrowRowBuilder({
 *   type: "object",
 *   properties: { id: { type: "integer" }, note: { type: ["string", "null"] } },
 *   required: ["id", "note"],
 * });
 * const batch = builder.fromJson([1, 2], ['{"id":10,"note":"a"}', '{"id":11,"note":null}']);
 * equal(batch.numRows, 2);
 * equal(batch.getChild("offset")?.get(1), 2n);
 * equal(batch.getChild("note")?.get(1), null);
 * ```
 */
export class ArrowRowBuilder {
  /** The schema of the batches: `offset`, then the columns. */
  readonly schema: Schema;
  /** The stream's columns. */
  readonly columns: readonly Column[];
  /** Whether offsets are present (see {@linkcode ArrowRowOptions.durable}). */
  readonly durable: boolean;
  readonly #keys: Uint8Array[];
  readonly #int64Names: Set<string>;
  #scratch = new Uint8Array(1 << 16);

  /**
   * A builder for `schema`.
   *
   * @throws {TypeError} If the schema has a column named `offset`.
   */
  constructor(schema: RowSchema | Record<string, unknown>, options: ArrowRowOptions = {}) {
    const rs = rowSchemaOf(schema);
    if (rs.columns.some((c) => c.name === OFFSET_COLUMN)) {
      throw new TypeError(
        `the stream has a column named "${OFFSET_COLUMN}", which clashes with the offset ` +
          "column of Arrow and Parquet exports and frames; rename the column",
      );
    }
    this.columns = rs.columns;
    this.durable = options.durable ?? true;
    this.schema = new Schema([
      new Field(OFFSET_COLUMN, new Int64(), !this.durable),
      ...toArrow(rs).fields,
    ]);
    this.#keys = rs.columns.map((c, i) =>
      utf8.encode(`${i > 0 ? "," : ""}${JSON.stringify(c.name)}:`)
    );
    this.#int64Names = new Set(rs.columns.filter((c) => c.type === "int64").map((c) => c.name));
  }

  /**
   * A batch from rows' JSON text (as stored and sent) and their offsets.
   *
   * @param offsets The rows' offsets, or `null` on an ephemeral stream.
   * @param rows The rows' JSON text, one object per row.
   */
  fromJson(offsets: ArrayLike<number> | null, rows: readonly string[]): RecordBatch {
    if (offsets !== null && offsets.length !== rows.length) {
      throw new RangeError(`${offsets.length} offsets for ${rows.length} rows`);
    }
    const bytes = encodeTexts(rows, "\n");
    bytes.offsetAt = offsets === null ? () => null : (i) => offsets[i];
    return this.#build(bytes);
  }

  /**
   * A batch from wire frames `[offset,msg]` (as a stream fans them out).
   *
   * @param frames Single frames, one row each.
   */
  fromFrames(frames: readonly string[]): RecordBatch {
    const bytes = encodeTexts(frames, "\n");
    const { buf, starts, ends } = bytes;
    const offsets: (number | null)[] = new Array(frames.length);
    for (let i = 0; i < frames.length; i++) {
      // [offset,msg]: digits (or null), then the row up to the closing bracket.
      let p = starts[i];
      const end = ends[i];
      if (buf[p] !== 91 || buf[end - 1] !== 93) {
        throw new TypeError(`frame ${i} is not [offset,msg]: ${frames[i].slice(0, 40)}`);
      }
      p++;
      let offset: number | null = 0;
      if (buf[p] === 110 && buf[p + 1] === 117 && buf[p + 2] === 108 && buf[p + 3] === 108) {
        offset = null;
        p += 4;
      } else {
        while (buf[p] >= 48 && buf[p] <= 57) offset = offset * 10 + (buf[p++] - 48);
        if (p === starts[i] + 1) {
          throw new TypeError(`frame ${i} is not [offset,msg]: ${frames[i].slice(0, 40)}`);
        }
      }
      if (buf[p] !== 44) {
        throw new TypeError(`frame ${i} is not [offset,msg]: ${frames[i].slice(0, 40)}`);
      }
      offsets[i] = offset;
      starts[i] = p + 1;
      ends[i] = end - 1;
    }
    bytes.offsetAt = (i) => offsets[i];
    return this.#build(bytes);
  }

  /**
   * A batch from records of a log record batch, scanned from the payload
   * bytes with no string per row.
   *
   * @param batch Records as a log reader returned them.
   * @param from First record to take. @default 0
   * @param count Records to take. @default the rest of the batch
   */
  fromRecords(batch: LogRecordBatch, from = 0, count: number = batch.count - from): RecordBatch {
    return this.fromRecordSlices([{ batch, from, count }]);
  }

  /**
   * One batch from several slices of log record batches, in order (an export
   * gathers reads this way up to its batch size).
   */
  fromRecordSlices(slices: readonly RecordSlice[]): RecordBatch {
    let n = 0;
    for (const s of slices) {
      if (!(s.from >= 0 && s.count >= 0 && s.from + s.count <= s.batch.count)) {
        throw new RangeError(
          `records [${s.from}, ${s.from + s.count}) are outside a batch of ${s.batch.count}`,
        );
      }
      n += s.count;
    }
    // One slice from one buffer (the common case) is scanned in place.
    if (slices.length === 1) {
      const { batch, from, count } = slices[0];
      const starts = batch.starts.subarray(from, from + count);
      const ends = new Int32Array(count);
      for (let i = 0; i < count; i++) ends[i] = starts[i] + batch.lengths[from + i];
      const offsets = batch.offsets.subarray(from, from + count);
      return this.#build({
        n,
        buf: batch.buf,
        starts,
        ends,
        offsetAt: this.durable ? (i) => offsets[i] : () => null,
      });
    }
    let bytes = 0;
    for (const s of slices) {
      for (let i = s.from; i < s.from + s.count; i++) bytes += s.batch.lengths[i];
    }
    if (this.#scratch.length < bytes) {
      this.#scratch = new Uint8Array(Math.max(bytes, this.#scratch.length * 2));
    }
    const buf = this.#scratch;
    const starts = new Int32Array(n);
    const ends = new Int32Array(n);
    const offsets = new Float64Array(n);
    let o = 0;
    let k = 0;
    for (const s of slices) {
      const b = s.batch;
      for (let i = s.from; i < s.from + s.count; i++) {
        const start = b.starts[i];
        buf.set(b.buf.subarray(start, start + b.lengths[i]), o);
        starts[k] = o;
        o += b.lengths[i];
        ends[k] = o;
        offsets[k++] = b.offsets[i];
      }
    }
    return this.#build({
      n,
      buf,
      starts,
      ends,
      offsetAt: this.durable ? (i) => offsets[i] : () => null,
    });
  }

  /** An empty batch of this schema. */
  empty(): RecordBatch {
    return this.#build({
      n: 0,
      buf: new Uint8Array(0),
      starts: new Int32Array(0),
      ends: new Int32Array(0),
      offsetAt: () => null,
    });
  }

  #accs(n: number, bytes: number): Acc[] {
    return this.columns.map((c, i): Acc => {
      const kind = KINDS[c.type];
      const i64 = kind === Kind.Int64 ? new BigInt64Array(n) : null;
      return {
        name: c.name,
        kind,
        nullable: c.nullable,
        key: this.#keys[i],
        valid: c.nullable ? new Uint8Array((n + 7) >> 3) : null,
        bits: kind === Kind.Bool ? new Uint8Array((n + 7) >> 3) : null,
        i32: kind === Kind.Int32 ? new Int32Array(n) : i64 ? new Int32Array(i64.buffer) : null,
        i64,
        f32: kind === Kind.Float ? new Float32Array(n) : null,
        f64: kind === Kind.Double ? new Float64Array(n) : null,
        offs: kind === Kind.String ? new Int32Array(n + 1) : null,
        str: new Uint8Array(kind === Kind.String ? Math.min(bytes, 1 << 16) + 64 : 0),
        strAt: 0,
      };
    });
  }

  #build(rows: RowBytes): RecordBatch {
    const { n, buf, starts, ends } = rows;
    let total = 0;
    for (let i = 0; i < n; i++) total += ends[i] - starts[i];
    const accs = this.#accs(n, total);
    const cols = accs.length;
    for (let r = 0; r < n; r++) {
      let p = starts[r];
      const end = ends[r];
      let ok = buf[p] === 123; // {
      p++;
      for (let c = 0; ok && c < cols; c++) {
        const a = accs[c];
        const key = a.key;
        for (let k = 0; k < key.length; k++) {
          if (buf[p + k] !== key[k]) {
            ok = false;
            break;
          }
        }
        if (!ok) break;
        p += key.length;
        const b = buf[p];
        if (b === 110) { // null
          if (!a.nullable || buf[p + 1] !== 117 || buf[p + 2] !== 108 || buf[p + 3] !== 108) {
            ok = false;
            break;
          }
          p += 4;
          if (a.kind === Kind.String) a.offs![r + 1] = a.strAt;
          continue;
        }
        switch (a.kind) {
          case Kind.String: {
            if (b !== 34) {
              ok = false;
              break;
            }
            // Room for the rest of the row, which bounds the string.
            if (a.strAt + (end - p) > a.str.length) grow(a, end - p);
            const str = a.str;
            let at = a.strAt;
            let q = p + 1;
            let x = buf[q];
            // Plain ASCII up to the closing quote; escapes, control characters
            // (not valid raw in JSON) and non-ASCII bytes take the exact path.
            while (x !== 34 && x !== 92 && x < 0x80 && x >= 0x20 && q < end) {
              str[at++] = x;
              x = buf[++q];
            }
            if (x !== 34 || q >= end) {
              ok = false;
              break;
            }
            a.strAt = at;
            a.offs![r + 1] = at;
            p = q + 1;
            break;
          }
          case Kind.Bool: {
            if (b === 116 && buf[p + 1] === 114 && buf[p + 2] === 117 && buf[p + 3] === 101) {
              a.bits![r >> 3] |= 1 << (r & 7);
              p += 4;
            } else if (
              b === 102 && buf[p + 1] === 97 && buf[p + 2] === 108 && buf[p + 3] === 115 &&
              buf[p + 4] === 101
            ) {
              p += 5;
            } else ok = false;
            break;
          }
          default: {
            const v = scanNumber(buf, p);
            if (v !== v) {
              ok = false;
              break;
            }
            p = scanEnd[0];
            if (a.kind === Kind.Int32) {
              if ((v | 0) !== v) ok = false;
              else a.i32![r] = v;
            } else if (a.kind === Kind.Int64) {
              if (!Number.isInteger(v)) ok = false;
              else putInt64(a.i64!, a.i32!, r, v);
            } else if (a.kind === Kind.Double) a.f64![r] = v;
            else a.f32![r] = v;
          }
        }
        if (!ok) break;
        if (a.valid) a.valid[r >> 3] |= 1 << (r & 7);
      }
      if (!ok || p !== end - 1 || buf[p] !== 125) this.#exactRow(accs, rows, r);
    }
    const children: Data[] = [this.#offsetData(rows)];
    for (const a of accs) children.push(columnData(a, n));
    const data = makeData({
      type: new Struct(this.schema.fields),
      length: n,
      nullCount: 0,
      children,
    });
    return new RecordBatch(this.schema, data);
  }

  /**
   * Row `r` did not scan: parse it exactly (int64 digits as BigInt) and set
   * every column from the parsed value, checking types as it goes.
   */
  #exactRow(accs: Acc[], rows: RowBytes, r: number): void {
    const text = textDecoder.decode(rows.buf.subarray(rows.starts[r], rows.ends[r]));
    const offset = rows.offsetAt(r);
    let row: unknown;
    try {
      row = this.#parseExact(text);
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      throw new TypeError(
        `${offset === null ? "row" : `offset ${offset}`} is not valid JSON: ${err.message}`,
      );
    }
    if (typeof row !== "object" || row === null || Array.isArray(row)) {
      throw new TypeError(
        `${offset === null ? "row" : `offset ${offset}`} is not a JSON object: ${
          text.slice(0, 40)
        }`,
      );
    }
    const fields = row as Record<string, unknown>;
    for (const a of accs) {
      if (a.kind === Kind.String) a.strAt = a.offs![r]; // drop what the scan wrote for this row
      const v = Object.hasOwn(fields, a.name) ? fields[a.name] : undefined;
      const bit = 1 << (r & 7);
      if (v === null) {
        if (!a.nullable) throw new TypeError(`${where(offset, a.name)} is null but not nullable`);
        a.valid![r >> 3] &= ~bit;
        if (a.kind === Kind.String) a.offs![r + 1] = a.strAt;
        continue;
      }
      const bad = (what: string): never => {
        throw new TypeError(`${where(offset, a.name)} holds ${describeValue(v)}, not ${what}`);
      };
      switch (a.kind) {
        case Kind.Bool:
          if (typeof v !== "boolean") bad("a boolean");
          if (v) a.bits![r >> 3] |= bit;
          else a.bits![r >> 3] &= ~bit;
          break;
        case Kind.Int32:
          if (typeof v !== "number" || (v | 0) !== v) bad("an int32");
          a.i32![r] = v as number;
          break;
        case Kind.Int64:
          if (typeof v === "bigint") {
            if (v < INT64_MIN || v > INT64_MAX) {
              throw new RangeError(`${where(offset, a.name)} holds ${v}, outside the int64 range`);
            }
            a.i64![r] = v;
          } else if (typeof v === "number" && Number.isSafeInteger(v)) {
            putInt64(a.i64!, a.i32!, r, v);
          } else bad("an int64");
          break;
        case Kind.Float:
        case Kind.Double:
          if (typeof v !== "number") bad(a.kind === Kind.Float ? "a float" : "a double");
          if (a.kind === Kind.Float) a.f32![r] = v as number;
          else a.f64![r] = v as number;
          break;
        case Kind.String: {
          if (typeof v !== "string") bad("a string");
          const s = v as string;
          if (a.strAt + s.length * 3 > a.str.length) grow(a, s.length * 3);
          a.strAt += utf8.encodeInto(s, a.str.subarray(a.strAt)).written;
          if (a.strAt > 0x7fff_ffff) {
            throw new RangeError(
              `column ${JSON.stringify(a.name)}: more than 2 GiB of text in a batch`,
            );
          }
          a.offs![r + 1] = a.strAt;
          break;
        }
      }
      if (a.valid) a.valid[r >> 3] |= bit;
    }
  }

  // Parses JSON text with every int64 column's integer as a BigInt of its digits.
  #parseExact(text: string): unknown {
    const names = this.#int64Names;
    return JSON.parse(text, (key, value, context?: { source?: string }) => {
      if (typeof value !== "number" || !names.has(key)) return value;
      const source = context?.source ?? "";
      if (JSON_INTEGER.test(source)) return BigInt(source);
      return Number.isInteger(value) ? BigInt(value) : value;
    });
  }

  #offsetData(rows: RowBytes): Data {
    const n = rows.n;
    const type = new Int64();
    if (!this.durable) {
      return makeData({ type, length: n, nullCount: n, nullBitmap: new Uint8Array((n + 7) >> 3) });
    }
    const values = new BigInt64Array(n);
    const words = new Int32Array(values.buffer);
    for (let i = 0; i < n; i++) {
      const v = rows.offsetAt(i);
      if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
        throw new TypeError(`row ${i}: offset ${describeValue(v)} is not a valid offset`);
      }
      putInt64(values, words, i, v);
    }
    return makeData({ type, length: n, nullCount: 0, data: values });
  }
}

function grow(a: Acc, need: number): void {
  let cap = a.str.length * 2;
  while (cap < a.strAt + need) cap *= 2;
  const next = new Uint8Array(cap);
  next.set(a.str.subarray(0, a.strAt));
  a.str = next;
}

function popcount(bits: Uint8Array, n: number): number {
  let c = 0;
  for (let i = 0; i < n; i++) c += (bits[i >> 3] >> (i & 7)) & 1;
  return c;
}

function columnData(a: Acc, n: number): Data {
  const nullCount = a.valid ? n - popcount(a.valid, n) : 0;
  const common = {
    length: n,
    nullCount,
    ...(nullCount > 0 ? { nullBitmap: a.valid! } : {}),
  };
  switch (a.kind) {
    case Kind.Bool:
      return makeData({ type: new Bool(), ...common, data: a.bits! });
    case Kind.Int32:
      return makeData({ type: new Int32(), ...common, data: a.i32! });
    case Kind.Int64:
      return makeData({ type: new Int64(), ...common, data: a.i64! });
    case Kind.Float:
      return makeData({ type: new Float32(), ...common, data: a.f32! });
    case Kind.Double:
      return makeData({ type: new Float64(), ...common, data: a.f64! });
    case Kind.String:
      return makeData({
        type: new Utf8(),
        ...common,
        data: a.str.subarray(0, a.strAt),
        valueOffsets: a.offs!,
      });
  }
}

function putInt64(values: BigInt64Array, words: Int32Array, i: number, v: number): void {
  if (!LITTLE_ENDIAN) {
    values[i] = BigInt(v);
    return;
  }
  // Two 32-bit words instead of BigInt(v): several times faster, and exact for
  // safe integers (floor division and the remainder stay exact in doubles).
  const hi = Math.floor(v / TWO_32);
  words[2 * i] = v - hi * TWO_32;
  words[2 * i + 1] = hi;
}

// A writer given a batch of another schema would start a new stream or file
// part-way through: refuse it instead.
function checkSchema(batch: RecordBatch, schema: Schema, whose: string): void {
  const a = batch.schema.fields;
  const b = schema.fields;
  const same = a.length === b.length &&
    a.every((f, i) =>
      f.name === b[i].name && f.nullable === b[i].nullable && String(f.type) === String(b[i].type)
    );
  if (!same) throw new TypeError(`the batch's schema ${batch.schema} is not ${whose} ${schema}`);
}

/** Collects what an apache-arrow writer emits, synchronously. */
class ByteCollector extends AsyncByteQueue<Uint8Array> {
  #chunks: Uint8Array[] = [];
  #bytes = 0;

  override write(value: Uint8Array): void {
    if (value.byteLength === 0) return;
    this.#chunks.push(value);
    this.#bytes += value.byteLength;
  }

  /** Bytes collected so far. */
  get size(): number {
    return this.#bytes;
  }

  /** The bytes collected since the last take, as one array (copied). */
  take(): Uint8Array<ArrayBuffer> {
    const out = new Uint8Array(this.#bytes);
    let o = 0;
    for (const c of this.#chunks) {
      out.set(c, o);
      o += c.byteLength;
    }
    this.#chunks = [];
    this.#bytes = 0;
    return out;
  }
}

/**
 * A stream writer that keeps no per-message bookkeeping: the base class
 * remembers a block per record batch for a file footer, which a stream that
 * lives as long as a subscription must not accumulate.
 */
class MessageWriter extends RecordBatchStreamWriter {
  protected override _writeRecordBatch(batch: RecordBatch): this {
    super._writeRecordBatch(batch);
    this._recordBatchBlocks.length = 0;
    return this;
  }
}

/**
 * Encodes rows as Arrow IPC stream messages for `frames=arrow`: one schema
 * message, then one record batch message per frame (see the module doc for
 * the wire). Build one per stream and share it across subscribers: encoding is
 * per batch, not per subscriber.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowFrameEncoder } from "./arrow.ts";
 * import { ArrowFrameDecoder } from "../client/arrow.ts";
 * const encoder = new ArrowFrameEncoder({
 *   type: "object",
 *   properties: { price: { type: "number" } },
 *   required: ["price"],
 * });
 * const decoder = new ArrowFrameDecoder();
 * decoder.push(encoder.schemaMessage());
 * const batch = decoder.push(encoder.encodeFrames(['[5,{"price":1.5}]', '[6,{"price":2}]']));
 * equal(batch?.numRows, 2);
 * equal(batch?.getChild("price")?.get(1), 2);
 * ```
 */
export class ArrowFrameEncoder {
  /** The builder (its `schema` is the wire schema). */
  readonly builder: ArrowRowBuilder;
  readonly #writer: MessageWriter;
  readonly #sink = new ByteCollector();
  readonly #schemaMessage: Uint8Array<ArrayBuffer>;

  /**
   * An encoder for a stream's schema.
   *
   * @throws {TypeError} If the schema has a column named `offset`.
   */
  constructor(schema: RowSchema | Record<string, unknown>, options: ArrowRowOptions = {}) {
    this.builder = new ArrowRowBuilder(schema, options);
    this.#writer = new MessageWriter();
    this.#writer.reset(this.#sink, this.builder.schema);
    this.#schemaMessage = this.#sink.take();
  }

  /** The wire schema: `offset`, then the stream's columns. */
  get schema(): Schema {
    return this.builder.schema;
  }

  /** The first binary frame: the Arrow IPC schema message (the same bytes every time). */
  schemaMessage(): Uint8Array<ArrayBuffer> {
    return this.#schemaMessage.slice();
  }

  /** One record batch message from an Arrow batch of the wire schema. */
  encodeBatch(batch: RecordBatch): Uint8Array<ArrayBuffer> {
    checkSchema(batch, this.builder.schema, "this encoder's");
    this.#writer.write(batch);
    return this.#sink.take();
  }

  /** One record batch message from rows' JSON text and their offsets (`null`: ephemeral). */
  encode(offsets: ArrayLike<number> | null, rows: readonly string[]): Uint8Array<ArrayBuffer> {
    return this.encodeBatch(this.builder.fromJson(offsets, rows));
  }

  /** One record batch message from wire frames `[offset,msg]`, as a stream fans them out. */
  encodeFrames(frames: readonly string[]): Uint8Array<ArrayBuffer> {
    return this.encodeBatch(this.builder.fromFrames(frames));
  }

  /**
   * One record batch message from records `[from, from + count)` of a log
   * record batch (a catch-up read), parsed from the payload bytes.
   */
  encodeRecords(
    batch: LogRecordBatch,
    from = 0,
    count: number = batch.count - from,
  ): Uint8Array<ArrayBuffer> {
    return this.encodeBatch(this.builder.fromRecords(batch, from, count));
  }
}

/**
 * Options of {@linkcode ArrowFileWriter}.
 *
 * @example
 * ```ts
 * import { ArrowFileWriter, type ArrowFileWriterOptions, toArrow } from "./arrow.ts";
 * const plain: ArrowFileWriterOptions = { compression: null };
 * const schema = toArrow({ type: "object", properties: { n: { type: "integer" } }, required: ["n"] });
 * console.log(new ArrowFileWriter(schema, plain).start().length > 0); // true
 * ```
 */
export interface ArrowFileWriterOptions {
  /** Compression of the record batches' buffers. @default "zstd" */
  compression?: "zstd" | null;
}

/**
 * Writes an Arrow IPC **file** (the random-access format: magic, schema,
 * record batches, footer) piece by piece, handing back the bytes to append
 * after each step, so a caller can stream a file of any size to disk.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { tableFromIPC } from "apache-arrow";
 * import { ArrowFileWriter, ArrowRowBuilder } from "./arrow.ts";
 * const builder = new ArrowRowBuilder({
 *   type: "object",
 *   properties: { n: { type: "integer" } },
 *   required: ["n"],
 * });
 * const writer = new ArrowFileWriter(builder.schema);
 * const parts = [writer.start(), writer.write(builder.fromJson([1], ['{"n":42}'])), writer.finish()];
 * const table = tableFromIPC(new Uint8Array(await new Blob(parts).arrayBuffer()));
 * equal(table.getChild("n")?.get(0), 42n);
 * ```
 */
export class ArrowFileWriter {
  /** The file's schema. */
  readonly schema: Schema;
  readonly #writer: RecordBatchFileWriter;
  readonly #sink = new ByteCollector();
  #started = false;

  /** A writer of a file with `schema`. */
  constructor(schema: Schema, options: ArrowFileWriterOptions = {}) {
    this.schema = schema;
    const compression = options.compression === undefined ? "zstd" : options.compression;
    this.#writer = new RecordBatchFileWriter({
      compressionType: compression === "zstd" ? CompressionType.ZSTD : null,
    });
  }

  /** The file's start: magic and schema. */
  start(): Uint8Array<ArrayBuffer> {
    if (this.#started) throw new TypeError("the Arrow file is already started");
    this.#started = true;
    this.#writer.reset(this.#sink, this.schema);
    return this.#sink.take();
  }

  /** One record batch (of the file's schema). */
  write(batch: RecordBatch): Uint8Array<ArrayBuffer> {
    if (!this.#started) throw new TypeError("start() the Arrow file first");
    checkSchema(batch, this.schema, "this file's");
    this.#writer.write(batch);
    return this.#sink.take();
  }

  /** The file's end: footer and magic. The writer is done after this. */
  finish(): Uint8Array<ArrayBuffer> {
    if (!this.#started) throw new TypeError("start() the Arrow file first");
    this.#writer.close();
    return this.#sink.take();
  }
}
