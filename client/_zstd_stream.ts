// The decoding of compressed streams (compress=zstd-stream, docs/SPEC.md §2.6.1):
// binary messages, each the zstd blocks of one batched frame's text. A
// message that starts with the zstd magic number starts a frame (a fresh
// decoder); any other continues the open frame. Every message ends at a
// block boundary (or at its frame's end, after the checksum), so each one
// decodes to exactly the text it stands for, as it arrives.
//
// The streaming decoder is fzstd's `Decompress` (pure JavaScript, so the
// browser bundle can carry it): @bokuweb/zstd-wasm exports no streaming
// decoder, node:zlib's streaming decoder answers only through callbacks
// (its synchronous path closes the stream after one call), and browsers'
// DecompressionStream has no "zstd". A message that is one whole frame (a
// self-contained frame) is decoded in one call: by node:zlib where the
// runtime has it (it checks the content checksum), else by fzstd.
//
// Before handing bytes to a decoder, each message's frame header and block
// headers are walked: a frame whose window is over 1 MiB, or that names a
// dictionary, is refused, and so is a message that ends inside a block or
// whose blocks could decode to more than MAX_ZSTD_FRAME_TEXT. fzstd checks
// no checksum; the transport's own (TCP, TLS) is what guards a streamed
// frame in a browser. Private to client/; browser-safe.

import { Decompress, decompress as fzstdDecompress } from "fzstd";
import { MAX_ZSTD_FRAME_TEXT, type ZstdDecompress } from "./_zstd.ts";

/**
 * The largest window a zstd-stream frame may declare (1 MiB): what a
 * decoder holds per open frame, whatever the server.
 */
export const ZSTD_STREAM_MAX_WINDOW = 1024 * 1024;

/** zstd's largest block content (128 KiB). */
const MAX_BLOCK = 128 * 1024;
/** fzstd's Decompress emits nothing until a frame's first 18 bytes are in. */
const FZSTD_HEAD = 18;
/** An empty raw block marked last: closes a frame prefix for a one-call decode. */
const LAST_EMPTY_BLOCK = new Uint8Array([1, 0, 0]);

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Decodes one whole zstd frame with fzstd (pure JavaScript): a browser's
 * decoder of plain `compress=zstd` frames, which a server without libzstd
 * sends for `compress=zstd-stream`. The caller walked the frame first
 * (`checkZstdFrame`), so its size is bounded; past `maxBytes` it throws.
 */
export const fzstdWhole: ZstdDecompress = (b, maxBytes) => {
  const out = fzstdDecompress(b);
  if (out.length > maxBytes) throw new Error(`the frame decodes to more than ${maxBytes} bytes`);
  return out;
};

/** Whether `b` starts with the zstd magic number `28 B5 2F FD` (a message that starts a frame). */
export function startsZstdFrame(b: Uint8Array): boolean {
  return b.length >= 4 && b[0] === 0x28 && b[1] === 0xb5 && b[2] === 0x2f && b[3] === 0xfd;
}

/** What a frame header says. */
interface FrameHeader {
  /** Header length in bytes (magic included). */
  length: number;
  /** Window size in bytes. */
  window: number;
  /** Whether a 4-byte content checksum follows the last block. */
  checksum: boolean;
  /** Declared content size, or -1. */
  size: number;
}

function readHeader(b: Uint8Array): FrameHeader {
  if (b.length < 6) throw new Error(`${b.length} bytes is too short for a zstd frame`);
  const fhd = b[4];
  if (fhd & 8) throw new Error("the zstd frame header sets a reserved bit");
  if (fhd & 3) throw new Error("the zstd frame names a dictionary; zstd-stream frames use none");
  const single = (fhd >> 5) & 1;
  const fcsBytes = [single ? 1 : 0, 2, 4, 8][fhd >> 6];
  const length = 5 + (single ? 0 : 1) + fcsBytes;
  if (b.length < length) throw new Error("the zstd frame is truncated in its header");
  let size = -1;
  if (fcsBytes > 0) {
    size = 0;
    for (let k = fcsBytes - 1; k >= 0; k--) size = size * 256 + b[length - fcsBytes + k];
    if (fcsBytes === 2) size += 256;
  }
  let window = size;
  if (!single) {
    const wd = b[5];
    const base = 2 ** (10 + (wd >> 3));
    window = base + (base / 8) * (wd & 7);
  }
  if (window > ZSTD_STREAM_MAX_WINDOW) {
    throw new Error(
      `the zstd frame declares a window of ${window} bytes, over the limit of ${ZSTD_STREAM_MAX_WINDOW}`,
    );
  }
  if (size > MAX_ZSTD_FRAME_TEXT) {
    throw new Error(
      `the zstd frame declares ${size} bytes of content, over the limit of ${MAX_ZSTD_FRAME_TEXT}`,
    );
  }
  return { length, window, checksum: ((fhd >> 2) & 1) === 1, size };
}

