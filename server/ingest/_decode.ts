/**
 * Decoding input bytes as UTF-8, fast for valid text. Private to the ingest
 * modules.
 *
 * @module
 */

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Decodes with U+FFFD for bad bytes: for showing input that is not UTF-8.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { lossyUtf8 } from "./_decode.ts";
 * equal(lossyUtf8.decode(new Uint8Array([0x61, 0xff])), "a\uFFFD");
 * ```
 */
export const lossyUtf8: TextDecoder = new TextDecoder("utf-8");

/**
 * `bytes` as text, or undefined if they are not valid UTF-8. The lossy decoder
 * is ~4× faster than a fatal one here; only text holding U+FFFD (bad input, or
 * a genuine U+FFFD) pays for the strict check.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { decodeLine } from "./_decode.ts";
 * equal(decodeLine(new Uint8Array([0x68, 0x69])), "hi");
 * equal(decodeLine(new Uint8Array([0xff])), undefined); // not UTF-8
 * ```
 */
export function decodeLine(bytes: Uint8Array): string | undefined {
  const text = lossyUtf8.decode(bytes);
  if (!text.includes("\uFFFD")) return text;
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}
