/**
 * Compressed frames (`compress=zstd`, with `frames=batch`): each data frame
 * is one binary WebSocket message holding exactly one zstd frame, with zstd's
 * content checksum on, that decompresses to exactly the text of the batched
 * frame it replaces (`[offset,msg]` lines joined with `\n`, no trailing
 * newline). The greeting stays a text frame.
 *
 * Invariants:
 * - a commit's frames are compressed at most once per distinct set of frames
 *   (once for unfiltered subscribers, once per `where=` group that picks a
 *   different set), and the same `Uint8Array` is sent to every subscriber
 *   handed them, whether sent at once or queued for a socket that fell
 *   behind: the compression CPU does not grow with subscribers;
 * - a catching-up subscriber compresses each slice it reads once (its reads
 *   are its own, as plain replay's text is);
 * - the header holds the content size (single segment), so a decoder's
 *   window is the frame's own size;
 * - no dictionary here: Deno 2.9's `node:zlib` ignores the `dictionary`
 *   option of its zstd functions (the bytes come out identical), so these
 *   frames stand alone and any zstd decoder (the `zstd` command too) reads
 *   them as is; `compress=zstd-dict` frames are made by `frame_dictionary.ts`.
 *
 * @module
 */

import { constants, zstdCompressSync, type ZstdOptions } from "node:zlib";

/**
 * zstd level of compressed frames. Level 1 compresses the trade rows of a
 * batched frame as well as level 3 (within 1 %) and costs less per small
 * frame, which is what a live commit usually is.
 */
export const ZSTD_FRAME_LEVEL = 1;

const utf8 = new TextEncoder();
const PARAMS = {
  [constants.ZSTD_c_compressionLevel]: ZSTD_FRAME_LEVEL,
  [constants.ZSTD_c_checksumFlag]: 1,
};

/**
 * One zstd frame (content checksum on) of `text`'s UTF-8.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { zstdFrame } from "./compressed_frames.ts";
 * import { zstdDecompressSync } from "node:zlib";
 * const z = zstdFrame('[1,{"a":1}]\n[2,{"a":2}]');
 * equal(new TextDecoder().decode(zstdDecompressSync(z)), '[1,{"a":1}]\n[2,{"a":2}]');
 * ```
 */
export function zstdFrame(text: string): Uint8Array {
  const bytes = utf8.encode(text);
  // The size given up front goes into the header (single segment): a decoder
  // then needs a window of the frame's size, not zstd's default 2 MiB (a JS
  // decoder allocating that took 1 ms per small frame in Chromium).
  const options = { params: PARAMS, pledgedSrcSize: bytes.length }; // Node's option, not in @types/node here
  const out = zstdCompressSync(bytes, options as ZstdOptions);
  // The result is a view into the compressor's output buffer (16 KiB at least):
  // a small frame is copied out so that a queued one does not hold all of it.
  return out.byteLength * 2 < out.buffer.byteLength
    ? new Uint8Array(out)
    : new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}
