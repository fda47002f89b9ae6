/**
 * Compressed streams (`compress=zstd-stream`, with `frames=batch`): one zstd
 * compression context per live group of subscribers (one stream, one
 * filter), into which each commit's batched text is compressed once and
 * flushed. The message a commit makes is sent, as the same `Uint8Array`, to
 * every member of the group that is within the current frame.
 *
 * ```
 * frame 1: [28 B5 2F FD hdr | blocks of commit 1]  [blocks of commit 2] … [blocks of commit k | checksum]
 * frame 2: [28 B5 2F FD hdr | blocks of commit k+1] …
 * ```
 *
 * Invariants:
 * - every message ends at a flush boundary (`ZSTD_e_flush`) or at the end of
 *   its frame (`ZSTD_e_end`, then the content checksum), so a streaming
 *   decoder fed a frame's messages in order gives out each commit's text,
 *   whole, as its message arrives;
 * - a message starts with the zstd magic number `28 B5 2F FD` exactly when it
 *   starts a frame: a continuation starts with a block header, and a block
 *   header reading `28 B5 2F` would be a raw block of 390,821 bytes, over
 *   zstd's 128 KiB;
 * - a frame ends with the commit that brings its text to the frame size
 *   ({@linkcode COMPRESS_FRAME_BYTES}) or more, or with the first commit after
 *   {@linkcode ZstdStream.finishFrame}; the next commit starts a new frame;
 * - the window is 2^{@linkcode ZSTD_STREAM_WINDOW_LOG} bytes in every frame
 *   made here (stream frames and self-contained ones), under the 1 MiB a
 *   decoder accepts, and no frame needs a dictionary;
 * - nothing here is per subscriber: a context per group, a message per commit,
 *   and one pair of scratch buffers for the process.
 *
 * The codec is the system's libzstd through Deno's FFI (`./_libzstd.ts`):
 * `node:zlib`'s streaming zstd compressor works in Deno 2.9 but only
 * asynchronously (its synchronous `_processChunk` closes the handle after
 * one call), so the fan-out would wait on a callback per commit; with the
 * same parameters it makes the same bytes for 5.3–8.3 µs of CPU a one-row
 * commit against 4.8–5.2 here (bench/micro/zstd_stream_codec.ts, three runs).
 *
 * @module
 */

import { type Libzstd, libzstdProblem, loadLibzstd } from "./_libzstd.ts";
import { ZSTD_FRAME_LEVEL } from "./compressed_frames.ts";

/**
 * The text a compressed stream's frame carries before a new frame starts
 * (`--compress-frame-bytes`, config `compress_frame_bytes`): 1 MiB by
 * default, accepted from 4 KiB to 64 MiB. A subscriber that joins a group
 * mid-frame receives self-contained frames until the group's next frame
 * starts, so this bounds how much text it waits for; each new frame costs
 * its header, its checksum and a window started empty.
 */
export const COMPRESS_FRAME_BYTES: {
  readonly default: number;
  readonly min: number;
  readonly max: number;
} = { default: 1024 * 1024, min: 4 * 1024, max: 64 * 1024 * 1024 };

/**
 * log2 of the window of every zstd-stream frame (64 KiB). Measured at
 * {@linkcode ZSTD_STREAM_PARAMS}, one row per commit (bench/micro/zstd_stream_codec.ts,
 * the parameters section): a 16 KiB window costs 2 % more bytes for trade
 * rows and 3 % for nested ones, for 0.40× a context's memory (0.27 MB
 * against 0.66) and a third to a half of the browser decoder's CPU a
 * message (fzstd allocates a block buffer of the window's size, up to
 * 128 KiB, for each message); a 1 MiB window saves 2 % of the bytes for 3×
 * the memory and 2–3× the decoder's CPU. 64 KiB keeps the bytes near
 * their best.
 */
export const ZSTD_STREAM_WINDOW_LOG = 16;

/**
 * The compression parameters of a group's context: level 6 (lazy
 * matching), matches from 4 bytes, and hash and chain tables of 2^15 and
 * 2^16 entries, sized for the 64 KiB window. Measured at one row per commit
 * (bench/micro/zstd_stream_codec.ts, the parameters section, same run): 33.2 bytes a
 * trade row against 40.4 at level 1, 36.4 at level 3 with 4-byte matches
 * and 34.9 at level 6 with its own tables (3.6 MB a context, against
 * 0.66); the nested row 85.3 against 103, 106 and 87.9. Level 9 with the
 * same tables gains 1 % on the trade row and nothing on the nested one,
 * for more CPU. The CPU is a few µs a commit, once per group: from level
 * 1's to 3× it over the runs on a loaded machine. Self-contained frames (a
 * joiner's, replay's) use {@linkcode ZSTD_FRAME_LEVEL} instead, as
 * `compress=zstd` frames do: they are whole commits or catch-up slices of
 * up to 256 KiB, where a level's CPU counts per row replayed.
 */
