/**
 * A commit's frames as each frame mode sends them, each made at most once, on
 * first use, and shared by every subscriber handed the same frames.
 *
 * @module
 */

import type { Compression } from "../../client/wire.ts";

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
}

/** How a stream encodes shared frames: Arrow frames, and one zstd frame of a text. */
export interface FrameEncoders {
  /** One Arrow record batch message of `frames`. */
  arrow(frames: readonly string[]): Uint8Array;
  /** One zstd frame of `text`, with the stream's dictionary for `zstd-dict` (counted as live). */
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
  const join = () => (joined ??= frames.join("\n"));
  return {
    joined: join,
    arrow: () => (arrow ??= enc.arrow(frames)),
    zstd: (kind) =>
      kind === "zstd-dict" ? (zdict ??= enc.zstd(join(), kind)) : (zstd ??= enc.zstd(join(), kind)),
  };
}
