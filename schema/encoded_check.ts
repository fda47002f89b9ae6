/**
 * The encoded-form check: one function per schema, generated once, that tells
 * whether a JSON text is already exactly what the encoder writes for a valid
 * row — its columns in column order, no whitespace, every value in the form
 * `JSON.stringify` gives it and of the column's type. Such a text may be
 * stored as it is: parsing, validating and encoding it again would give back
 * the same text. Ingest of rows that a program printed with `JSON.stringify`
 * (the usual case) skips those three steps.
 *
 * The check is conservative: `false` says nothing about the text (it may
 * still be a valid row, in another spelling) and sends it the full way; it is
 * `true` only for texts it proves. A number is proved only in a form whose
 * `JSON.stringify` spelling is sure: an integer of up to 16 digits not
 * starting with 9 (up to 9 for int32), no leading zero and no `-0`, which is
 * always a safe integer (an int32); a decimal of at most 15 digits, no
 * exponent, no trailing zero in the fraction, and at least 1e-6 in
 * magnitude. A decimal of at most 15 significant digits is the only such
 * decimal that its nearest double turns back into, so `JSON.stringify`
 * (the shortest decimal that round-trips, in fixed notation from 1e-6 to
 * 1e21) writes exactly those digits. A string
 * is proved when it holds no backslash, control character or surrogate.
 * A schema whose columns carry anything beyond a type and a number format
 * (string formats, bounds, patterns, enums, nested values) gets a check that
 * always answers `false`.
 *
 * @module
 */

import type { Column } from "./row_schema.ts";

// Keys of a column's derived schema that do not constrain its values.
const PLAIN_KEYS = new Set(["type", "format", "description", "title", "examples"]);

// An integer as JSON.stringify spells it: int32 up to 9 digits (all within
// its range), a safe integer up to 16 digits not starting with 9 (all below
// 2^53). Longer ones are left to the full way: the patterns stay small and
// never backtrack far.
const INT32 = "(?:0|-?[1-9]\\d{0,8})(?!\\d)";
const SAFE = "(?!-?9\\d{15})(?:0|-?[1-9]\\d{0,15})(?!\\d)";
// A decimal of at most 15 digits (counting a leading "0."), no exponent, no
// trailing zero in the fraction, at least 1e-6: what comes next is "," or "}".
const DECIMAL = "-?(?=[\\d.]{3,16}[,}])(?:0\\.(?!0{6})|[1-9]\\d*\\.)\\d*[1-9]";
const NUMBER = `(?:${DECIMAL}|${SAFE})`;
const STRING = '"[^"\\\\\\u0000-\\u001f\\ud800-\\udfff]*"';
const BOOLEAN = "(?:true|false)";

// Text to match literally, every character but a letter or digit escaped.
function literal(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    out += /[A-Za-z0-9_]/.test(text[i]) ? text[i] : `\\u${c.toString(16).padStart(4, "0")}`;
  }
  return out;
}

function never(_text: string): boolean {
  return false;
}

/**
 * Generates `isEncoded` for `columns`, given each column's derived schema
 * (`[name, schema]` in column order, as the validator gets them): one
 * anchored regular expression, built once, of each column's key (as
 * JSON.stringify writes it, every character but letters and digits escaped)
 * and a pattern for its values, in column order. A regular expression is
 * matched by compiled code and allocates nothing per text; on the benchmark's
 * trade row it was measured at about twice the speed of a hand-written
 * scanner and three times that of `JSON.parse` alone. Patterns with exact
 * range bounds (every int32, every safe integer) were measured too: their
 * alternations made the check twice as slow, for values rarely seen.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { generateEncodedCheck } from "./encoded_check.ts";
 * const isEncoded = generateEncodedCheck(
 *   [
 *     { name: "symbol", type: "string", nullable: false },
 *     { name: "price", type: "double", nullable: false },
 *   ],
 *   [["symbol", { type: "string" }], ["price", { type: "number" }]],
 * );
 * equal(isEncoded('{"symbol":"BTC-USD","price":1.5}'), true);
 * equal(isEncoded('{"price":1.5,"symbol":"BTC-USD"}'), false); // valid, but not in column order
 * equal(isEncoded('{"symbol":"BTC-USD","price":1.50}'), false); // valid, but spelled otherwise
 * ```
 */
export function generateEncodedCheck(
  columns: readonly Column[],
  derived: readonly (readonly [string, Record<string, unknown>])[],
): (text: string) => boolean {
  if (columns.length === 0 || derived.length !== columns.length) return never;
  let pattern = "^";
  for (let k = 0; k < columns.length; k++) {
    const { name, type, nullable } = columns[k];
    const [dname, schema] = derived[k];
    if (dname !== name || Object.keys(schema).some((key) => !PLAIN_KEYS.has(key))) return never;
    let value: string;
    switch (type) {
      case "boolean":
        value = BOOLEAN;
        break;
      case "int32":
        value = INT32;
        break;
      case "int64":
        value = SAFE;
        break;
      case "float": // every decimal of this form is within the float range
      case "double":
        value = NUMBER;
        break;
      case "string":
        if (schema.format !== undefined) return never;
        value = STRING;
        break;
      default:
        return never;
    }
    pattern += literal((k === 0 ? "{" : ",") + JSON.stringify(name) + ":") +
      (nullable ? `(?:null|${value})` : value);
  }
  const re = new RegExp(pattern + "\\}$");
  return function isEncoded(text: string): boolean {
    return re.test(text);
  };
}
