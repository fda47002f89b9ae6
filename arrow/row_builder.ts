/**
 * Building Arrow record batches from rows as stored: `offset` first
 * (`Int64`, not nullable; nullable and all null on an ephemeral stream), then
 * the schema's columns in order, typed as `toArrow` maps them. A stream with a
 * column named `offset` cannot be given that shape and is refused with a
 * `TypeError`.
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
 * Nested columns (`object`, `array`) are a Struct or List when their schema
 * is closed and typed (their values parsed), else JSON text: the bytes
 * stored for the value, copied. A row that lacks a run of nullable columns
 * at the end (it was written before the schema grew them) has them null.
 *
 * @module
 */

import { type Data, Field, Int64, makeData, RecordBatch, Schema, Struct } from "apache-arrow";
import type { RecordBatch as LogRecordBatch } from "../log/mod.ts";
import type { Column, RowSchema } from "../schema/row_schema.ts";
import { type Acc, columnData, grow, Kind, KINDS, putInt64 } from "./_column_data.ts";
import { skipNested } from "./_nested_scan.ts";
import { makeNestedAcc } from "./_nested_acc.ts";
import { toArrowValue, typedArrow } from "./nested_type.ts";
import { encodeTexts, type RowBytes } from "./_row_bytes.ts";
import { scanEnd, scanNumber } from "./number_scanner.ts";
import { rowSchemaOf, toArrow } from "./schema.ts";

/**
 * The name of the offset column, first in every exported file and Arrow frame.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowRowBuilder, OFFSET_COLUMN } from "./row_builder.ts";
 * const builder = new ArrowRowBuilder({
 *   type: "object",
 *   properties: { px: { type: "number" } },
 *   required: ["px"],
 * });
 * equal(builder.schema.fields[0].name, OFFSET_COLUMN);
 * ```
 */
export const OFFSET_COLUMN = "offset";

