/**
 * A commit's frames as each frame mode sends them, each made at most once, on
 * first use, and shared by every subscriber handed the same frames.
 *
 * @module
 */

import type { Compression } from "../../wire/subscribe.ts";

/** A commit's frames, encoded at most once per mode and shared by every subscriber. */
export interface SharedFrames {
  /** The frames joined with `\n` (batch mode). */
  joined(): string;
  /** One Arrow record batch message (arrow mode). */
  arrow(): Uint8Array;
  /**
   * compress=zstd: the joined frames as one zstd frame (with the stream's dictionary
   * for `zstd-dict`), compressed once per commit and kind (optional, like arrow's encoder).
   */
  zstd?(kind: Compression): Uint8Array;
  /**
   * compress=zstd-stream: this commit's message in the zstd stream of the
   * group it is handed to (set on the group's own view of the commit's
   * frames, see {@linkcode inStream}); absent elsewhere.
   */
  readonly stream?: StreamMessage;
}

/** compress=zstd-stream: one commit's message in its group's zstd stream (server/frames/zstd_stream.ts). */
export interface StreamMessage {
  /** The message: the commit's blocks, flushed (with the frame's header when it starts one). */
  readonly bytes: Uint8Array;
  /** The frame it belongs to: a number the group never gives two frames. */
  readonly frame: number;
  /** Whether it starts its frame (it begins with the zstd magic number). */
  readonly starts: boolean;
}

/** How a stream encodes shared frames: Arrow frames, and one zstd frame of a text. */
export interface FrameEncoders {
  /** One Arrow record batch message of `frames`. */
  arrow(frames: readonly string[]): Uint8Array;
  /**
   * One zstd frame of `text`, with the stream's dictionary for `zstd-dict`, a
   * self-contained zstd-stream frame for `zstd-stream` (counted as live).
   */
  zstd(text: string, kind: Compression): Uint8Array;
}

/**
 * The shared frames of `frames` (each `[offset,msg]`), made lazily with `enc`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { sharedFrames } from "./shared_frames.ts";
 * const enc = { arrow: () => new Uint8Array(0), zstd: (t: string) => new TextEncoder().encode(t) };
 * const s = sharedFrames(['[1,{"a":1}]', '[2,{"a":2}]'], enc);
 * equal(s.joined() === s.joined(), true);
 * ```
 */
export function sharedFrames(frames: readonly string[], enc: FrameEncoders): SharedFrames {
  let joined: string | null = null;
  let arrow: Uint8Array | null = null;
  let zstd: Uint8Array | null = null;
  let zdict: Uint8Array | null = null;
  let zself: Uint8Array | null = null;
  const join = () => (joined ??= frames.join("\n"));
  return {
    joined: join,
    arrow: () => (arrow ??= enc.arrow(frames)),
    zstd: (kind) =>
      kind === "zstd-dict"
        ? (zdict ??= enc.zstd(join(), kind))
        : kind === "zstd-stream"
        ? (zself ??= enc.zstd(join(), kind))
        : (zstd ??= enc.zstd(join(), kind)),
  };
}

/**
 * A group's view of a commit's shared frames: the same frames and encodings,
 * with the commit's message in that group's zstd stream.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { inStream, sharedFrames } from "./shared_frames.ts";
 * const enc = { arrow: () => new Uint8Array(0), zstd: (t: string) => new TextEncoder().encode(t) };
 * const all = sharedFrames(['[1,{"a":1}]'], enc);
 * const mine = inStream(all, { bytes: new Uint8Array([1]), frame: 1, starts: true });
 * equal(mine.joined(), all.joined());
 * equal(mine.stream?.frame, 1);
 * ```
 */
export function inStream(shared: SharedFrames, stream: StreamMessage): SharedFrames {
  return { joined: shared.joined, arrow: shared.arrow, zstd: shared.zstd, stream };
}
