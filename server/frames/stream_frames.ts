/**
 * The encoders of one stream's frames beyond text: Arrow record batches
 * (`frames=arrow`; apache-arrow is loaded on the first such subscribe) and
 * zstd frames (`compress=zstd`, and `zstd-dict` with the stream's
 * dictionary), each zstd frame counted by path: `live` (once per commit,
 * shared by every subscriber) or `replay` (once per catch-up read).
 *
 * @module
 */

import type { Compression } from "../../wire/subscribe.ts";
import type { Logger } from "../../common/logger.ts";
import type { Log } from "../../log/mod.ts";
import type { RowSchema } from "../../schema/row_schema.ts";
import type { ArrowFrameEncoder } from "../../arrow/frame_encoder.ts";
import { zstdFrame } from "./compressed_frames.ts";
import type { FrameDictionary } from "./frame_dictionary.ts";
import { type FrameEncoders, type SharedFrames, sharedFrames } from "./shared_frames.ts";
import { StreamDictionary } from "./stream_dictionary.ts";
import { selfContainedFrame } from "./zstd_stream.ts";

/** A counter, as far as the frames count: `inc(n)` adds `n` (default 1). */
export interface Count {
  /** Adds `n` (default 1). */
  inc(n?: number): void;
}

/** What a path's zstd frames are counted in: frames made, bytes of text in, bytes of zstd out. */
export interface ZstdCounts {
  /** zstd frames made. */
  readonly frames: Count;
  /** Bytes of text compressed. */
  readonly text: Count;
  /** Bytes of zstd made. */
  readonly zstd: Count;
}

/** Where a zstd frame was made: for a commit's live subscribers, or for one catch-up read. */
export type ZstdPath = "live" | "replay";

/**
 * One stream's Arrow and zstd encoders.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { zstdDecompressSync } from "node:zlib";
 * import { compileSchema } from "../../schema/compile.ts";
 * import { StreamFrames } from "./stream_frames.ts";
 * const schema = compileSchema({ type: "object", properties: { v: { type: "number" } }, required: ["v"] });
 * let made = 0;
 * const count = { frames: { inc: () => void made++ }, text: { inc() {} }, zstd: { inc() {} } };
 * const frames = new StreamFrames("t", schema, null, { live: count, replay: count });
 * const shared = frames.shared(['[1,{"v":1}]', '[2,{"v":2}]']);
 * const z = shared.zstd!("zstd");
 * equal(shared.zstd!("zstd"), z); // compressed once, shared
 * equal(new TextDecoder().decode(zstdDecompressSync(z)), '[1,{"v":1}]\n[2,{"v":2}]');
 * equal(made, 1);
 * ```
 */
export class StreamFrames implements FrameEncoders {
  readonly #schema: RowSchema;
  readonly #durable: boolean;
  readonly #counts: Record<ZstdPath, ZstdCounts>;
  readonly #dictionary: StreamDictionary;
  #arrow: ArrowFrameEncoder | null = null;

  /**
   * The encoders of stream `name` with `schema` and `log` (null:
   * ephemeral), its zstd frames counted in `counts`.
   */
  constructor(
    name: string,
    schema: RowSchema,
    log: Log | null,
    counts: Record<ZstdPath, ZstdCounts>,
  ) {
    this.#schema = schema;
    this.#durable = log !== null;
    this.#counts = counts;
    this.#dictionary = new StreamDictionary(name, log);
  }

  /**
   * The Arrow encoder, made (and apache-arrow loaded) on first use. Throws
   * `TypeError` when the schema cannot be framed as Arrow (a column named
   * `offset`).
   */
  async loadArrow(): Promise<ArrowFrameEncoder> {
    if (!this.#arrow) {
      const { ArrowFrameEncoder } = await import("../../arrow/frame_encoder.ts");
      this.#arrow = new ArrowFrameEncoder(this.#schema, { durable: this.#durable });
    }
    return this.#arrow;
  }

  /** The Arrow encoder once loaded ({@linkcode StreamFrames.loadArrow}); throws before. */
  get arrowEncoder(): ArrowFrameEncoder {
    if (!this.#arrow) throw new Error("frames=arrow before the encoder was loaded");
    return this.#arrow;
  }

  /** One Arrow record batch message of `frames` (each `[offset,msg]`). */
  arrow(frames: readonly string[]): Uint8Array {
    return this.arrowEncoder.encodeFrames(frames);
  }

  /** One zstd frame of `text` for live subscribers (`zstd-dict`: with the dictionary). */
  zstd(text: string, kind: Compression): Uint8Array {
    return this.compress(text, kind, "live");
  }

  /**
   * One zstd frame of `text`, counted under `path`; with the dictionary for
   * `zstd-dict` (a subscriber is given that kind only once the dictionary
   * exists); for `zstd-stream`, a self-contained frame of that framing
   * (`selfContainedFrame`: the stream frames' window, made by libzstd).
   */
  compress(text: string, kind: Compression, path: ZstdPath): Uint8Array {
    const out = kind === "zstd-dict"
      ? this.#dictionary.current!.compress(text)
      : kind === "zstd-stream"
      ? selfContainedFrame(text)
      : zstdFrame(text);
    this.counted(path, text.length, out.byteLength);
    return out;
  }

  /**
   * Counts one compression made elsewhere (a group's zstd stream message) under
   * `path`: `text` bytes in, `zstd` bytes out.
   */
  counted(path: ZstdPath, text: number, zstd: number): void {
    const c = this.#counts[path];
    c.frames.inc();
    c.text.inc(text);
    c.zstd.inc(zstd);
  }

  /** The frames of a commit as each mode sends them, made once on first use and shared. */
  shared(frames: readonly string[]): SharedFrames {
    return sharedFrames(frames, this);
  }

  /** The stream's dictionary, built on first use (see `StreamDictionary.get`); `logger` takes its warning. */
  dictionary(logger: Logger): Promise<FrameDictionary | null> {
    return this.#dictionary.get(logger);
  }

  /** The dictionary with `id`, if it is this stream's. */
  dictionaryById(id: string): FrameDictionary | null {
    return this.#dictionary.byId(id);
  }
}
