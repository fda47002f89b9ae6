/**
 * Which columns of a schema may name a row's key (a keyed stream's `--key`,
 * a created stream's `key`): each a column of the schema, not nullable, and
 * a string, an integer or a boolean; none twice; at least one. One rule for
 * the server's start, its admin routes and the keyed stream itself.
 *
 * @module
 */

import type { Column, RowSchema } from "./row_schema.ts";

/** The column types a key column may have. */
const KEY_TYPES: ReadonlySet<string> = new Set(["string", "int32", "int64", "boolean"]);

/**
 * The columns of `schema` that `names` name, in that order, checked as key
 * columns: `RangeError` naming the first column that may not be one.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, throws } from "node:assert/strict";
 * import { compileSchema } from "./compile.ts";
 * import { keyColumnsOf } from "./key_check.ts";
 * const schema = compileSchema({
 *   type: "object",
 *   properties: { sym: { type: "string" }, px: { type: "number" } },
 *   required: ["sym", "px"],
 * });
 * deepStrictEqual(keyColumnsOf(schema, ["sym"]).map((c) => c.name), ["sym"]);
 * throws(() => keyColumnsOf(schema, ["px"]), /key column "px" is double/);
 * ```
 */
export function keyColumnsOf(schema: RowSchema, names: readonly string[]): Column[] {
  if (names.length === 0) throw new RangeError("a key needs at least one column");
  const columns: Column[] = [];
  for (const name of names) {
    const c = schema.columns.find((c) => c.name === name);
    if (c === undefined) {
      const known = schema.columns.map((c) => c.name).join(", ");
      throw new RangeError(
        `key column ${JSON.stringify(name)} is not a column (columns: ${known})`,
      );
    }
    if (!KEY_TYPES.has(c.type)) {
      throw new RangeError(
        `key column ${JSON.stringify(name)} is ${c.type}: a key column must be a string, ` +
          "an integer or a boolean",
      );
    }
    if (c.nullable) {
      throw new RangeError(`key column ${JSON.stringify(name)} is nullable: a key needs a value`);
    }
    if (columns.includes(c)) {
      throw new RangeError(`key column ${JSON.stringify(name)} is given twice`);
    }
    columns.push(c);
  }
  return columns;
}
