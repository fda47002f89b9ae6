/**
 * Rows as bytes, the row builder's input: one buffer of UTF-8 JSON text and
 * where each row starts and ends in it.
 *
 * @module
 */

/**
 * Rows as UTF-8 JSON text in one buffer: row `i` is `buf[starts[i], ends[i])`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { encodeTexts, type RowBytes } from "./_row_bytes.ts";
 * const rows: RowBytes = encodeTexts(['{"n":1}'], "\n");
 * equal(rows.ends[0], 7);
 * ```
 */
export interface RowBytes {
  n: number;
  buf: Uint8Array;
  starts: Int32Array;
  ends: Int32Array;
  offsetAt: (i: number) => number | null;
}

const utf8 = new TextEncoder();

function utf8Length(s: string): number {
  let n = 0;
  const len = s.length;
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n++;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < len) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3; // a lone surrogate is written as U+FFFD
    } else n += 3;
  }
  return n;
}

/**
 * The UTF-8 of `texts` joined by `sep`, and where each text starts and ends.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { encodeTexts } from "./_row_bytes.ts";
 * const rows = encodeTexts(['{"s":"é"}', '{"s":"e"}'], "\n");
 * equal(rows.starts[1], 11);
 * equal(rows.ends[1], 20);
 * ```
 */
export function encodeTexts(texts: readonly string[], sep: string): RowBytes & { n: number } {
  const n = texts.length;
  const buf = utf8.encode(texts.join(sep));
  const starts = new Int32Array(n);
  const ends = new Int32Array(n);
  let chars = 0;
  for (let i = 0; i < n; i++) chars += texts[i].length;
  chars += Math.max(0, n - 1) * sep.length;
  // All ASCII (the common case): byte positions are character positions.
  const ascii = buf.length === chars;
  let at = 0;
  for (let i = 0; i < n; i++) {
    starts[i] = at;
    at += ascii ? texts[i].length : utf8Length(texts[i]);
    ends[i] = at;
    at += sep.length;
  }
  return { n, buf, starts, ends, offsetAt: () => null };
}