export const ZSTD_STREAM_PARAMS: {
  readonly level: number;
  readonly minMatch: number;
  readonly hashLog: number;
  readonly chainLog: number;
} = { level: 6, minMatch: 4, hashLog: 15, chainLog: 16 };

/**
 * Checks a frame size: an integer within {@linkcode COMPRESS_FRAME_BYTES}'s
 * bounds; returns it, or throws a `RangeError` naming the value.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { checkFrameBytes } from "./zstd_stream.ts";
 * equal(checkFrameBytes(65536), 65536);
 * throws(() => checkFrameBytes(100), /from 4096 \(4 KiB\) to 67108864 \(64 MiB\), got 100/);
 * ```
 */
export function checkFrameBytes(n: number): number {
  const { min, max } = COMPRESS_FRAME_BYTES;
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new RangeError(
      `the compressed stream frame size must be an integer from ${min} (4 KiB) to ${max} (64 MiB), got ${n}`,
    );
  }
  return n;
}

/** Options of {@linkcode ZstdStream.create}. */
export interface ZstdStreamOptions {
  /**
   * The text a frame carries before the next commit starts a new one.
   * @default {COMPRESS_FRAME_BYTES.default}
   */
  frameBytes?: number;
}

// Parameter numbers of zstd.h (stable API).
const C_LEVEL = 100; // ZSTD_c_compressionLevel
const C_WINDOW_LOG = 101; // ZSTD_c_windowLog
const C_HASH_LOG = 102; // ZSTD_c_hashLog
const C_CHAIN_LOG = 103; // ZSTD_c_chainLog
const C_MIN_MATCH = 105; // ZSTD_c_minMatch
const C_CHECKSUM = 201; // ZSTD_c_checksumFlag
const E_FLUSH = 1; // ZSTD_e_flush
const E_END = 2; // ZSTD_e_end
const RESET_SESSION = 1; // ZSTD_reset_session_only

const utf8 = new TextEncoder();

function check(z: Libzstd, r: number | bigint, what: string): number {
  if (z.ZSTD_isError(r as bigint)) {
    const p = z.ZSTD_getErrorName(r as bigint);
    throw new Error(`libzstd ${what}: ${p ? Deno.UnsafePointerView.getCString(p) : String(r)}`);
  }
  return Number(r);
}

function addressOf(b: Uint8Array): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b)));
}

// The process's input and output buffers, shared by every context:
// compression is synchronous, so one call uses them at a time. `inStruct`
// and `outStruct` are ZSTD_inBuffer / ZSTD_outBuffer ({pointer, size, pos}).
class Scratch {
  inBuf = new Uint8Array(64 * 1024);
  outBuf = new Uint8Array(64 * 1024);
  readonly inStruct = new BigUint64Array(3);
  readonly outStruct = new BigUint64Array(3);

  constructor() {
    this.inStruct[0] = addressOf(this.inBuf);
    this.outStruct[0] = addressOf(this.outBuf);
  }

  /** Puts `text`'s UTF-8 in the input buffer; returns its length in bytes. */
  load(text: string | Uint8Array): number {
    if (typeof text !== "string") {
      if (text.length > this.inBuf.length) this.#growIn(text.length);
      this.inBuf.set(text);
      return text.length;
    }
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    if (text.length * 3 > this.inBuf.length) this.#growIn(text.length * 3);
    return utf8.encodeInto(text, this.inBuf).written;
  }

  /** Makes the output buffer at least `n` bytes, keeping its first `keep` bytes. */
  ensureOut(n: number, keep = 0): void {
    if (n <= this.outBuf.length) return;
    const next = new Uint8Array(Math.max(n, this.outBuf.length * 2));
    next.set(this.outBuf.subarray(0, keep));
    this.outBuf = next;
    this.outStruct[0] = addressOf(next);
  }

  #growIn(n: number): void {
    this.inBuf = new Uint8Array(Math.max(n, this.inBuf.length * 2));
    this.inStruct[0] = addressOf(this.inBuf);
  }
}

