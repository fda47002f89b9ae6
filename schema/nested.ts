/**
 * Nested columns (`"type": "object"` or `"type": "array"`): the schema ajv
 * compiles for one, and the check that a value is plain JSON.
 *
 * A nested value is stored as `JSON.stringify` of the value the producer
 * gave (its own key order inside; JavaScript lists integer-like keys first,
 * as `JSON.parse` made them). So that the stored text is exactly what was
 * validated, a nested value must be plain JSON all the way down: plain
 * objects and arrays (no holes), strings, booleans, `null`, finite numbers —
 * nothing `JSON.stringify` would drop, change or throw on — at most
 * {@linkcode MAX_ROW_DEPTH} levels deep.
 *
 * @module
 */

import { isObject, pointerEscape } from "./_json.ts";
import { MAX_ROW_DEPTH } from "./rules.ts";

/** The keywords whose value is one sub-schema. */
const ONE_SCHEMA = new Set([
  "items",
  "additionalItems",
  "additionalProperties",
  "contains",
  "propertyNames",
  "not",
  "if",
  "then",
  "else",
]);
/** The keywords whose value maps names to sub-schemas. */
const SCHEMA_MAP = new Set(["properties", "patternProperties", "dependencies", "definitions"]);
/** The keywords whose value is a list of sub-schemas (`items` too, as a tuple). */
const SCHEMA_LIST = new Set(["items", "allOf", "anyOf", "oneOf"]);

/**
 * The schema ajv compiles for a nested column: a copy of `schema` in which
 * every `integer` without a `format`, at any depth, says `format: "int64"`
 * (a safe integer, which every JSON reader keeps exact, as for an integer
 * column).
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { deriveNested } from "./nested.ts";
 * deepEqual(
 *   deriveNested({ type: "array", items: { type: "integer" } }),
 *   { type: "array", items: { type: "integer", format: "int64" } },
 * );
 * ```
 */
export function deriveNested(schema: unknown): Record<string, unknown> {
  return derive(schema) as Record<string, unknown>;
}

function derive(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    let v = value;
    if (SCHEMA_LIST.has(key) && Array.isArray(value)) v = value.map(derive);
    else if (ONE_SCHEMA.has(key)) v = derive(value);
    else if (SCHEMA_MAP.has(key) && isObject(value)) {
      const map: Record<string, unknown> = {};
      for (const [name, sub] of Object.entries(value)) {
        Object.defineProperty(map, name, {
          value: derive(sub),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      v = map;
    }
    Object.defineProperty(out, key, {
      value: v,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  const types = Array.isArray(out.type) ? out.type : [out.type];
  if (types.includes("integer") && out.format === undefined) out.format = "int64";
  return out;
}

/**
 * Checks that a nested column's value is plain JSON (see the module doc);
 * `null` when it is, else one line naming the place (a JSON Pointer from
 * `at`) and what was there.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { checkNestedValue } from "./nested.ts";
 * equal(checkNestedValue({ a: [1, "x", null] }, "/o"), null);
 * equal(checkNestedValue({ a: [1, NaN] }, "/o"), "/o/a/1: must be a JSON value, got NaN");
 * equal(checkNestedValue(new Date(0), "/o"), "/o: must be a plain JSON object, got Date");
 * ```
 */
export function checkNestedValue(value: unknown, at: string): string | null {
  const problem = walk(value, 0);
  if (problem === null) return null;
  // The place is spelt out only for a refusal: a valid value costs no strings.
  return `${at}${problem.path.reverse().map((k) => `/${k}`).join("")}: ${problem.why}`;
}

interface Problem {
  /** Pointer tokens, innermost first. */
  path: string[];
  why: string;
}

function walk(value: unknown, depth: number): Problem | null {
  switch (typeof value) {
    case "string":
    case "boolean":
      return null;
    case "number":
      return Number.isFinite(value)
        ? null
        : { path: [], why: `must be a JSON value, got ${value}` };
    case "object": {
      if (value === null) return null;
      if (depth >= MAX_ROW_DEPTH) {
        return { path: [], why: `nests deeper than ${MAX_ROW_DEPTH} levels` };
      }
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          if (!(i in value)) return { path: [String(i)], why: "must be a JSON value, got a hole" };
          const problem = walk(value[i], depth + 1);
          if (problem !== null) {
            problem.path.push(String(i));
            return problem;
          }
        }
        return null;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        return {
          path: [],
          why: `must be a plain JSON object, got ${
            (value as object).constructor?.name ?? "an object"
          }`,
        };
      }
      for (const key in value) {
        if (!Object.hasOwn(value, key)) continue;
        const problem = walk((value as Record<string, unknown>)[key], depth + 1);
        if (problem !== null) {
          problem.path.push(pointerEscape(key));
          return problem;
        }
      }
      return null;
    }
    default:
      return { path: [], why: `must be a JSON value, got ${typeof value}` };
  }
}
