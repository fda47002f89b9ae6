/**
 * A subscriber: one WebSocket reading one stream, in one of two states.
 *
 * - **catching up**: it reads rows from the log at its own pace (catch_up.ts);
 * - **live**: it is handed the frames the stream fans out after each commit,
 *   sending them while its socket is within its share of the send buffer and
 *   queueing the rest as references to the shared frames (live_queue.ts).
 *
 * Invariants:
 * - `next` is the first offset not yet handed to the socket; frames go out in
 *   offset order with no gap and no duplicate;
 * - a catching-up subscriber joins the live set in the same synchronous step
 *   in which it finds `next === log.endOffset` (no await between), so replay
 *   and live partition the stream exactly;
 * - a live subscriber's queue never holds more than `maxBacklog` frames: past
 *   that, on a durable stream it drops the queue and catches up from the log
 *   (its own disk reads, not server memory); on an ephemeral one it is closed
 *   with 4429;
 * - a socket that accepts nothing for `stallTimeoutMs` is closed with 4429;
 * - with a `where=` filter, the same holds for the rows it matches: every
 *   matching row below `next` was handed to the socket, none twice; `next`
 *   moves past rows that do not match (on replay and live alike).
 *
 * @module
 */

import type { Compression, FrameMode } from "../../wire/subscribe.ts";
import { CloseCode, encodeCloseReason } from "../../wire/close_reason.ts";
import type { Filter } from "../../wire/filter.ts";
import { LogEvictedError } from "../../log/mod.ts";
import type { SharedFrames } from "../frames/shared_frames.ts";
import { frameOffset, MAX_BATCH_ROWS } from "../frames/text_frames.ts";
import { type CatchingUp, catchUp, type CatchUpHost } from "./catch_up.ts";
import { DrainPoller } from "./drain_poller.ts";
import { livePieces, wholeCommit } from "./live_pieces.ts";
import { LiveQueue } from "./live_queue.ts";
import type { SendBudget } from "./send_budget.ts";
import type { Gate } from "./replay_gate.ts";
import type { Logger } from "../../common/logger.ts";
import { UNSERVED } from "./serving.ts";
import { CONNECTING, OPEN, type SessionSocket } from "../socket.ts";
import type { StreamMember, ZstdStreamGroup } from "./zstd_stream_group.ts";

/** What a subscriber needs from its stream: its log's reads and end, its live set, its counters. */
export interface SubscriberHost extends CatchUpHost {
  /** The stream name (for metrics and messages). */
  readonly name: string;
  /** Whether the stream has a log. */
  readonly durable: boolean;
  /** Adds the subscriber to the live set. */
  joinLive(sub: Subscriber): void;
  /** Removes it from the live set. */
  leaveLive(sub: Subscriber): void;
  /** Called once when the subscriber is gone. */
  gone(sub: Subscriber): void;
  /** Counts a drop by reason. */
  dropped(reason: string): void;
  /** Reports a failure that ends the subscriber (closed with 1011) to `logger`. */
  failed(err: unknown, logger: Logger): void;
  /**
   * The frames from `offset` to `end` (the log's durable end) when the
   * stream's recent commits hold them (recent_commits.ts); else null.
   */
  recent?(offset: number, end: number): readonly string[] | null;
}

/** The state of a subscriber. */
export type SubscriberState = "catching_up" | "live" | "closed";

/** Options of a subscriber. */
export interface SubscriberOptions {
  /** Frame mode. */
  frames: FrameMode;
  /** Most frames queued for a live subscriber. */
  maxBacklog: number;
  /** Close a socket that accepts nothing for this long. */
  stallTimeoutMs: number;
  /** The server's send buffer its socket shares (see send_budget.ts). */
  sendBudget: SendBudget;
  /** The server's replay gate its catch-up reads take turns through (null: none). @default null */
  gate?: Gate | null;
  /** Where its failure is reported (the server's logger). @default UNSERVED.logger */
  logger?: Logger;
  /**
   * The `where=` filter (the stream's shared instance for its key), or null:
   * every row. Catch-up keeps only the rows it matches; live frames arrive
   * already filtered.
   * @default null
   */
  filter?: Filter | null;
  /** compress=: every data frame one binary zstd frame (`zstd-dict`: with the dictionary). @default null */
  compress?: Compression | null;
  /**
   * snapshot=1: `[offset,row]` lines sent first, before the rows from its
   * first offset (they are rows below it: `next` does not move). @default null
   */
  snapshot?: readonly string[] | null;
}

