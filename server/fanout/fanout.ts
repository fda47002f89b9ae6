/**
 * A stream's fan-out: who gets which rows when. It holds the stream's
 * subscribers — every one, the live ones, and the live `where=` ones grouped
 * by filter — hands each commit's frames to the live ones (paced:
 * fanout_pacer.ts), and is what its subscribers read the log through
 * (their reads take turns through the server's replay gate) and count
 * their frames in.
 *
 * Invariants:
 * - a commit's frames are built once (`[offset,msg]` each, in place), and
 *   only when some subscriber is live; each filter group tests each row once;
 * - a subscriber is in the live set (or its group's) exactly while its state
 *   is `live`, and in the set of all from its start until it is gone;
 * - the last commits' frames are also kept (recent_commits.ts), while some
 *   subscriber is connected and for {@linkcode RECENT_KEEP_MS} after the
 *   last one left, for the subscribers that start a few rows behind.
 *
 * @module
 */

import type { Compression, FrameMode } from "../../wire/subscribe.ts";
import type { Filter } from "../../wire/filter.ts";
import type { Logger } from "../../common/logger.ts";
import type { Log, RecordBatch } from "../../log/mod.ts";
import type { ArrowFrameEncoder } from "../../arrow/frame_encoder.ts";
import type { SharedFrames } from "../frames/shared_frames.ts";
import { liveFrame } from "../frames/text_frames.ts";
import type { ZstdPath } from "../frames/stream_frames.ts";
import { FanoutPacer } from "./fanout_pacer.ts";
import { FilterGroups } from "./filter_groups.ts";
import { parseRows } from "./filtered_frames.ts";
import type { ReplayReader } from "./replay_gate.ts";
import { type Serving, UNSERVED } from "./serving.ts";
import type { SessionSocket } from "../socket.ts";
import { Subscriber, type SubscriberHost, type SubscriberState } from "./subscriber.ts";
import { ZstdStreamGroup, type ZstdStreamSettings } from "./zstd_stream_group.ts";
import { RecentCommits } from "./recent_commits.ts";

/**
 * How long after its last subscriber left a stream keeps its recent commits'
 * frames (recent_commits.ts), ms: the rows published while every subscriber
 * is away (a network cut, a restart of the clients) are what their
 * reconnects ask for. A stream nobody subscribed to builds no frames.
 */
export const RECENT_KEEP_MS = 60_000;
import { COMPRESS_FRAME_BYTES } from "../frames/zstd_stream.ts";

/** What a fan-out counts its subscribers' work in (a stream's series). */
export interface FanoutCounts {
  /** Frames and bytes sent, and the rows of them replayed from the log. */
  sent(frames: number, bytes: number, replayRows: number): void;
  /** A subscriber dropped (or sent back to the log) for `reason`. */
  dropped(reason: string): void;
  /** A subscribe accepted. */
  subscribed(): void;
}

/** The encoders a fan-out's frames use (a stream's `StreamFrames`). */
export interface FanoutEncoders {
  /** The frames of a commit as each mode sends them, made once and shared. */
  shared(frames: readonly string[]): SharedFrames;
  /** The Arrow encoder, once loaded. */
  readonly arrowEncoder: ArrowFrameEncoder;
  /** One zstd frame of `text`, counted under `path`. */
  compress(text: string, kind: Compression, path: ZstdPath): Uint8Array;
  /** Counts one compression made elsewhere (a zstd-stream message) under `path`. */
  counted?(path: ZstdPath, text: number, zstd: number): void;
}

/** What a fan-out is made with. */
export interface FanoutOptions {
  /** The stream's name. */
  name: string;
  /** The stream's log (replay reads, the durable end), or null when it is ephemeral. */
  log: Log | null;
  /** Where its subscribers' work is counted. */
  counts: FanoutCounts;
  /** The stream's frame encoders. */
  encoders: FanoutEncoders;
  /** Frames queued per live subscriber before it catches up from the log. */
  maxBacklog: number;
  /** Close a subscriber whose socket accepts nothing for this long. */
  stallTimeoutMs: number;
}

/** How a subscriber reads: its frame mode, its `where=` filter, its compression. */
export interface SubscribeOptions {
  /** Frame mode. */
  frames: FrameMode;
  /** The `where=` filter as compiled for this subscribe (null: every row). */
  filter: Filter | null;
  /** compress=, or null. */
  compress: Compression | null;
  /** What the server starting it gives it (see serving.ts). @default UNSERVED */
  serving?: Serving;
  /**
   * snapshot=1: `[offset,row]` lines (a keyed stream's latest rows below
   * `from`, filtered) sent before the rows from `from`. @default null
   */
  snapshot?: readonly string[] | null;
}

