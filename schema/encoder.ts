/**
 * The row encoder: one function per schema, generated once when the schema is
 * compiled, that writes a valid row as JSON text with its keys in column order
 * — exactly `JSON.stringify` of the row with its keys in that order. That text
 * is what is stored and sent, so live and replayed frames are byte-identical.
 * Nested values (object and array columns) go through as they are:
 * `JSON.stringify` of the value given, its own key order inside (see
 * `nested.ts`); the generated code does not change for them.
 *
 * @module
 */

import type { Column } from "./row_schema.ts";

/**
 * Generates `encode` for `columns`: `JSON.stringify` of an object literal
 * that copies the row's columns in column order, so the output is a
 * key-ordered JSON.stringify by construction. Names reach the generated code
 * only as JSON.stringify'd literals (valid JS string literals since ES2019,
 * lone surrogates escaped), never raw; `__proto__` is written as a computed
 * key, the one literal key form that defines an own property of that name.
 *
 * Concatenating the JSON text directly (`'{"price":' + r["price"] + …`) was
 * measured too (bench/micro/encoders.ts): it is about as fast on its own when
 * the numbers repeat, slower when they do not (`"" + number` goes through
 * V8's number-string cache, JSON.stringify does not), and it returns a rope
 * that costs more than the whole encode to flatten when the row is written
 * out. The literal copy with its fixed shape stays on V8's fast
 * JSON.stringify path and returns a flat string.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { generateEncoder } from "./encoder.ts";
 * const encode = generateEncoder([
 *   { name: "symbol", type: "string", nullable: false },
 *   { name: "price", type: "double", nullable: false },
 * ]);
 * equal(encode({ price: 1.5, symbol: "BTC-USD" }), '{"symbol":"BTC-USD","price":1.5}');
 * ```
 */
export function generateEncoder(
  columns: readonly Column[],
): (row: Record<string, unknown>) => string {
  const fields = columns.map(({ name }) => {
    const key = JSON.stringify(name);
    return `${name === "__proto__" ? `[${key}]` : key}: r[${key}]`;
  });
  const body = `"use strict";\nreturn function encode(r) {\n  return stringify({ ${
    fields.join(", ")
  } });\n};`;
  return new Function("stringify", body)(JSON.stringify);
}
