/**
 * The number scanner of the row builder: reads a JSON number straight from
 * UTF-8 bytes when the result is sure to be the double `JSON.parse` gives,
 * and says so otherwise (NaN), so the caller can take the exact path.
 *
 * @module
 */

/** Exact powers of ten (every one up to 1e22 is a double exactly). */
const POW10 = Array.from({ length: 23 }, (_, k) => Number(`1e${k}`));
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

// Where the number scanner stopped (a typed array: two results without allocating,
// and cheaper to write than a module-level binding).
/**
 * Where {@linkcode scanNumber} stopped: `scanEnd[0]` is the position after the
 * number it returned (set only when it returns a number).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { scanEnd, scanNumber } from "./number_scanner.ts";
 * scanNumber(new TextEncoder().encode("12.5,"), 0);
 * equal(scanEnd[0], 4);
 * ```
 */
export const scanEnd: Int32Array = new Int32Array(1);

/**
 * Scans a JSON number at `p`. Returns its value when it is an integer up to
 * 2^53, or has at most 15 digits and no exponent — then mantissa / 10^k is
 * one correctly rounded division of two exact doubles, the same double
 * JSON.parse gives — else NaN (the caller falls back to the exact path).
 * Sets `scanEnd`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { scanNumber } from "./number_scanner.ts";
 * const bytes = new TextEncoder().encode('{"px":-101.25,"big":1e400}');
 * equal(scanNumber(bytes, 6), -101.25);
 * equal(Number.isNaN(scanNumber(bytes, 20)), true); // an exponent: not scanned here
 * ```
 */
export function scanNumber(buf: Uint8Array, p: number): number {
  let neg = false;
  if (buf[p] === 45) {
    neg = true;
    p++;
  }
  let m = 0;
  let digits = 0;
  let b = buf[p];
  if (b === 48 && buf[p + 1] >= 48 && buf[p + 1] <= 57) return NaN; // a leading zero
  while (b >= 48 && b <= 57) {
    m = m * 10 + (b - 48);
    digits++;
    b = buf[++p];
  }
  if (digits === 0) return NaN;
  let k = 0;
  if (b === 46) {
    b = buf[++p];
    while (b >= 48 && b <= 57) {
      m = m * 10 + (b - 48);
      k++;
      b = buf[++p];
    }
    if (k === 0) return NaN;
  }
  // Integers are exact up to 2^53 (every step below the result is exact too);
  // decimals need mantissa and 10^k exact: at most 15 digits.
  if (b === 101 || b === 69 || (k === 0 ? m > MAX_SAFE : digits + k > 15)) return NaN;
  scanEnd[0] = p;
  const v = k === 0 ? m : m / POW10[k];
  return neg ? -v : v;
}
