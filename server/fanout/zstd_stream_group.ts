/**
 * compress=zstd-stream (docs/SPEC.md §2.6.1): the zstd stream of one live
 * group — a stream's unfiltered live subscribers, or the live subscribers of
 * one `where=` filter — and which bytes each of its members is sent.
 *
 * Each commit handed to the group is compressed once into the group's
 * context ({@linkcode ZstdStreamGroup.view}), while it has a `zstd-stream`
 * member; every member then gets the same `Uint8Array` for it, or, while it
 * is not in the group's current frame, the commit's self-contained frame
 * (made once per commit for all of them).
 *
 * Invariants:
 * - a member is **in** frame `F` (its `streamFrame`) exactly when it was sent
 *   every message of `F` so far, in order: the decoder on the other side has
 *   `F` open. It is sent a commit's shared message when the message starts a
 *   frame or continues the frame it is in; otherwise the self-contained frame,
 *   which leaves it in none (0) until a frame starts;
 * - the context exists only while the group has a `zstd-stream` member, and
 *   is freed with the last one (a member's later frames start afresh);
 * - nothing here is per member but the frame number it is in.
 *
 * @module
 */

import type { Compression } from "../../wire/subscribe.ts";
import { inStream, type SharedFrames } from "../frames/shared_frames.ts";
import { ZstdStream } from "../frames/zstd_stream.ts";

/** A member of a group, as far as its zstd stream goes (a live `Subscriber`). */
export interface StreamMember {
  /** Its compression: only `zstd-stream` members count. */
  readonly compress: Compression | null;
  /** The group frame it is in (0: none, it is sent self-contained frames). */
  streamFrame: number;
}

/** What a stream's groups share: the frame size, and where compressions are counted. */
export interface ZstdStreamSettings {
  /** The text a frame carries before a new one starts (read when a context is made). */
  frameBytes(): number;
  /** Counts one compression: `text` bytes in, `zstd` bytes out. */
  counted(text: number, zstd: number): void;
}

/** A joiner waits for a new frame once the open one has carried this share of the frame size. */
const JOIN_SHARE = 16;

/**
 * The zstd stream of one live group.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { sharedFrames } from "../frames/shared_frames.ts";
 * import { selfContainedFrame } from "../frames/zstd_stream.ts";
 * import { ZstdStreamGroup } from "./zstd_stream_group.ts";
 * const group = new ZstdStreamGroup({ frameBytes: () => 1 << 20, counted() {} });
 * const enc = { arrow: () => new Uint8Array(0), zstd: (t: string) => selfContainedFrame(t) };
 * const a = { compress: "zstd-stream" as const, streamFrame: 0 };
 * group.join(a);
 * const first = group.view(sharedFrames(['[1,{"v":1}]'], enc));
 * equal(group.bytesFor(a, first), first.stream!.bytes); // it starts a frame: shared
 * const b = { compress: "zstd-stream" as const, streamFrame: 0 };
 * group.join(b); // joins mid-frame
 * const second = group.view(sharedFrames(['[2,{"v":2}]'], enc));
 * equal(group.bytesFor(a, second), second.stream!.bytes);
 * equal(group.bytesFor(b, second) === second.stream!.bytes, false); // self-contained
 * group.leave(a);
 * group.leave(b);
 * equal(group.memoryBytes, 0); // the context went with the last member
 * ```
 */
export class ZstdStreamGroup {
  readonly #settings: ZstdStreamSettings;
  #ctx: ZstdStream | null = null;
  #members = 0;
  #waiting = 0;
  #frames = 0;
  #frame = 0;

  /** A group whose contexts take their frame size from `settings`. */
  constructor(settings: ZstdStreamSettings) {
    this.#settings = settings;
  }

  /** Live `zstd-stream` members. */
  get members(): number {
    return this.#members;
  }

  /** Members in no frame of the group's yet (sent self-contained frames). */
  get waiting(): number {
    return this.#waiting;
  }

  /** The memory libzstd holds for the group's context (0 when it has none). */
  get memoryBytes(): number {
    return this.#ctx?.memoryBytes ?? 0;
  }

  /** Counts a live member in (a `zstd-stream` one joins in no frame). */
  join(m: StreamMember): void {
    if (m.compress !== "zstd-stream") return;
    m.streamFrame = 0;
    this.#members++;
    this.#waiting++;
  }

  /** Counts a member out (it left the live set); the context goes with the last one. */
  leave(m: StreamMember): void {
    if (m.compress !== "zstd-stream") return;
    if (m.streamFrame === 0) this.#waiting--;
    m.streamFrame = 0;
    if (--this.#members === 0) {
      this.#ctx?.close();
      this.#ctx = null;
      this.#waiting = 0;
    }
  }

  /**
   * The group's view of a commit's shared frames: with the commit's message
   * in the group's stream when it has a `zstd-stream` member (compressed
   * here, once), else `shared` itself. When a member waits to join and the
   * open frame has carried 1/16 of the frame size, this commit ends the frame
   * so that the next one starts a new frame.
   */
  view(shared: SharedFrames): SharedFrames {
    if (this.#members === 0) return shared;
    const ctx = this.#ctx ??= ZstdStream.create({ frameBytes: this.#settings.frameBytes() });
    if (ctx === null) return shared; // No libzstd: members get self-contained frames.
    if (this.#waiting > 0 && ctx.frameTextBytes * JOIN_SHARE >= ctx.frameBytes) ctx.finishFrame();
    const starts = !ctx.inFrame;
    const text = shared.joined();
    let bytes: Uint8Array;
    try {
      bytes = ctx.compressCommit(text);
    } catch {
      // The context was reset: its next message starts a frame, and this
      // commit goes to every member as a self-contained frame.
      return shared;
    }
    if (starts) this.#frame = ++this.#frames;
    this.#settings.counted(text.length, bytes.byteLength);
    return inStream(shared, { bytes, frame: this.#frame, starts });
  }

  /**
   * The bytes member `m` is sent for a commit (`shared` as {@linkcode view}
   * gave it), in the member's commit order: the shared message when it starts
   * a frame or continues the one `m` is in, else the self-contained frame.
   */
  bytesFor(m: StreamMember, shared: SharedFrames): Uint8Array {
    const msg = shared.stream;
    if (msg !== undefined && (msg.starts || msg.frame === m.streamFrame)) {
      if (m.streamFrame === 0) this.#waiting--;
      m.streamFrame = msg.frame;
      return msg.bytes;
    }
    if (m.streamFrame !== 0) {
      this.#waiting++;
      m.streamFrame = 0;
    }
    return shared.zstd!("zstd-stream");
  }
}