const poller = new DrainPoller<Subscriber>();
// Subscribers constructed and not yet closed, in this process.
let open = 0;

/**
 * @internal What subscribers hold in this process's shared structures: those
 * not yet closed, and those the drain poller re-checks. Both return to 0 once
 * every subscriber is gone (tests/server/fanout/subscriber_leak_test.ts).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { _subscriberCounts } from "./subscriber.ts";
 * deepStrictEqual(_subscriberCounts(), { open: 0, polled: 0 });
 * ```
 */
export function _subscriberCounts(): { open: number; polled: number } {
  return { open, polled: poller.size };
}

/** One subscription on one socket. */
export class Subscriber implements CatchingUp, StreamMember {
  /** The socket. */
  readonly socket: SessionSocket;
  /** Frame mode. */
  readonly frames: FrameMode;
  /** The `where=` filter, or null. */
  readonly filter: Filter | null;
  /** compress=: the kind its data frames are compressed with (batch mode only), or null. */
  readonly compress: Compression | null;
  /** The send buffer its socket shares. */
  readonly sendBudget: SendBudget;
  /** The replay gate its catch-up reads take turns through (null: none). */
  readonly gate: Gate | null;
  /** First offset not yet handed to the socket (filtered: rows before it that match were sent). */
  next: number;
  /** compress=zstd-stream: the live group whose stream it reads (null while not live). */
  zstdGroup: ZstdStreamGroup | null = null;
  /** compress=zstd-stream: the group frame it is in (0: none; see zstd_stream_group.ts). */
  streamFrame = 0;
  readonly #host: SubscriberHost;
  readonly #logger: Logger;
  readonly #maxBacklog: number;
  readonly #stallTimeoutMs: number;
  // Batched text goes out in pieces; the other modes whole commits.
  readonly #pieces: boolean;
  #state: SubscriberState = "catching_up";
  readonly #queue = new LiveQueue();
  #blocked = false;
  #wake: (() => void) | null = null;
  #lastBuffered = 0;
  // What it handed its socket's `send` so far: a text's length, a binary frame's bytes.
  #handed = 0;
  // While live, an upper bound of the socket's `bufferedAmount` (bytes): the
  // last value read plus what was handed to `send` since (a text's UTF-8 is
  // at most three bytes a UTF-16 unit), as only this subscriber sends on
  // its socket then and the runtime only lowers it. A frame that fits under
  // the bound fits: no call into the runtime to read the real value.
  // Infinity: not known (read it).
  #bufferedAtMost = Infinity;
  #lastProgress = Date.now();
  // snapshot=1: the lines sent before the first offset (let go once sent).
  #snapshot: readonly string[] | null;

  /** A subscriber on `socket` whose first row is `next`. */
  constructor(socket: SessionSocket, host: SubscriberHost, next: number, opts: SubscriberOptions) {
    this.socket = socket;
    this.#host = host;
    this.next = next;
    this.frames = opts.frames;
    this.filter = opts.filter ?? null;
    this.compress = opts.compress ?? null;
    this.#pieces = this.frames === "batch" && this.compress === null;
    this.#maxBacklog = opts.maxBacklog;
    this.#stallTimeoutMs = opts.stallTimeoutMs;
    this.sendBudget = opts.sendBudget;
    this.gate = opts.gate ?? null;
    this.#logger = opts.logger ?? UNSERVED.logger;
    this.#snapshot = opts.snapshot ?? null;
    this.sendBudget.open(socket);
    open++;
  }

  /** The current state. */
  get state(): SubscriberState {
    return this.#state;
  }

  /** Whether it is catching up from the log. */
  get catchingUp(): boolean {
    return this.#state === "catching_up";
  }

  /** Frames queued and not yet handed to the socket. */
  get backlog(): number {
    return this.#queue.rows;
  }

