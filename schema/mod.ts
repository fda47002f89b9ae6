/**
 * A stream's JSON Schema, compiled: the columns it declares, the validator
 * that refuses a row with the reason, and the encoder that writes a row's
 * JSON in the schema's order.
 *
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { compileSchema } from "./mod.ts";
 * const trades = compileSchema({
 *   type: "object",
 *   properties: { price: { type: "number" }, side: { type: "integer", format: "int32" } },
 *   required: ["price", "side"],
 * });
 * deepStrictEqual(trades.columns.map((c) => c.name), ["price", "side"]);
 * equal(trades.validate({ price: "1", side: 1 }), "/price: must be number");
 * ```
 *
 * @module
 */

export { compileSchema } from "./compile.ts";
export type { Column, ColumnType, RowSchema } from "./row_schema.ts";
export { SchemaError } from "./schema_error.ts";