/**
 * Options of {@linkcode ArrowRowBuilder} and {@linkcode ArrowFrameEncoder}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowFrameEncoder } from "./frame_encoder.ts";
 * import type { ArrowRowOptions } from "./row_builder.ts";
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
 * import { ArrowRowBuilder, type RecordSlice } from "./row_builder.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
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
 * await Deno.remove(dir, { recursive: true });
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

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const utf8 = new TextEncoder();
const textDecoder = new TextDecoder();
const JSON_INTEGER = /^-?(?:0|[1-9][0-9]*)$/;

function where(offset: number | null, column: string): string {
  return `${offset === null ? "row" : `offset ${offset}`}: column ${JSON.stringify(column)}`;
}

function describeValue(v: unknown): string {
  if (v === undefined) return "nothing (the key is missing)";
  const text = typeof v === "bigint" ? String(v) : JSON.stringify(v);
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
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
 * import { ArrowRowBuilder } from "./row_builder.ts";
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
  /** `[c]`: whether every column from `c` on is nullable (a row may lack them). */
  readonly #tailNullable: boolean[];
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
    this.#tailNullable = rs.columns.map((_, i) => rs.columns.slice(i).every((c) => c.nullable));
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

  #accs(n: number, bytes: number, offsetAt: (i: number) => number | null): Acc[] {
    return this.columns.map((c, i): Acc => {
      const typed = c.schema === undefined ? null : typedArrow(c.schema);
      const kind = typed !== null ? Kind.Nested : KINDS[c.type];
      const text = kind === Kind.String || kind === Kind.Json;
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
        offs: text ? new Int32Array(n + 1) : null,
        str: new Uint8Array(text ? Math.min(bytes, 1 << 16) + 64 : 0),
        strAt: 0,
        ...(kind === Kind.Json ? { open: c.type === "object" ? 123 : 91 } : {}),
        ...(typed !== null
          ? {
            nested: {
              type: typed.type,
              acc: makeNestedAcc(typed.type, c.nullable),
              at: (r: number) => where(offsetAt(r), c.name),
            },
          }
          : {}),
      };
    });
  }

  #build(rows: RowBytes): RecordBatch {
    const { n, buf, starts, ends } = rows;
    let total = 0;
    for (let i = 0; i < n; i++) total += ends[i] - starts[i];
    const accs = this.#accs(n, total, rows.offsetAt);
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
        if (!ok) {
          // Written before the schema grew: the row ends where columns were added.
          if (buf[p] === 125 && p === end - 1 && this.#tailNullable[c]) {
            ok = true;
            for (let d = c; d < cols; d++) {
              const t = accs[d];
              if (t.offs) t.offs[r + 1] = t.strAt;
              if (t.nested) t.nested.acc.push(null);
            }
          }
          break;
        }
        p += key.length;
        const b = buf[p];
        if (b === 110) { // null
          if (!a.nullable || buf[p + 1] !== 117 || buf[p + 2] !== 108 || buf[p + 3] !== 108) {
            ok = false;
            break;
          }
          p += 4;
          if (a.offs) a.offs[r + 1] = a.strAt;
          if (a.nested) a.nested.acc.push(null);
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
          case Kind.Json: {
            const q = b === a.open ? skipNested(buf, p, end) : -1;
            if (q < 0) {
              ok = false;
              break;
            }
            if (a.strAt + (q - p) > a.str.length) grow(a, q - p);
            a.str.set(buf.subarray(p, q), a.strAt);
            a.strAt += q - p;
            a.offs![r + 1] = a.strAt;
            p = q;
            break;
          }
          case Kind.Nested: {
            // Written as it is read; what a row that does not scan after all
            // leaves is dropped by #exactRow.
            const q = a.nested!.acc.scan(buf, p, end, true);
            if (q < 0) {
              ok = false;
              break;
            }
            p = q;
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
    let lastPresent = -1;
    for (let c = 0; c < accs.length; c++) if (Object.hasOwn(fields, accs[c].name)) lastPresent = c;
    for (let c = 0; c < accs.length; c++) {
      const a = accs[c];
      if (a.offs) a.strAt = a.offs[r]; // drop what the scan wrote for this row
      a.nested?.acc.truncate(r);
      let v = Object.hasOwn(fields, a.name) ? fields[a.name] : undefined;
      // A nullable column added after the row was written: null.
      if (v === undefined && c > lastPresent && this.#tailNullable[c]) v = null;
      const bit = 1 << (r & 7);
      if (v === null) {
        if (!a.nullable) throw new TypeError(`${where(offset, a.name)} is null but not nullable`);
        a.valid![r >> 3] &= ~bit;
        if (a.offs) a.offs[r + 1] = a.strAt;
        if (a.nested) a.nested.acc.push(null);
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
        case Kind.Nested:
          if (!a.nested!.acc.push(v)) toArrowValue(a.nested!.type, v, a.nested!.at(r)); // throws
          break;
        case Kind.Json:
        case Kind.String: {
          let s: string;
          if (a.kind === Kind.Json) {
            const isArray = Array.isArray(v);
            if (typeof v !== "object" || isArray !== (a.open === 91)) {
              bad(a.open === 91 ? "an array" : "an object");
            }
            s = JSON.stringify(v); // the value as stored, when the row is as stored
          } else {
            if (typeof v !== "string") bad("a string");
            s = v as string;
          }
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

  // Parses JSON text with every int64 column's integer as a BigInt of its
  // digits. Only the row's own members: a nested value's member of the same
  // name stays a number (the reviver sees every depth, so the digits are
  // noted per holder and applied to the row's members after).
  #parseExact(text: string): unknown {
    const names = this.#int64Names;
    if (names.size === 0) return JSON.parse(text);
    const sources = new Map<object, Map<string, string>>();
    const row = JSON.parse(text, function (key, value, context?: { source?: string }) {
      if (typeof value === "number" && names.has(key)) {
        let m = sources.get(this);
        if (m === undefined) sources.set(this, m = new Map());
        m.set(key, context?.source ?? "");
      }
      return value;
    });
    const own = typeof row === "object" && row !== null ? sources.get(row) : undefined;
    if (own === undefined) return row;
    for (const [key, source] of own) {
      const value = row[key] as number;
      if (JSON_INTEGER.test(source)) row[key] = BigInt(source);
      else if (Number.isInteger(value)) row[key] = BigInt(value);
    }
    return row;
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
