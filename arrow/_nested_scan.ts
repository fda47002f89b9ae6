/**
 * The row builder's scan of a nested value in a stored row: where an object
 * or array that starts at a byte ends, and the value itself for a Struct or
 * List column.
 *
 * @module
 */

const textDecoder = new TextDecoder();

/**
 * The index just past the JSON object or array that opens at `buf[p]`
 * (`{` or `[`), scanning no further than `end`; -1 when it does not close
 * there. Strings are skipped with their escapes; nothing else is checked
 * (the value is either copied as stored or parsed after).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { skipNested } from "./_nested_scan.ts";
 * const buf = new TextEncoder().encode('{"a":[1,"]"],"b":2}');
 * equal(skipNested(buf, 5, buf.length), 12);
 * ```
 */
export function skipNested(buf: Uint8Array, p: number, end: number): number {
  let depth = 0;
  for (let q = p; q < end; q++) {
    const b = buf[q];
    if (b === 34) { // a string: to its closing quote
      for (q++; q < end; q++) {
        const c = buf[q];
        if (c === 92) q++;
        else if (c === 34) break;
      }
    } else if (b === 123 || b === 91) depth++;
    else if (b === 125 || b === 93) {
      if (--depth === 0) return q + 1;
    }
  }
  return -1;
}

/**
 * The value of a Struct or List column parsed from `buf[p, q)`; `where`
 * names the row and column when it is not JSON.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { parseNested } from "./_nested_scan.ts";
 * const buf = new TextEncoder().encode("[1.5,2]");
 * deepStrictEqual(parseNested(buf, 0, buf.length, "x"), [1.5, 2]);
 * ```
 */
export function parseNested(buf: Uint8Array, p: number, q: number, where: string): unknown {
  try {
    return JSON.parse(textDecoder.decode(buf.subarray(p, q)));
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
    throw new TypeError(`${where} is not valid JSON: ${err.message}`);
  }
}
