// The decoding of compressed frames (compress=zstd, DESIGN §16): a binary
// message is one zstd frame, content checksum on, of a batched frame's text.
// Private to client/. Browser-safe at module load: the decoder (node:zlib's
// zstd) is imported only when a subscription asks for it, and where there is
// none (a browser) loadZstd() answers null.

import { ProtocolError } from "./errors.ts";
import { CloseCode } from "./wire.ts";

/**
 * Decompresses one zstd frame (throws on corrupt data, and once the output
 * would pass `maxBytes`).
 */
export type ZstdDecompress = (bytes: Uint8Array, maxBytes: number) => Uint8Array;

/**
 * The most a compressed frame may decompress to (64 MiB). A frame whose
 * header declares more, or whose blocks could hold more, is refused before
 * anything is decompressed (a decompression bomb is never allocated).
 */
export const MAX_ZSTD_FRAME_TEXT = 64 * 1024 * 1024;

/** zstd's largest block content (128 KiB): what one compressed block can decode to. */
const MAX_BLOCK = 128 * 1024;

let loaded: Promise<ZstdDecompress | null> | null = null;

/** node:zlib's zstd decoder where the runtime has one (Deno, Node ≥ 22.15), else null. */
export function loadZstd(): Promise<ZstdDecompress | null> {
  return loaded ??= (async () => {
    // Browsers have neither global; importing node:zlib without them fails
    // outside the reach of a catch (Deno's node:process needs `Deno`).
    const g = globalThis as { Deno?: unknown; process?: unknown };
    if (g.Deno === undefined && g.process === undefined) return null;
    // A specifier the bundler cannot see: the browser bundle must not pull node:zlib in.
    const spec = "node:zlib";
    try {
      const zlib = await import(spec);
      const f = zlib.zstdDecompressSync;
      // maxOutputLength: the decoder stops (throws) past the bound it is
      // given, so a frame lying about its size allocates no more than that.
      return typeof f === "function"
        ? (b: Uint8Array, max: number) => f(b, { maxOutputLength: max }) as Uint8Array
        : null;
    } catch {
      return null; // No node:zlib here (a browser).
    }
  })();
}

/** Whether `err` is a server's 4400 refusal of the `compress` parameter (it does not know it). */
export function isCompressRefusal(err: unknown): boolean {
  return err instanceof ProtocolError && err.code === CloseCode.Protocol &&
    /compress/.test(err.detail);
}

const MAGIC = 0xfd2fb528;

// Walks a zstd frame's header and block headers: throws unless `b` is
// exactly one whole frame with a content checksum. The decoder then checks
// the checksum. (Deno 2.9's zstdDecompressSync returns what it could decode
// of a truncated frame without an error, and ignores bytes after the first
// frame: neither may pass for a frame.) Returns the declared content size,
// or -1 when the header does not give one, and the most the blocks can
// decode to (raw and RLE blocks say their size; a compressed block is at
// most 128 KiB).
function checkFrame(b: Uint8Array): { size: number; bound: number } {
  const n = b.length;
  if (n < 6) throw new Error(`${n} bytes is too short for a zstd frame`);
  const magic = (b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24) >>> 0;
  if (magic !== MAGIC) throw new Error(`not a zstd frame (magic 0x${magic.toString(16)})`);
  const fhd = b[4];
  const fcsFlag = fhd >> 6;
  const single = (fhd >> 5) & 1;
  const checksum = (fhd >> 2) & 1;
  const dictFlag = fhd & 3;
  if (!checksum) throw new Error("the zstd frame has no content checksum");
  if (dictFlag !== 0) throw new Error("the zstd frame needs a dictionary");
  let p = 5 + (single ? 0 : 1);
  const fcsBytes = [single ? 1 : 0, 2, 4, 8][fcsFlag];
  let size = -1;
  if (fcsBytes > 0) {
    if (p + fcsBytes > n) throw new Error("the zstd frame is truncated in its header");
    size = 0;
    for (let k = fcsBytes - 1; k >= 0; k--) size = size * 256 + b[p + k];
    if (fcsBytes === 2) size += 256;
  }
  p += fcsBytes;
  if (size > MAX_ZSTD_FRAME_TEXT) {
    throw new Error(
      `the zstd frame declares ${size} bytes of content, over the limit of ${MAX_ZSTD_FRAME_TEXT}`,
    );
  }
  let bound = 0;
  for (;;) {
    if (p + 3 > n) throw new Error(`the zstd frame is truncated at byte ${p} of ${n}`);
    const h = b[p] | b[p + 1] << 8 | b[p + 2] << 16;
    const last = h & 1;
    const type = (h >> 1) & 3;
    if (type === 3) throw new Error(`the zstd frame has a reserved block type at byte ${p}`);
    bound += type === 2 ? MAX_BLOCK : h >> 3;
    if (bound > MAX_ZSTD_FRAME_TEXT) {
      throw new Error(
        `the zstd frame's blocks may decode to more than the limit of ${MAX_ZSTD_FRAME_TEXT} bytes`,
      );
    }
    p += 3 + (type === 1 ? 1 : h >> 3);
    if (last) break;
  }
  if (p + 4 !== n) {
    throw new Error(
      p + 4 > n
        ? `the zstd frame is truncated: ${n} bytes of ${p + 4}`
        : `${n - p - 4} bytes follow the zstd frame`,
    );
  }
  return { size, bound };
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The text of a compressed frame; throws an `Error` saying what is wrong
 * with it (not one whole zstd frame, checksum mismatch, size, UTF-8).
 */
export function decodeZstdFrame(bytes: Uint8Array, decompress: ZstdDecompress): string {
  const { size, bound } = checkFrame(bytes);
  let out: Uint8Array;
  try {
    // One byte past the declared size lets a frame that decodes to more be told apart.
    out = decompress(bytes, Math.max(1, size >= 0 ? Math.min(size + 1, bound) : bound));
  } catch (err) {
    throw new Error(`zstd: ${err instanceof Error ? err.message : err}`);
  }
  if (size >= 0 && out.length !== size) {
    throw new Error(`the zstd frame decompressed to ${out.length} bytes, its header says ${size}`);
  }
  return utf8.decode(out);
}