let scratch: Scratch | null = null;
let oneShot: Deno.PointerValue = null;

// A compression context with the window and checksum of every frame made
// here: a group's (`stream`: ZSTD_STREAM_PARAMS) or the self-contained one.
function newContext(z: Libzstd, stream: boolean): Deno.PointerObject {
  const cctx = z.ZSTD_createCCtx();
  if (cctx === null) throw new Error("libzstd: out of memory creating a compression context");
  const set = (param: number, value: number, what: string) =>
    check(z, z.ZSTD_CCtx_setParameter(cctx, param, value), what);
  set(C_LEVEL, stream ? ZSTD_STREAM_PARAMS.level : ZSTD_FRAME_LEVEL, "level");
  set(C_WINDOW_LOG, ZSTD_STREAM_WINDOW_LOG, "windowLog");
  set(C_CHECKSUM, 1, "checksum");
  if (stream) {
    set(C_MIN_MATCH, ZSTD_STREAM_PARAMS.minMatch, "minMatch");
    set(C_HASH_LOG, ZSTD_STREAM_PARAMS.hashLog, "hashLog");
    set(C_CHAIN_LOG, ZSTD_STREAM_PARAMS.chainLog, "chainLog");
  }
  return cctx;
}

function libzstd(): Libzstd {
  const z = loadLibzstd();
  if (z === null) throw new Error(`compress=zstd-stream needs libzstd: ${libzstdProblem()}`);
  scratch ??= new Scratch();
  return z;
}

/** Frees the contexts of streams that were dropped without `close()`. */
const unclosed = new FinalizationRegistry<Deno.PointerObject>((cctx) => {
  loadLibzstd()?.ZSTD_freeCCtx(cctx);
});

/**
 * Why this process cannot compress zstd streams (libzstd did not load
 * through FFI: no `--allow-ffi`, or no libzstd), or null when it can or has
 * not tried yet.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ZstdStream, zstdStreamProblem } from "./zstd_stream.ts";
 * ZstdStream.create()?.close();
 * equal(zstdStreamProblem(), null);
 * ```
 */
export function zstdStreamProblem(): string | null {
  return libzstdProblem();
}

/**
 * Whether this process can compress zstd streams (libzstd loads through
 * FFI); loads it on first call. A server without it answers
 * `compress=zstd-stream` with plain `compress=zstd` frames.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { zstdStreamAvailable, zstdStreamProblem } from "./zstd_stream.ts";
 * equal(zstdStreamAvailable(), zstdStreamProblem() === null);
 * ```
 */
export function zstdStreamAvailable(): boolean {
  return loadLibzstd() !== null;
}

/**
 * One self-contained zstd frame of `text` (for a subscriber that joined a
 * group mid-frame, and for replay): content checksum, content size, the
 * window of {@linkcode ZSTD_STREAM_WINDOW_LOG} (or the text's size, when
 * smaller), no dictionary. Throws when libzstd cannot be loaded.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { zstdDecompressSync } from "node:zlib";
 * import { selfContainedFrame } from "./zstd_stream.ts";
 * const z = selfContainedFrame('[1,{"a":1}]\n[2,{"a":2}]');
 * equal(new TextDecoder().decode(zstdDecompressSync(z)), '[1,{"a":1}]\n[2,{"a":2}]');
 * ```
 */
export function selfContainedFrame(text: string | Uint8Array): Uint8Array {
  const z = libzstd();
  const s = scratch!;
  oneShot ??= newContext(z, false);
  const n = s.load(text);
  s.ensureOut(Number(z.ZSTD_compressBound(BigInt(n))) + 64);
  const written = check(
    z,
    z.ZSTD_compress2(oneShot, s.outBuf, BigInt(s.outBuf.length), s.inBuf, BigInt(n)),
    "compress",
  );
  return s.outBuf.slice(0, written);
}

/**
 * The compression context of one live group: {@linkcode compressCommit}
 * makes the message of each commit, in commit order.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ZstdStream } from "./zstd_stream.ts";
 * const group = ZstdStream.create()!;
 * const first = group.compressCommit('[1,{"px":100.5}]');
 * const second = group.compressCommit('[2,{"px":100.25}]');
 * equal(first[0], 0x28); // the magic number: a new frame
 * equal(second[0] === 0x28, false); // a continuation of it
 * equal(group.frames, 1);
 * group.close();
 * ```
 */