/**
 * One stream's subscribers and the fan-out of its commits.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { Fanout } from "./fanout.ts";
 * const counts = { sent: () => {}, dropped: () => {}, subscribed: () => {} };
 * const fanout = new Fanout({
 *   name: "t", log: null, counts, maxBacklog: 100, stallTimeoutMs: 1000,
 *   encoders: {
 *     shared: (frames) => ({ joined: () => frames.join("\n"), arrow: () => new Uint8Array(0) }),
 *     arrowEncoder: null as never, // no arrow subscriber here
 *     compress: () => new Uint8Array(0),
 *   },
 * });
 * const sent: string[] = [];
 * const socket = {
 *   readyState: WebSocket.OPEN, bufferedAmount: 0, close() {},
 *   send: (text: string) => void sent.push(text),
 * };
 * fanout.subscribe(socket, 0, { frames: "batch", filter: null, compress: null });
 * equal(fanout.live, true);
 * fanout.send(['{"v":1}', '{"v":2}'], null);
 * deepStrictEqual(sent, ['[null,{"v":1}]\n[null,{"v":2}]']);
 * fanout.close(1001, "");
 * equal(fanout.size, 0);
 * ```
 */
export class Fanout implements SubscriberHost {
  /** The stream's name. */
  readonly name: string;
  /** Whether the stream has a log. */
  readonly durable: boolean;
  readonly #log: Log | null;
  readonly #counts: FanoutCounts;
  readonly #encoders: FanoutEncoders;
  readonly #maxBacklog: number;
  readonly #stallTimeoutMs: number;
  readonly #all = new Set<Subscriber>();
  readonly #live = new Set<Subscriber>();
  // compress=zstd-stream: a group frame's size, as the server of the last subscribe gives it.
  #frameBytes: number = COMPRESS_FRAME_BYTES.default;
  readonly #zstdSettings: ZstdStreamSettings = {
    frameBytes: () => this.#frameBytes,
    counted: (text, zstd) => this.#encoders.counted?.("live", text, zstd),
  };
  // compress=zstd-stream: the zstd stream of the unfiltered live subscribers.
  readonly #zstd = new ZstdStreamGroup(this.#zstdSettings);
  readonly #groups = new FilterGroups(this.#zstdSettings);
  readonly #pacer = new FanoutPacer<Subscriber>();
  readonly #share = (frames: readonly string[]): SharedFrames => this.#encoders.shared(frames);
  readonly #recent = new RecentCommits();
  // When the last subscriber left (performance.now()); -Infinity: none yet.
  #emptySince = -Infinity;

  /** The fan-out of a stream. */
  constructor(options: FanoutOptions) {
    this.name = options.name;
    this.#log = options.log;
    this.durable = options.log !== null;
    this.#counts = options.counts;
    this.#encoders = options.encoders;
    this.#maxBacklog = options.maxBacklog;
    this.#stallTimeoutMs = options.stallTimeoutMs;
  }

  /** Subscribers connected now. */
  get size(): number {
    return this.#all.size;
  }

  /** Whether some subscriber is live (a commit's frames are built only then). */
  get live(): boolean {
    return this.#live.size > 0 || this.#groups.live > 0;
  }

  /** Distinct `where=` filters with a subscriber. */
  get filters(): number {
    return this.#groups.size;
  }

  /** Subscribers by state. */
  states(): Record<SubscriberState, number> {
    const out: Record<SubscriberState, number> = { catching_up: 0, live: 0, closed: 0 };
    for (const s of this.#all) out[s.state]++;
    return out;
  }

  /**
   * Starts serving a subscriber on `socket` (its greeting sent) from offset
   * `from`; with a `where=` filter, it joins the group of that filter's key
   * (sharing the group's compiled instance).
   */
  subscribe(socket: SessionSocket, from: number, options: SubscribeOptions): Subscriber {
    const filter = options.filter === null ? null : this.#groups.add(options.filter);
    const serving = options.serving ?? UNSERVED;
    this.#frameBytes = serving.compressFrameBytes ?? COMPRESS_FRAME_BYTES.default;
    const sub = new Subscriber(socket, this, from, {
      frames: options.frames,
      maxBacklog: this.#maxBacklog,
      stallTimeoutMs: this.#stallTimeoutMs,
      sendBudget: serving.sendBudget ?? UNSERVED.sendBudget,
      gate: serving.gate,
      logger: serving.logger,
      filter,
      compress: options.compress,
      snapshot: options.snapshot ?? null,
    });
    this.#all.add(sub);
    this.#counts.subscribed();
    sub.start();
    return sub;
  }

  /**
   * Hands rows (their JSON, in offset order; the offsets from `first`, null
   * when ephemeral) to every live subscriber. The array becomes the commit's
   * frames: it is the caller's no more.
   */
  send(jsons: string[], first: number | null): void {
    if (jsons.length === 0) return;
    const live = this.live;
    const keep = first !== null &&
      (this.#all.size > 0 || performance.now() - this.#emptySince < RECENT_KEEP_MS);
    if (!live && !keep) return;
    // Parsed once per commit, only when a filtered subscriber is live.
    const rows = live && this.#groups.live > 0 ? parseRows(jsons) : null;
    const frames = jsons;
    for (let i = 0; i < frames.length; i++) {
      frames[i] = liveFrame(first === null ? null : first + i, jsons[i]);
    }
    if (keep) this.#recent.add(first!, frames);
    if (!live) return;
    const end = first === null ? null : first + frames.length;
    const shared = this.#share(frames);
    this.#pacer.fanOut(this.#live, frames, end, this.#zstd.view(shared));
    if (rows !== null) this.#groups.fanOut(frames, rows, end, shared, this.#share, this.#pacer);
  }

  /**
   * Null when every commit is handed out; else a promise that resolves once
   * it is (a durable stream's next commit waits for it).
   */
  idle(): Promise<void> | null {
    return this.#pacer.idle();
  }

  /** Every live subscriber goes back to the log (its end moved with no commit: rows adopted). */
  toLog(): void {
    this.#recent.clear();
    for (const sub of this.#all) sub._fromLog();
  }

  /**
   * The frames from `offset` to `end` (the log's durable end) when the
   * recent commits hold them from a commit starting at `offset`; else null.
   */
  recent(offset: number, end: number): string[] | null {
    return this.#recent.from(offset, end);
  }

  /** Closes every subscriber with `code` and `reason`. */
  close(code: number, reason: string): void {
    for (const sub of [...this.#all]) sub.close(code, reason);
  }

  /** The log's durable end. */
  endOffset(): number {
    return this.#log ? this.#log.endOffset : 0;
  }

  /** A reader of the log from `offset` (a subscriber's catch-up gates it: catch_up.ts). */
  reader(offset: number): ReplayReader<RecordBatch> {
    return this.#log!.reader(offset);
  }

  /** Adds a subscriber to the live set (its filter group's, if it has a filter). */
  joinLive(sub: Subscriber): void {
    if (sub.filter !== null) this.#groups.join(sub);
    else if (!this.#live.has(sub)) {
      this.#live.add(sub);
      sub.zstdGroup = this.#zstd;
      this.#zstd.join(sub);
    }
  }

  /** Takes a subscriber out of the live set. */
  leaveLive(sub: Subscriber): void {
    if (sub.filter !== null) this.#groups.leave(sub);
    else if (this.#live.delete(sub)) {
      this.#zstd.leave(sub);
      sub.zstdGroup = null;
    }
  }

  /** Forgets a closed subscriber. */
  gone(sub: Subscriber): void {
    this.#all.delete(sub);
    if (this.#all.size === 0) this.#emptySince = performance.now();
    if (sub.filter === null) this.leaveLive(sub);
    else this.#groups.remove(sub);
  }

  /** Counts frames and bytes sent, and the replayed rows among them. */
  count(frames: number, bytes: number, replayRows: number): void {
    this.#counts.sent(frames, bytes, replayRows);
  }

  /** Counts a subscriber dropped (or sent back to the log) for `reason`. */
  dropped(reason: string): void {
    this.#counts.dropped(reason);
  }

  /** Reports a failure that ended a subscriber to `logger`; its details stay in the server's log. */
  failed(err: unknown, logger: Logger): void {
    logger.error(
      "subscriber_failed",
      { stream: this.name, error: err instanceof Error ? err.message : String(err) },
      `subscriber on "${this.name}" failed: ${err}`,
    );
  }

  /** The stream's Arrow encoder (loaded before an arrow subscriber starts). */
  arrowEncoder(): ArrowFrameEncoder {
    return this.#encoders.arrowEncoder;
  }

  /** One zstd frame of a catching-up subscriber's slice. */
  compress(text: string, kind: Compression): Uint8Array {
    return this.#encoders.compress(text, kind, "replay");
  }
}
