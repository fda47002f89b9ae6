/**
 * The length of a string's UTF-8, counted from its UTF-16 code units without
 * encoding it (no copy): a unit below 0x80 is one byte, below 0x800 two, a
 * surrogate pair four, any other unit (a lone surrogate included, which
 * UTF-8 encoders write as U+FFFD) three.
 *
 * @module
 */

/**
 * Bytes of `text` as UTF-8 (what `TextEncoder` would make of it).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { utf8Bytes } from "./utf8_bytes.ts";
 * equal(utf8Bytes("aé€😀"), 1 + 2 + 3 + 4);
 * equal(utf8Bytes("\ud800"), 3); // a lone surrogate: U+FFFD
 * ```
 */
export function utf8Bytes(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 2; // four bytes for the two units
        i++;
      } else n += 2;
    } else n += 2;
  }
  return n;
}
