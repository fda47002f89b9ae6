/**
 * A schema's inert form: the schema without what changes neither its
 * columns nor the rows it accepts — the annotations `title`, `description`,
 * `$comment` and `examples` of every (sub)schema, and the order of every
 * `required` list (a set in JSON Schema). Two schemas with the same inert
 * form are the same schema to a stream: a definition given again with
 * another description or another order of `required` changes nothing.
 *
 * The walk knows where JSON Schema puts schemas (under `properties`,
 * `items`, `allOf`, …), so a column named `description` is never taken for
 * the annotation; values (`enum`, `const`, `default`) are left as they are.
 *
 * @module
 */

/** The annotations left out of the inert form. */
export const INERT_KEYWORDS: ReadonlySet<string> = new Set([
  "title",
  "description",
  "$comment",
  "examples",
]);

// Keywords whose value is one schema (or, for items, an array of schemas).
const ONE_SCHEMA = new Set([
  "additionalProperties",
  "items",
  "additionalItems",
  "contains",
  "not",
  "if",
  "then",
  "else",
  "propertyNames",
  "unevaluatedItems",
  "unevaluatedProperties",
]);
// Keywords whose value is an array of schemas.
const SCHEMA_LIST = new Set(["allOf", "anyOf", "oneOf", "prefixItems"]);
// Keywords whose value maps names to schemas (`dependencies` may also map a name to a list of names).
const SCHEMA_MAP = new Set([
  "properties",
  "patternProperties",
  "definitions",
  "$defs",
  "dependentSchemas",
  "dependencies",
]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * `schema`'s inert form (a new value; `schema` is not changed).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { inertForm } from "./inert_form.ts";
 * const a = {
 *   type: "object",
 *   description: "trades",
 *   properties: { description: { type: "string", title: "what" }, px: { type: "number" } },
 *   required: ["px", "description"],
 * };
 * deepStrictEqual(inertForm(a), {
 *   type: "object",
 *   properties: { description: { type: "string" }, px: { type: "number" } },
 *   required: ["description", "px"],
 * });
 * ```
 */
export function inertForm(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (INERT_KEYWORDS.has(k)) continue;
    if (k === "required" && Array.isArray(v) && v.every((n) => typeof n === "string")) {
      out[k] = [...v].sort();
    } else if (ONE_SCHEMA.has(k)) {
      out[k] = Array.isArray(v) ? v.map(inertForm) : inertForm(v);
    } else if (SCHEMA_LIST.has(k) && Array.isArray(v)) {
      out[k] = v.map(inertForm);
    } else if (SCHEMA_MAP.has(k) && isObject(v)) {
      const map: Record<string, unknown> = {};
      for (const [name, sub] of Object.entries(v)) map[name] = inertForm(sub);
      out[k] = map;
    } else {
      out[k] = v;
    }
  }
  return out;
}