  /**
   * Starts serving: catch up from the log when behind (or when a snapshot
   * goes first), else go live at once.
   */
  start(): void {
    if (this.#snapshot === null && (!this.#host.durable || this.next >= this.#host.endOffset())) {
      this.goLive();
    } else if (!this.#fromRecent()) this.#catchUp();
  }

  // A start a few rows behind, in text frames and with no filter: the rows
  // from the stream's recent commits, then live, in this one synchronous
  // step (so the rows sent and the live ones meet at the log's end, as a
  // catch-up's do). False when they are not held: it catches up from the log.
  #fromRecent(): boolean {
    if (
      this.#snapshot !== null || this.filter !== null || this.compress !== null ||
      this.frames === "arrow"
    ) return false;
    const end = this.#host.endOffset();
    const frames = this.#host.recent?.(this.next, end) ?? null;
    if (frames === null) return false;
    // At most RECENT_ROWS rows and RECENT_CHARS characters: one batched frame.
    if (this.frames === "batch") this.#sendText(frames.join("\n"));
    else for (let i = 0; i < frames.length; i++) this.#sendText(frames[i]);
    this.#host.count(0, 0, frames.length);
    this.next = end;
    this.goLive();
    return true;
  }

  /** Joins the live set (at the start, or from the step of a catch-up that reached the end). */
  goLive(): void {
    this.#state = "live";
    this.#bufferedAtMost = Infinity; // catch-up sent on the socket meanwhile
    this.#host.joinLive(this);
  }

  /** Bytes its socket may take now before reaching its share of the send buffer. */
  room(): number {
    return this.sendBudget.share() - this.socket.bufferedAmount;
  }

