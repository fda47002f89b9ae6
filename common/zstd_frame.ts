/**
 * The shape of one zstd frame (RFC 8878 §3.1.1): its header and block
 * headers walked without decompressing anything, to tell that some bytes are
 * exactly one whole frame with a content checksum. Deno 2.9's zstd decoder
 * (node:zlib, one call or a stream) returns what it could decode of a
 * truncated frame without an error — a frame cut just before its checksum
 * decodes to all its content — and ignores bytes after the first frame, so
 * neither may pass for a frame; the decoder then checks the checksum of a
 * frame whose shape is whole. Used on compressed WebSocket frames (the
 * client) and on chunks a mirror adopts (streamed: fed piece by piece).
 *
 * @module
 */

const MAGIC = 0xfd2fb528;

/** zstd's largest block content (128 KiB): what one compressed block can decode to. */
const MAX_BLOCK = 128 * 1024;

/**
 * Walks one zstd frame fed in pieces, in order; {@linkcode ZstdFrameShape.finish}
 * says whether the bytes were exactly one whole frame. Each method throws an
 * `Error` naming what is wrong (the first problem found).
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { zstdCompressSync, constants } from "node:zlib";
 * import { ZstdFrameShape } from "./zstd_frame.ts";
 * const frame = zstdCompressSync(new TextEncoder().encode("hello\n"), {
 *   params: { [constants.ZSTD_c_checksumFlag]: 1 },
 * });
 * const whole = new ZstdFrameShape();
 * whole.feed(frame.subarray(0, 3));
 * whole.feed(frame.subarray(3));
 * whole.finish();
 * equal(whole.frames, 1);
 * const cut = new ZstdFrameShape();
 * cut.feed(frame.subarray(0, frame.length - 4));
 * throws(() => cut.finish(), { message: "the zstd frame is truncated: 15 bytes of 19" });
 * ```
 */
export class ZstdFrameShape {
  #sizeSum = 0;
  #sizeKnown = true;
  /** The most the blocks seen so far can decode to (raw and RLE blocks say their size; a compressed block is at most 128 KiB). */
  bound = 0;
  /** Whole frames walked so far. */
  frames = 0;
  readonly #limit: number;
  readonly #many: boolean;
  #start = 0;
  #head = new Uint8Array(14);
  #headLen = 0;
  #headNeed = 5;
  #headDone = false;
  #pos = 0;
  #next = 0;
  #blk = new Uint8Array(3);
  #blkLen = 0;
  #end = -1;

  /**
   * @param limit the most the frame may declare or its blocks may hold
   * (bytes of content); more is refused before anything is decompressed.
   * @param options `many`: a run of whole frames, one after another (what a
   * streaming compressor writes: node:zlib's ends its output with an empty
   * frame), instead of exactly one.
   */
  constructor(limit: number = Infinity, options: { many?: boolean } = {}) {
    this.#limit = limit;
    this.#many = options.many ?? false;
  }

  /**
   * The content size the frame header declares (the sum over a run of
   * frames), or -1 when a header gives none or none was read yet.
   */
  get contentSize(): number {
    return this.#sizeKnown && (this.frames > 0 || this.#headDone) ? this.#sizeSum : -1;
  }