/**
 * Walks the blocks of one message from byte `from`: they must end exactly at
 * the message's end, or the last block (with the checksum after it) must.
 * Returns the most the blocks can decode to and whether the frame ended.
 */
function walkBlocks(
  b: Uint8Array,
  from: number,
  h: FrameHeader,
): { bound: number; ended: boolean } {
  const blockMax = Math.min(h.window, MAX_BLOCK);
  let p = from;
  let bound = 0;
  while (p < b.length) {
    if (p + 3 > b.length) {
      throw new Error(`the message ends inside a block header (byte ${p} of ${b.length})`);
    }
    const head = b[p] | b[p + 1] << 8 | b[p + 2] << 16;
    const type = (head >> 1) & 3;
    const size = head >>> 3;
    if (type === 3) throw new Error(`reserved zstd block type at byte ${p}`);
    if (size > blockMax) {
      throw new Error(`a zstd block of ${size} bytes at byte ${p}, over the most of ${blockMax}`);
    }
    p += 3 + (type === 1 ? 1 : size);
    if (p > b.length) {
      throw new Error(`the message ends inside a block (byte ${b.length}, the block ends at ${p})`);
    }
    bound += type === 2 ? blockMax : size;
    if (bound > MAX_ZSTD_FRAME_TEXT) {
      throw new Error(
        `the message's blocks may decode to more than the limit of ${MAX_ZSTD_FRAME_TEXT} bytes`,
      );
    }
    if (head & 1) {
      const end = p + (h.checksum ? 4 : 0);
      if (end > b.length) throw new Error("the message ends inside the frame's checksum");
      if (end < b.length) {
        throw new Error(`${b.length - end} bytes follow the end of the zstd frame`);
      }
      return { bound, ended: true };
    }
  }
  if (p === from) throw new Error("the message holds no zstd block");
  return { bound, ended: false };
}

function concat(parts: Uint8Array[], total: number): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(total);
  let p = 0;
  for (const part of parts) {
    out.set(part, p);
    p += part.length;
  }
  return out;
}

/** One frame being decoded across messages. */
class OpenFrame {
  readonly header: FrameHeader;
  readonly #dec: Decompress;
  #out: Uint8Array[] = [];
  #outLen = 0;
  // While fewer than FZSTD_HEAD bytes of the frame are in, fzstd holds them
  // and emits nothing: `#prefix` keeps those bytes to decode in one call,
  // and `#owed` counts the text already returned that fzstd will emit again.
  #prefix: Uint8Array | null = new Uint8Array(0);
  #owed = 0;

