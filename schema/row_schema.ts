/**
 * What a compiled schema is: its columns and their types, and the
 * {@linkcode RowSchema} that validates and encodes rows.
 *
 * @module
 */

/**
 * The storage type of a column, derived from its JSON Schema `type` and `format`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { ColumnType } from "./row_schema.ts";
 * import { compileSchema } from "./compile.ts";
 * const { columns } = compileSchema({
 *   type: "object",
 *   properties: { n: { type: "integer" } },
 *   required: ["n"],
 * });
 * const type: ColumnType = columns[0].type;
 * equal(type, "int64"); // `"type": "integer"` with no format
 * ```
 */
export type ColumnType =
  | "boolean"
  | "int32"
  | "int64"
  | "float"
  | "double"
  | "string"
  | "object"
  | "array";

/**
 * One column of a stream: a property of the row schema.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import type { Column } from "./row_schema.ts";
 * import { compileSchema } from "./compile.ts";
 * const { columns } = compileSchema({
 *   type: "object",
 *   properties: { side: { type: ["integer", "null"], format: "int32" } },
 *   required: ["side"],
 * });
 * const side: Column = columns[0];
 * deepEqual(side, { name: "side", type: "int32", nullable: true });
 * ```
 */
export interface Column {
  /** The property name, as declared. */
  name: string;
  /** The storage type. */
  type: ColumnType;
  /** Whether the column accepts `null` (declared as `"type": [T, "null"]`). */
  nullable: boolean;
  /**
   * For an `object` or `array` column only: the column's schema as declared
   * (deep-frozen), sub-schemas and all, from which Arrow maps it (a Struct
   * or List when it is closed and typed all the way down, else JSON text).
   */
  schema?: Readonly<Record<string, unknown>>;
}

/**
 * A compiled row schema. `validate` and `encode` do not use `this`, so they
 * may be passed around detached (`const { encode } = schema`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { RowSchema } from "./row_schema.ts";
 * import { compileSchema } from "./compile.ts";
 * const schema: RowSchema = compileSchema({
 *   type: "object",
 *   properties: { symbol: { type: "string" }, price: { type: "number" } },
 *   required: ["symbol", "price"],
 * });
 * const row = { price: 101.5, symbol: "BTC-USD" };
 * equal(schema.validate(row), null);
 * equal(schema.encode(row), '{"symbol":"BTC-USD","price":101.5}');
 * equal(schema.validate({ ...row, extra: 1 }), "must NOT have additional property extra");
 * ```
 */
export interface RowSchema {
  /** The schema as declared (a deep-frozen copy; properties in column order). */
  readonly json: Record<string, unknown>;
  /** The columns, in declared order. */
  readonly columns: readonly Column[];
  /**
   * Checks a row. A column's value is `row[name]`; a key the row does not
   * own is never a column value unless the row's prototype supplies one
   * (plain objects and `JSON.parse` results have no such prototype).
   *
   * @returns `null` if the row is valid, else a one-line message in JSON
   * Schema terms, e.g. `/price: must be number` or
   * `must NOT have additional property surprise`.
   */
  validate(row: unknown): string | null;
  /**
   * Encodes a row that `validate` accepted (anything else gives garbage, not
   * an error: the encoder trusts the validator and does no checks of its own).
   *
   * @returns JSON text with the keys in column order and no whitespace:
   * exactly `JSON.stringify` of the row with its keys in that order.
   */
  encode(row: Record<string, unknown>): string;
  /**
   * Whether `text` is already exactly what `encode` writes for a row that
   * `validate` accepts (columns in order, no whitespace, values spelled as
   * `JSON.stringify` spells them): such a text may be stored as it is. False
   * says nothing: the text may still be a valid row spelled otherwise (see
   * `schema/encoded_check.ts`).
   */
  isEncoded(text: string): boolean;
}
