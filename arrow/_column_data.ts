/**
 * The columns of a record batch while the row builder fills them: typed
 * arrays per kind, validity bits, string bytes, and turning them into Arrow
 * data at the end.
 *
 * @module
 */

import {
  Bool,
  type Data,
  type DataType,
  Float32,
  Float64,
  Int32,
  Int64,
  makeData,
  Utf8,
} from "apache-arrow";
import type { ColumnType } from "../schema/row_schema.ts";
import type { NestedAcc } from "./_nested_acc.ts";

const TWO_32 = 4294967296;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * How a column is stored while it is filled.
 */
export enum Kind {
  Bool,
  Int32,
  Int64,
  Float,
  Double,
  String,
  /** A nested column as JSON text: the stored bytes of the value, copied. */
  Json,
  /** A nested column as a Struct or List: parsed values, built at the end. */
  Nested,
}

/**
 * The {@linkcode Kind} of each column type.
 */
export const KINDS: Record<ColumnType, Kind> = {
  boolean: Kind.Bool,
  int32: Kind.Int32,
  int64: Kind.Int64,
  float: Kind.Float,
  double: Kind.Double,
  string: Kind.String,
  object: Kind.Json,
  array: Kind.Json,
};

/**
 * One column being filled: values, validity, and for strings the UTF-8 bytes.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { type Acc, columnData, Kind } from "./_column_data.ts";
 * const a: Acc = {
 *   name: "n", kind: Kind.Int32, nullable: false, key: new Uint8Array(0),
 *   valid: null, bits: null, i32: new Int32Array([7]), i64: null, f32: null, f64: null,
 *   offs: null, str: new Uint8Array(0), strAt: 0,
 * };
 * equal(columnData(a, 1).values[0], 7);
 * ```
 */
export interface Acc {
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
  /** Kind.Json: the byte a value opens with (`{` or `[`). */
  readonly open?: number;
  /**
   * Kind.Nested: the Arrow type, its accumulator (one slot per row), and
   * where row `i` is, for the message when a value does not fit the type.
   */
  readonly nested?: { type: DataType; acc: NestedAcc; at: (i: number) => string };
}

/**
 * Makes room in a string column for `need` more bytes (doubling).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { type Acc, grow, Kind } from "./_column_data.ts";
 * const a: Acc = {
 *   name: "s", kind: Kind.String, nullable: false, key: new Uint8Array(0),
 *   valid: null, bits: null, i32: null, i64: null, f32: null, f64: null,
 *   offs: new Int32Array(2), str: new Uint8Array(4), strAt: 4,
 * };
 * grow(a, 10);
 * equal(a.str.length, 16);
 * ```
 */
export function grow(a: Acc, need: number): void {
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

/**
 * The Arrow data of a filled column of `n` rows.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { type Acc, columnData, Kind } from "./_column_data.ts";
 * const a: Acc = {
 *   name: "b", kind: Kind.Bool, nullable: false, key: new Uint8Array(0),
 *   valid: null, bits: new Uint8Array([0b10]), i32: null, i64: null, f32: null, f64: null,
 *   offs: null, str: new Uint8Array(0), strAt: 0,
 * };
 * equal(columnData(a, 2).length, 2);
 * ```
 */
export function columnData(a: Acc, n: number): Data {
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
    case Kind.Json:
      return makeData({
        type: new Utf8(),
        ...common,
        data: a.str.subarray(0, a.strAt),
        valueOffsets: a.offs!,
      });
    case Kind.Nested:
      return a.nested!.acc.data();
  }
}

/**
 * Sets `values[i]` to the safe integer `v` (`words` is a view of the same buffer).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { putInt64 } from "./_column_data.ts";
 * const values = new BigInt64Array(1);
 * putInt64(values, new Int32Array(values.buffer), 0, -(2 ** 40));
 * equal(values[0], -1099511627776n);
 * ```
 */
export function putInt64(values: BigInt64Array, words: Int32Array, i: number, v: number): void {
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