  /** Resolves once its socket is below its share again (or it is closed). */
  drained(): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
      this.#block(true);
    });
  }

  #catchUp(): void {
    const snapshot = this.#snapshot;
    this.#snapshot = null;
    catchUp(this, this.#host, snapshot).catch((err) => this.#fail(err));
  }

  /**
   * A commit's live frames, in offset order, ending before `end` (the offset
   * after the commit; null on an ephemeral stream). A filtered subscriber is
   * handed only the frames its filter matches (possibly none). `shared`
   * gives those frames joined with `\n`, as Arrow or as zstd, made once per
   * commit (and filter) and shared by every subscriber handed the same frames.
   * Returns what it handed its socket now (a text's length, a binary
   * frame's bytes; 0 when it queued or skipped them), which the fan-out
   * counts against its turn.
   */
  push(frames: readonly string[], end: number | null, shared: SharedFrames): number {
    const before = this.#handed;
    this.#push(frames, end, shared);
    return this.#handed - before;
  }

  #push(frames: readonly string[], end: number | null, shared: SharedFrames): void {
    // A paced commit (fanout_pacer.ts) this subscriber already read from the log is skipped.
    if (this.#state !== "live" || (end !== null && end <= this.next)) return;
    const q = this.#queue;
    if (frames.length === 0) {
      // Nothing matched: only the position moves (after what is queued).
      if (end !== null) q.rows > 0 ? (q.end = end) : (this.next = end);
      return;
    }
    if (this.#pieces) {
      this.#pushPieces(frames, end, shared);
      return;
    }
    if (q.rows === 0 && this.room() > 0) {
      if (this.frames === "arrow") this.#sendBinary(shared.arrow());
      else if (this.compress !== null) this.#sendBinary(this.#compressed(shared));
      else for (let i = 0; i < frames.length; i++) this.#sendText(frames[i]);
      if (end !== null) this.next = end;
      return;
    }
    if (q.rows + frames.length > this.#maxBacklog) {
      this.#overflow();
      return;
    }
    // A compressed commit is compressed now, once for every subscriber it is
    // queued for (a zstd-stream member's bytes are picked as it is sent).
    if (this.compress !== null && this.compress !== "zstd-stream") shared.zstd!(this.compress);
    q.add(wholeCommit(frames, end, shared));
    if (end !== null) q.end = end;
    this.#block();
  }

  // Batched text in pieces of the socket's share (see live_pieces.ts): each
  // piece goes out while it fits the share; the rest waits in the queue.
  #pushPieces(frames: readonly string[], end: number | null, shared: SharedFrames): void {
    const q = this.#queue;
    const pieces = livePieces(frames, end, shared, this.filter !== null, this.sendBudget.share());
    let k = 0;
    if (q.rows === 0) {
      while (k < pieces.length && this.#fits(pieces[k].chars)) {
        this.#sendText(pieces[k].text);
        if (pieces[k].end !== null) this.next = pieces[k].end!;
        k++;
      }
      if (k === pieces.length) return;
    }
    let rows = 0;
    for (let i = k; i < pieces.length; i++) rows += pieces[i].to - pieces[i].from;
    if (q.rows + rows > this.#maxBacklog) {
      this.#overflow();
      return;
    }
    for (let i = k; i < pieces.length; i++) q.add(pieces[i]);
    if (end !== null) q.end = end;
    this.#block(true);
  }

  // Whether `chars` more fit the socket's share (an idle socket takes any one
  // frame): at once when they fit under the bound of what it holds, else by
  // what it holds now.
  #fits(chars: number): boolean {
    const share = this.sendBudget.share();
    if (this.#bufferedAtMost + chars <= share) return true;
    const buffered = this.socket.bufferedAmount;
    this.#bufferedAtMost = buffered;
    return buffered === 0 || buffered + chars <= share;
  }

  // Sends queued frames while the socket has room; `next` follows the last one sent.
  #drain(): void {
    const q = this.#queue;
    while (q.rows > 0) {
      const buffered = this.#bufferedAtMost = this.socket.bufferedAmount;
      const room = this.sendBudget.share() - buffered;
      if (this.#pieces) {
        if (!this.#drainText(buffered, room)) break;
        continue;
      }
      if (room <= 0) break;
      if (this.compress !== null) {
        // A queued commit's zstd frame, compressed once for everyone.
        const run = q.takeRun();
        this.#sendBinary(this.#compressed(run.shared!));
        this.#sent(run.to - run.from, run.frames[run.to - 1]);
        continue;
      }
      const out = q.takeFrames(MAX_BATCH_ROWS, Infinity, true);
      if (this.frames === "arrow") this.#sendBinary(this.#host.arrowEncoder().encodeFrames(out));
      else for (let i = 0; i < out.length; i++) this.#sendText(out[i]);
      this.#sent(out.length, out[out.length - 1]);
    }
  }

  // One batched frame of queued text: the head piece as its shared text when
  // it alone is what fits (no copy); else up to MAX_BATCH_ROWS frames within
  // the room, joined (a copy no bigger than the room). False: nothing fits.
  #drainText(buffered: number, room: number): boolean {
    if (buffered > 0 && room <= 0) return false;
    const q = this.#queue;
    const head = q.head!;
    const second = q.second;
    const rows = head.to - head.from;
    const more = second !== undefined && rows < MAX_BATCH_ROWS &&
      head.chars + 1 + second.frames[second.from].length <= room;
    if (
      q.at === head.from && !more && rows <= MAX_BATCH_ROWS &&
      (buffered === 0 || head.chars <= room)
    ) {
      q.takeRun();
      this.#sendText(head.text);
      this.#sent(rows, head.frames[head.to - 1]);
      return true;
    }
    const out = q.takeFrames(MAX_BATCH_ROWS, room, buffered === 0);
    if (out.length === 0) return false;
    this.#sendText(out.length === 1 ? out[0] : out.join("\n"));
    this.#sent(out.length, out[out.length - 1]);
    return true;
  }

  // The bytes of a commit's compressed frames for this subscriber: the kind's
  // shared zstd frame; for zstd-stream, the group's message or the commit's
  // self-contained frame (zstd_stream_group.ts), picked in send order.
  #compressed(shared: SharedFrames): Uint8Array {
    if (this.compress !== "zstd-stream") return shared.zstd!(this.compress!);
    const group = this.zstdGroup;
    return group !== null ? group.bytesFor(this, shared) : shared.zstd!("zstd-stream");
  }

  // `next` after `rows` more queued frames sent, the last of them `last`.
  #sent(rows: number, last: string): void {
    if (!this.#host.durable) return;
    // Filtered frames skip offsets: the next one is after the last sent.
    this.next = this.#queue.rows === 0
      ? this.#queue.end
      : this.filter
      ? frameOffset(last) + 1
      : this.next + rows;
  }

  #sendText(text: string): void {
    this.#handed += text.length;
    this.#bufferedAtMost += 3 * text.length;
    this.socket.send(text);
    this.#host.count(1, text.length, 0);
  }

  #sendBinary(bytes: Uint8Array): void {
    this.#handed += bytes.byteLength;
    this.#bufferedAtMost += bytes.byteLength;
    this.socket.send(bytes as Uint8Array<ArrayBuffer>);
    this.#host.count(1, bytes.byteLength, 0);
  }

  // A live subscriber fell maxBacklog frames behind.
  #overflow(): void {
    if (!this.#host.durable) {
      this.#host.dropped("backlog");
      this.close(CloseCode.TooSlow, encodeCloseReason({ error: "too_slow", resume: null }));
      return;
    }
    this.#host.dropped("to_catch_up");
    this._fromLog();
  }

  /**
   * @internal A live subscriber goes back to the log from the first offset not
   * handed to its socket (its backlog overflowed, or the log's next offset
   * moved with no commit: a mirror adopted chunks past its end).
   */
  _fromLog(): void {
    if (this.#state !== "live" || !this.#host.durable) return;
    this.#host.leaveLive(this);
    this.#queue.clear();
    this.#state = "catching_up";
    this.#catchUp();
  }

  // `quick`: re-checked soon (see DrainPoller).
  #block(quick = false): void {
    if (this.#blocked) return;
    this.#blocked = true;
    this.#lastBuffered = this.socket.bufferedAmount;
    this.#lastProgress = Date.now();
    poller.add(this, quick);
  }

  /** @internal Called by the poller; returns whether it is still blocked. */
  _poll(now: number): boolean {
    if (this.#state === "closed") return (this.#blocked = false);
    const buffered = this.#bufferedAtMost = this.socket.bufferedAmount;
    if (buffered < this.#lastBuffered || buffered === 0) this.#lastProgress = now;
    this.#lastBuffered = buffered;
    // Full: not even the next queued frame of batched text fits the share
    // (what does fit goes out now, joined within the room).
    const head = this.#queue.head;
    const full = buffered >= this.sendBudget.share() ||
      (this.#pieces && head !== undefined && !this.#fits(head.frames[this.#queue.at].length));
    if (full) {
      if (now - this.#lastProgress >= this.#stallTimeoutMs) {
        this.#host.dropped("stalled");
        this.close(
          CloseCode.TooSlow,
          encodeCloseReason({ error: "too_slow", resume: this.#host.durable ? this.next : null }),
        );
        return (this.#blocked = false);
      }
      return true;
    }
    if (this.#state === "live") this.#drain();
    if (this.#wake) {
      const w = this.#wake;
      this.#wake = null;
      w();
    }
    const still = this.#state === "live" && this.backlog > 0;
    this.#blocked = still;
    return still;
  }

  #fail(err: unknown): void {
    if (err instanceof LogEvictedError) {
      // Retention dropped rows this subscriber had not read yet.
      this.#host.dropped("evicted");
      this.close(
        CloseCode.TooSlow,
        encodeCloseReason({ error: "too_slow", resume: this.next, earliest: err.earliest }),
      );
      return;
    }
    // The details (file paths, say) stay in the server's log, not the client's.
    this.#host.failed(err, this.#logger);
    this.close(
      CloseCode.InternalError,
      encodeCloseReason({ error: "internal", detail: "reading the log failed" }),
    );
  }

  /** Closes the socket with `code` and `reason` and forgets the subscriber. */
  close(code?: number, reason?: string): void {
    if (this.#state !== "closed") {
      const wasLive = this.#state === "live";
      this.#state = "closed";
      if (wasLive) this.#host.leaveLive(this);
      this.#queue.clear();
      poller.delete(this);
      this.#wake?.();
      this.#wake = null;
      this.#host.gone(this);
      this.sendBudget.close(this.socket);
      open--;
    }
    try {
      if (
        this.socket.readyState === OPEN || this.socket.readyState === CONNECTING
      ) {
        this.socket.close(code, reason);
      }
    } catch {
      // The socket is already going away; nothing left to tell it.
    }
  }
}
