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
 * `JSON.stringify` spelling is sure: a safe integer (int32 within its
 * range), no leading zero and no `-0`; a decimal of at most 15 digits, no
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

import { INT32_MAX } from "./rules.ts";
import type { Column } from "./row_schema.ts";

// Keys of a column's derived schema that do not constrain its values.
const PLAIN_KEYS = new Set(["type", "format", "description", "title", "examples"]);

/**
 * A pattern for the decimal spellings of the integers 1 to `max` (no sign, no
 * leading zero): fewer digits than `max`; or, when the digits that follow
 * are as many, not above it, digit by digit. The lookaheads keep a failed
 * match from trying every shorter length again.
 */
function upTo(max: bigint): string {
  const d = max.toString();
  const full: string[] = [];
  for (let p = 0; p < d.length; p++) {
    const digit = Number(d[p]);
    const low = p === 0 ? 1 : 0;
    if (digit - 1 < low) continue;
    const range = digit - 1 === low ? `${low}` : `[${low}-${digit - 1}]`;
    const rest = d.length - p - 1;
    full.push(d.slice(0, p) + range + (rest > 0 ? `\\d{${rest}}` : ""));
  }
  full.push(d);
  const shorter = d.length > 1 ? `[1-9]\\d{0,${d.length - 2}}(?!\\d)|` : "";
  return `(?:${shorter}(?=\\d{${d.length}}(?!\\d))(?:${full.join("|")}))`;
}

// An integer in [-(max + 1), max] (int32) or [-max, max] (safe), as JSON.stringify spells it.
function integer(max: bigint, minIsMaxPlusOne: boolean): string {
  const low = minIsMaxPlusOne ? max + 1n : max;
  return `(?:0(?!\\d)|${upTo(max)}|-${upTo(low)})`;
}

const INT32 = integer(BigInt(INT32_MAX), true);
const SAFE = integer(BigInt(Number.MAX_SAFE_INTEGER), false);
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
 * matched by compiled code and allocates nothing per text; it was measured
 * about twice as fast as a hand-written scanner and about ten times faster
 * than `JSON.parse` of the same row.
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