  constructor(header: FrameHeader) {
    this.header = header;
    this.#dec = new Decompress((chunk) => {
      this.#out.push(chunk);
      this.#outLen += chunk.length;
    });
  }

  /** The bytes message `b` decodes to (its blocks' `bound` at most). */
  push(b: Uint8Array, bound: number, ended: boolean): Uint8Array {
    this.#out = [];
    this.#outLen = 0;
    try {
      this.#dec.push(b);
    } catch (err) {
      throw new Error(`zstd: ${err instanceof Error ? err.message : err}`);
    }
    if (this.#prefix !== null) {
      const prefix = concat([this.#prefix, b], this.#prefix.length + b.length);
      if (prefix.length < FZSTD_HEAD) {
        this.#prefix = prefix;
        const whole = ended ? prefix : concat([prefix, LAST_EMPTY_BLOCK], prefix.length + 3);
        if (!ended) whole[4] &= ~4; // no checksum follows the closing block
        let text: Uint8Array;
        try {
          text = fzstdDecompress(whole).subarray(this.#owed);
        } catch (err) {
          throw new Error(`zstd: ${err instanceof Error ? err.message : err}`);
        }
        this.#owed += text.length;
        return text;
      }
      this.#prefix = null;
    }
    let out = concat(this.#out, this.#outLen);
    if (this.#owed > 0) {
      out = out.subarray(this.#owed);
      this.#owed = 0;
    }
    if (out.length > bound) {
      throw new Error(`the message decoded to ${out.length} bytes, more than its blocks hold`);
    }
    return out;
  }
}

/**
 * Decodes the binary messages of one `compress=zstd-stream` subscription, in
 * the order they arrive; each {@linkcode decode} returns the text of the
 * batched frame its message stands for, or throws an `Error` saying what is
 * wrong with it (after which the decoder holds no open frame).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { constants, createZstdCompress } from "node:zlib";
 * import { ZstdStreamDecoder } from "./_zstd_stream.ts";
 * const z = createZstdCompress({ params: { [constants.ZSTD_c_windowLog]: 16 } });
 * const messages: Uint8Array[] = [];
 * z.on("data", (b: Uint8Array) => messages.push(b));
 * for (const text of ['[1,{"px":10}]', '[2,{"px":11}]']) {
 *   z.write(new TextEncoder().encode(text));
 *   await new Promise<void>((done) => z.flush(constants.ZSTD_e_flush, () => done()));
 * }
 * const d = new ZstdStreamDecoder();
 * equal(d.decode(messages[0]), '[1,{"px":10}]');
 * equal(d.decode(messages[1]), '[2,{"px":11}]');
 * equal(d.inFrame, true);
 * z.close();
 * ```
 */
export class ZstdStreamDecoder {
  readonly #whole: ZstdDecompress | null;
  #frame: OpenFrame | null = null;

  /**
   * @param options `whole`: a decoder of whole frames to use for a message
   * that is one whole frame (node:zlib's, which checks the checksum), instead
   * of fzstd.
   */
  constructor(options: { whole?: ZstdDecompress | null } = {}) {
    this.#whole = options.whole ?? null;
  }

  /** Whether a frame is open: the next message may continue it. */
  get inFrame(): boolean {
    return this.#frame !== null;
  }

  /** The text of one message. */
  decode(message: Uint8Array): string {
    try {
      return utf8.decode(this.#bytes(message));
    } catch (err) {
      this.#frame = null;
      throw err;
    }
  }

  #bytes(b: Uint8Array): Uint8Array {
    if (startsZstdFrame(b)) {
      // A new frame replaces whatever frame was open.
      this.#frame = null;
      const header = readHeader(b);
      const { bound, ended } = walkBlocks(b, header.length, header);
      if (ended) return this.#wholeFrame(b, header, bound);
      const frame = new OpenFrame(header);
      const out = frame.push(b, bound, false);
      this.#frame = frame;
      return out;
    }
    const frame = this.#frame;
    if (frame === null) {
      throw new Error(
        "a message continues a zstd frame, but none is open (a frame starts with 28 B5 2F FD)",
      );
    }
    const { bound, ended } = walkBlocks(b, 0, frame.header);
    const out = frame.push(b, bound, ended);
    if (ended) this.#frame = null;
    return out;
  }

  #wholeFrame(b: Uint8Array, h: FrameHeader, bound: number): Uint8Array {
    let out: Uint8Array;
    try {
      // One byte past the declared size tells a frame that decodes to more.
      out = this.#whole
        ? this.#whole(b, Math.max(1, h.size >= 0 ? Math.min(h.size + 1, bound) : bound))
        : fzstdDecompress(b);
    } catch (err) {
      throw new Error(`zstd: ${err instanceof Error ? err.message : err}`);
    }
    if (h.size >= 0 && out.length !== h.size) {
      throw new Error(
        `the zstd frame decompressed to ${out.length} bytes, its header says ${h.size}`,
      );
    }
    return out;
  }
}