  /** Feeds the next bytes of the frame. */
  feed(b: Uint8Array): void {
    let i = 0;
    while (i < b.length) {
      if (!this.#headDone) {
        const take = Math.min(b.length - i, this.#headNeed - this.#headLen);
        this.#head.set(b.subarray(i, i + take), this.#headLen);
        this.#headLen += take;
        i += take;
        if (this.#headLen === this.#headNeed) this.#header();
        continue;
      }
      const abs = this.#pos + i;
      if (this.#end >= 0) {
        if (!this.#many) break; // past the last block: counted at finish
        if (abs < this.#end) {
          i += Math.min(b.length - i, this.#end - abs);
          continue;
        }
        // The next frame of the run starts here.
        this.#start = abs;
        this.#headDone = false;
        this.#headLen = 0;
        this.#headNeed = 5;
        this.#end = -1;
        continue;
      }
      if (abs < this.#next) {
        i += Math.min(b.length - i, this.#next - abs);
        continue;
      }
      const take = Math.min(b.length - i, 3 - this.#blkLen);
      this.#blk.set(b.subarray(i, i + take), this.#blkLen);
      this.#blkLen += take;
      i += take;
      if (this.#blkLen === 3) this.#block();
    }
    this.#pos += b.length;
  }

  /** Says whether what was fed is exactly one whole frame; throws if not. */
  finish(): void {
    const n = this.#pos;
    if (!this.#headDone) {
      throw new Error(
        n < 6
          ? `${n} bytes is too short for a zstd frame`
          : "the zstd frame is truncated in its header",
      );
    }
    if (this.#end < 0) throw new Error(`the zstd frame is truncated at byte ${this.#next} of ${n}`);
    if (this.#end !== n) {
      throw new Error(
        this.#end > n
          ? `the zstd frame is truncated: ${n} bytes of ${this.#end}`
          : `${n - this.#end} bytes follow the zstd frame`,
      );
    }
  }

  // The frame header, once #headNeed bytes are in: after the first 5 it
  // knows how long the whole header is.
  #header(): void {
    const h = this.#head;
    if (this.#headNeed === 5) {
      const magic = (h[0] | h[1] << 8 | h[2] << 16 | h[3] << 24) >>> 0;
      if (magic !== MAGIC) throw new Error(`not a zstd frame (magic 0x${magic.toString(16)})`);
      const fhd = h[4];
      if (!((fhd >> 2) & 1)) throw new Error("the zstd frame has no content checksum");
      if ((fhd & 3) !== 0) throw new Error("the zstd frame needs a dictionary");
      const single = (fhd >> 5) & 1;
      const fcsBytes = [single ? 1 : 0, 2, 4, 8][fhd >> 6];
      this.#headNeed = 5 + (single ? 0 : 1) + fcsBytes;
      if (this.#headNeed > 5) return;
    }
    const fhd = h[4];
    const single = (fhd >> 5) & 1;
    const fcsBytes = [single ? 1 : 0, 2, 4, 8][fhd >> 6];
    const p = 5 + (single ? 0 : 1);
    if (fcsBytes > 0) {
      let size = 0;
      for (let k = fcsBytes - 1; k >= 0; k--) size = size * 256 + h[p + k];
      if (fcsBytes === 2) size += 256;
      this.#sizeSum += size;
      if (this.#sizeSum > this.#limit) {
        throw new Error(
          `the zstd frame declares ${size} bytes of content, over the limit of ${this.#limit}`,
        );
      }
    } else this.#sizeKnown = false;
    this.#headDone = true;
    this.#next = this.#start + this.#headNeed;
  }

  // A block header (3 bytes at #next): where the next one is, or the end.
  #block(): void {
    const b = this.#blk;
    const h = b[0] | b[1] << 8 | b[2] << 16;
    this.#blkLen = 0;
    const type = (h >> 1) & 3;
    if (type === 3) {
      throw new Error(`the zstd frame has a reserved block type at byte ${this.#next}`);
    }
    this.bound += type === 2 ? MAX_BLOCK : h >> 3;
    if (this.bound > this.#limit) {
      throw new Error(
        `the zstd frame's blocks may decode to more than the limit of ${this.#limit} bytes`,
      );
    }
    this.#next += 3 + (type === 1 ? 1 : h >> 3);
    if (h & 1) {
      this.#end = this.#next + 4;
      this.frames++;
    }
  }
}

/**
 * Checks that `b` is exactly one whole zstd frame with a content checksum,
 * declaring and holding at most `limit` bytes of content; returns what its
 * shape says (the declared size, -1 when none, and the blocks' bound).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { zstdCompressSync, constants } from "node:zlib";
 * import { checkZstdFrame } from "./zstd_frame.ts";
 * const frame = zstdCompressSync(new Uint8Array(10), {
 *   params: { [constants.ZSTD_c_checksumFlag]: 1 },
 * });
 * // node:zlib streams the frame, so its header declares no size; its blocks hold 10 bytes.
 * deepStrictEqual(checkZstdFrame(frame), { size: -1, bound: 10 });
 * ```
 */
export function checkZstdFrame(
  b: Uint8Array,
  limit: number = Infinity,
): { size: number; bound: number } {
  if (b.length < 6) throw new Error(`${b.length} bytes is too short for a zstd frame`);
  const shape = new ZstdFrameShape(limit);
  shape.feed(b);
  shape.finish();
  return { size: shape.contentSize, bound: shape.bound };
}
