// The decoding of compressed frames (compress=zstd, docs/SPEC.md §2.6): a binary
// message is one zstd frame, content checksum on, of a batched frame's text.
// Private to client/. Browser-safe at module load: the decoder (node:zlib's
// zstd) is imported only when a subscription asks for it, and where there is
// none (a browser) loadZstd() answers null.

import { ProtocolError } from "./errors.ts";
import { CloseCode } from "../wire/close_reason.ts";
import { checkZstdFrame } from "../common/zstd_frame.ts";

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

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The text of a compressed frame; throws an `Error` saying what is wrong
 * with it (not one whole zstd frame, checksum mismatch, size, UTF-8).
 */
export function decodeZstdFrame(bytes: Uint8Array, decompress: ZstdDecompress): string {
  // Exactly one whole frame with a checksum (common/zstd_frame.ts); the
  // decoder then checks the checksum.
  const { size, bound } = checkZstdFrame(bytes, MAX_ZSTD_FRAME_TEXT);
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