export class ZstdStream {
  readonly #z: Libzstd;
  #cctx: Deno.PointerObject | null;
  readonly #frameBytes: number;
  #frameText = 0;
  #inFrame = false;
  #finish = false;
  #frames = 0;

  private constructor(z: Libzstd, frameBytes: number) {
    this.#z = z;
    this.#frameBytes = frameBytes;
    this.#cctx = newContext(z, true);
    unclosed.register(this, this.#cctx, this);
  }

  /**
   * A context (frames of `options.frameBytes` of text), or null when
   * libzstd cannot be loaded here ({@linkcode zstdStreamProblem} says why).
   * Throws a `RangeError` for a frame size out of bounds.
   */
  static create(options: ZstdStreamOptions = {}): ZstdStream | null {
    const frameBytes = checkFrameBytes(options.frameBytes ?? COMPRESS_FRAME_BYTES.default);
    if (loadLibzstd() === null) return null;
    return new ZstdStream(libzstd(), frameBytes);
  }

  /** The text a frame carries before the next commit starts a new one. */
  get frameBytes(): number {
    return this.#frameBytes;
  }

  /** Whether a frame is open: the next message continues it (else it starts a frame). */
  get inFrame(): boolean {
    return this.#inFrame;
  }

  /** Bytes of text compressed into the open frame so far (0 between frames). */
  get frameTextBytes(): number {
    return this.#frameText;
  }

  /** Frames started so far. */
  get frames(): number {
    return this.#frames;
  }

  /** The memory libzstd holds for this context, in bytes (`ZSTD_sizeof_CCtx`). */
  get memoryBytes(): number {
    return this.#cctx === null ? 0 : Number(this.#z.ZSTD_sizeof_CCtx(this.#cctx));
  }

  /**
   * The message for one commit's batched text (never empty): it starts a
   * frame (with the magic number) when none is open, and ends its frame
   * (with the checksum) when the frame's text reaches the frame size or
   * {@linkcode finishFrame} was called. If libzstd fails, the context is
   * reset and the error thrown: the next message starts a new frame.
   */
  compressCommit(text: string | Uint8Array): Uint8Array {
    const cctx = this.#cctx;
    if (cctx === null) throw new Error("the zstd stream context is closed");
    const z = this.#z;
    const s = scratch!;
    const n = s.load(text);
    if (n === 0) throw new TypeError("a commit's text to compress is empty");
    const ends = this.#finish || this.#frameText + n >= this.#frameBytes;
    // Room for the whole compressed commit plus a frame header, block
    // headers and the checksum, so one call flushes it all.
    s.ensureOut(Number(z.ZSTD_compressBound(BigInt(n))) + 64);
    s.inStruct[1] = BigInt(n);
    s.inStruct[2] = 0n;
    s.outStruct[1] = BigInt(s.outBuf.length);
    s.outStruct[2] = 0n;
    try {
      for (;;) {
        const left = check(
          z,
          z.ZSTD_compressStream2(cctx, s.outStruct, s.inStruct, ends ? E_END : E_FLUSH),
          "compressStream2",
        );
        if (left === 0) break;
        // Not all flushed: the output was too small after all.
        const pos = Number(s.outStruct[2]);
        s.ensureOut(pos + left + 64, pos);
        s.outStruct[1] = BigInt(s.outBuf.length);
      }
    } catch (err) {
      z.ZSTD_CCtx_reset(cctx, RESET_SESSION);
      this.#inFrame = false;
      this.#frameText = 0;
      this.#finish = false;
      throw err;
    }
    if (!this.#inFrame) this.#frames++;
    this.#inFrame = !ends;
    this.#frameText = ends ? 0 : this.#frameText + n;
    if (ends) this.#finish = false;
    return s.outBuf.slice(0, Number(s.outStruct[2]));
  }

  /**
   * Makes the next commit end its frame (the open one, or a frame of its own
   * when none is open), so that the one after starts a new frame: a group
   * can call it to let waiting joiners in sooner.
   */
  finishFrame(): void {
    this.#finish = true;
  }

  /** A self-contained frame of `text` ({@linkcode selfContainedFrame}): what a member gets until the next frame starts. */
  selfContained(text: string | Uint8Array): Uint8Array {
    return selfContainedFrame(text);
  }

  /** Frees the context; later commits throw. */
  close(): void {
    if (this.#cctx === null) return;
    unclosed.unregister(this);
    this.#z.ZSTD_freeCCtx(this.#cctx);
    this.#cctx = null;
    this.#inFrame = false;
  }
}
