/**
 * Schema evolution: which new schema a log that holds rows may take. Only
 * one change is allowed — nullable columns added after the last one — so
 * every stored row stays valid as it is (it lacks the new keys, which read
 * as null) and no row is ever rewritten. Changing the annotations (title,
 * description, constraints of a scalar column) is no change of columns.
 *
 * @module
 */

import type { Column, RowSchema } from "./row_schema.ts";

/**
 * What a new schema does to a log's columns: `same` columns, columns
 * `added` at the end (all nullable), or a `refused` change described in one
 * line naming the column (e.g. `column "px" changes type from double to string`).
 */
export type SchemaChange =
  | { kind: "same" }
  | { kind: "added"; columns: string[] }
  | { kind: "refused"; detail: string };

function typeName(c: Column): string {
  return c.nullable ? `${c.type} or null` : c.type;
}

/** A nested column's sub-schema without the annotations of its top. */
function shape(c: Column): string {
  if (c.schema === undefined) return "";
  const { title: _t, description: _d, examples: _e, ...rest } = c.schema;
  return JSON.stringify(rest);
}

/**
 * Compares the columns of `after` with those of `before` (the schema the
 * log's latest rows were written with).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { compileSchema } from "./compile.ts";
 * import { schemaChange } from "./evolution.ts";
 * const v1 = compileSchema({ type: "object", properties: { a: { type: "number" } }, required: ["a"] });
 * const v2 = compileSchema({
 *   type: "object",
 *   properties: { a: { type: "number" }, b: { type: ["string", "null"] } },
 *   required: ["a", "b"],
 * });
 * equal(schemaChange(v1, v2).kind, "added");
 * equal((schemaChange(v2, v1) as { detail: string }).detail, 'column "b" (string or null) is removed');
 * ```
 */
export function schemaChange(before: RowSchema, after: RowSchema): SchemaChange {
  const old = before.columns;
  const now = after.columns;
  const at = new Map(now.map((c, i) => [c.name, i]));
  for (let i = 0; i < old.length; i++) {
    const o = old[i];
    const j = at.get(o.name);
    if (j === undefined) {
      return {
        kind: "refused",
        detail: `column ${JSON.stringify(o.name)} (${typeName(o)}) is removed`,
      };
    }
    if (j !== i) {
      return {
        kind: "refused",
        detail: `column ${JSON.stringify(o.name)} moves from position ${i + 1} to ${j + 1}` +
          (i < now.length ? ` (column ${JSON.stringify(now[i].name)} takes its place)` : ""),
      };
    }
    const n = now[j];
    if (n.type !== o.type) {
      return {
        kind: "refused",
        detail: `column ${JSON.stringify(o.name)} changes type from ${o.type} to ${n.type}`,
      };
    }
    if (n.nullable !== o.nullable) {
      return {
        kind: "refused",
        detail: `column ${JSON.stringify(o.name)} becomes ${
          n.nullable ? "nullable" : "not nullable"
        }`,
      };
    }
    if (shape(n) !== shape(o)) {
      return { kind: "refused", detail: `column ${JSON.stringify(o.name)} changes its sub-schema` };
    }
  }
  const added = now.slice(old.length);
  if (added.length === 0) return { kind: "same" };
  const strict = added.find((c) => !c.nullable);
  if (strict !== undefined) {
    return {
      kind: "refused",
      detail: `column ${JSON.stringify(strict.name)} (${strict.type}) is added but not nullable ` +
        `(older rows have no value for it: declare "type": [${
          JSON.stringify(
            strict.type === "int32" || strict.type === "int64"
              ? "integer"
              : strict.type === "float" || strict.type === "double"
              ? "number"
              : strict.type,
          )
        }, "null"])`,
    };
  }
  return { kind: "added", columns: added.map((c) => c.name) };
}
