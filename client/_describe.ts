/**
 * How option checks name the value they saw: its type, and the value itself
 * when it is short and not an object.
 *
 * @module
 */

/**
 * A short description of `v` for an error message.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { describe } from "./_describe.ts";
 * const seen = [5, "x", null, [1]].map(describe);
 * deepStrictEqual(seen, ["number 5", 'string "x"', "null", "an array"]);
 * ```
 */
export function describe(v: unknown): string {
  if (v === null) return "null";
  if (v === undefined) return "undefined";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") {
    return `string ${JSON.stringify(v.length > 60 ? v.slice(0, 60) + "…" : v)}`;
  }
  if (typeof v === "function") return "a function";
  if (typeof v === "object") {
    const name = (v as { constructor?: { name?: string } }).constructor?.name;
    return name && name !== "Object" ? `an object (${name})` : "an object";
  }
  return `${typeof v} ${String(v)}`;
}
