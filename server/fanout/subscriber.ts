/**
 * A subscriber: one WebSocket reading one stream, in one of two states.
 *
 * - **catching up**: it reads rows from the log at its own pace, sending them
 *   only while the socket's buffer is below a high-water mark;
 * - **live**: it receives the frames the stream fans out after each commit.
 *
 * Invariants:
 * - `next` is the first offset not yet handed to the socket; frames go out in
 *   offset order with no gap and no duplicate;
 * - a catching-up subscriber joins the live set in the same synchronous step in
 *   which it finds `next === log.endOffset` (no await between), so replay and
 *   live partition the stream exactly;
 * - a live subscriber's queue never holds more than `maxBacklog` frames: past
 *   that, on a durable stream it drops the queue and catches up from the log
 *   (its own disk reads, not server memory); on an ephemeral one it is closed
 *   with 4429;
 * - a socket that accepts nothing for `stallTimeoutMs` is closed with 4429.
 * - with a `where=` filter, the same holds for the rows it matches: every
 *   matching row below `next` was handed to the socket, none twice; `next`
 *   moves past rows that do not match (on replay and live alike), so a
 *   subscriber that matches nothing for long still reaches the live set.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import { CloseCode, encodeCloseReason, type FrameMode } from "../../client/wire.ts";
import { LogEvictedError, type RecordBatch } from "../../log/mod.ts";
import { MAX_BATCH_ROWS, renderBatch } from "../frames/text_frames.ts";
import type { Filter } from "../../client/filter.ts";
import { FRAME_COST, Pacer } from "./catch_up_pacer.ts";
import { filterBatch, frameOffset } from "./filtered_frames.ts";
import { DrainPoller } from "./drain_poller.ts";
import { SendBudget } from "../limits.ts";
import { type LivePiece, livePieces, livePolicy } from "./live_pieces.ts";
import type { Compression } from "../../client/wire.ts";

export type { SharedFrames } from "../frames/shared_frames.ts";
import type { SharedFrames } from "../frames/shared_frames.ts";

/**
 * The send buffer of subscribers whose stream is not served by a server with
 * its own (`ServeOptions.sendBufferBytes`): the default size.
 */
const processBudget = new SendBudget();
/** Most bytes read from the log per catch-up step. */
export const CATCH_UP_READ_BYTES = 512 * 1024;
/** Fewest bytes read per catch-up step (when the socket has less room than that). */
export const MIN_CATCH_UP_READ_BYTES = 16 * 1024;
/** Most bytes of frames sent in one slice of a catch-up. */
const SLICE_BYTES = 256 * 1024;
/** Most single frames sent in one slice of a catch-up. */
const SLICE_FRAMES = 256;
/** The event loop's share for catching-up subscribers (per process). */
const catchUpPacer = new Pacer();

export type { ReplayReader } from "./subscriber_host.ts";
import type { ReplayReader, SubscriberHost as Host } from "./subscriber_host.ts";
/** What a subscriber needs from its stream (see server/fanout/subscriber_host.ts). */
export type SubscriberHost = Host<Subscriber>;

/** The state of a subscriber. */
export type SubscriberState = "catching_up" | "live" | "closed";

const poller = new DrainPoller<Subscriber>();
// Subscribers constructed and not yet closed, in this process.
let open = 0;

/**
 * @internal What subscribers hold in this process's shared structures: those
 * not yet closed, and those the drain poller re-checks. Both return to 0 once
 * every subscriber is gone (tests/server/subscriber_leak_test.ts).
 *
 * @example
 * ```ts
 * import { _subscriberCounts } from "./subscriber.ts";
 * console.log(_subscriberCounts()); // { open: 0, polled: 0 }
 * ```
 */
export function _subscriberCounts(): { open: number; polled: number } {
  return { open, polled: poller.size };
}

/** Options of a subscriber. */
export interface SubscriberOptions {
  /** Frame mode. */
  frames: FrameMode;
  /** Most frames queued for a live subscriber. */
  maxBacklog: number;
  /** Close a socket that accepts nothing for this long. */
  stallTimeoutMs: number;
  /**
   * The `where=` filter (the stream's shared instance for its key), or null:
   * every row. Catch-up keeps only the rows it matches; live frames arrive
   * already filtered.
   * @default null
   */
  filter?: Filter | null;
  /**
   * The server's send buffer, shared out between its sockets (see
   * server/limits.ts). @default one per process of the default size
   */
  sendBudget?: SendBudget;
  /** compress= (§16): every data frame one binary zstd frame (`zstd-dict`: with the dictionary). */
  compress?: Compression | null;
}

/** One subscription on one socket. */
export class Subscriber {
  /** The socket. */
  readonly socket: WebSocket;
  /** Frame mode. */
  readonly frames: FrameMode;
  /** The `where=` filter, or null. */
  readonly filter: Filter | null;
  /** compress= (§16): true when data frames go out as zstd (batch mode only). */
  readonly zstd: boolean;
  /** First offset not yet handed to the socket (filtered: rows before it that match were sent). */
  next: number;
  readonly #host: SubscriberHost;
  readonly #opts: SubscriberOptions;
  #state: SubscriberState;
  #queue: string[] = [];
  #queueHead = 0;
  // compress= (§16): a zstd subscriber's queued commits as the bytes compressed
  // once for everyone, each with how many queued frames it holds (together:
  // the backlog), so a drain sends them rather than compressing again.
  #zq: { bytes: Uint8Array; frames: number }[] = [];
  #zqHead = 0;
  // The offset after the last commit queued (durable streams).
  #queueEnd = 0;
  #blocked = false;
  #wake: (() => void) | null = null;
  #lastBuffered = 0;
  #lastProgress = Date.now();
  readonly #budget: SendBudget;
  // Batched live pieces (shared strings) not yet handed to the socket, and their rows.
  #pieces: LivePiece[] = [];
  #piecesHead = 0;
  // The next frame of the head piece (an index into its frames).
  #pieceAt = 0;
  #pieceRows = 0;

  /** A subscriber on `socket` whose first row is `next`. */
  constructor(socket: WebSocket, host: SubscriberHost, next: number, opts: SubscriberOptions) {
    this.socket = socket;
    this.#host = host;
    this.next = next;
    this.frames = opts.frames;
    this.filter = opts.filter ?? null;
    this.zstd = opts.compress === "zstd" || opts.compress === "zstd-dict";
    this.#opts = opts;
    this.#state = "catching_up";
    this.#budget = opts.sendBudget ?? processBudget;
    this.#budget.open(socket);
    open++;
  }

  /** The send buffer its socket shares (see server/limits.ts). */
  get sendBudget(): SendBudget {
    return this.#budget;
  }

  /** The current state. */
  get state(): SubscriberState {
    return this.#state;
  }

  /** Frames queued and not yet handed to the socket. */
  get backlog(): number {
    return this.#queue.length - this.#queueHead + this.#pieceRows;
  }

  /** Starts serving: catch up from the log when behind, else go live at once. */
  start(): void {
    if (!this.#host.durable || this.next >= this.#host.endOffset()) this.#goLive();
    else this.#catchUp().catch((err) => this.#fail(err));
  }

  #goLive(): void {
    this.#state = "live";
    this.#host.joinLive(this);
  }

  /**
   * A commit's live frames, in offset order, ending before `end` (the offset
   * after the commit; null on an ephemeral stream). A filtered subscriber is
   * handed only the frames its filter matches (possibly none). `shared`
   * gives those frames joined with `\n` or as Arrow, computed once per
   * commit (and filter) and shared by every subscriber handed the same frames.
   */
  push(frames: readonly string[], end: number | null, shared: SharedFrames): void {
    // A paced commit (fanout_pacer.ts) this subscriber already read from the log is skipped.
    if (this.#state !== "live" || (end !== null && end <= this.next)) return;
    // compress= (§16): a zstd subscriber gets each commit's one shared
    // compressed frame (below), never text pieces.
    if (this.frames === "batch" && !this.zstd && this.#pieced(shared)) {
      this.#pushPieces(frames, end, shared);
      return;
    }
    const n = frames.length;
    // Batched text within the socket's share (an idle socket takes any one frame; SPEC §3.4.1).
    const room = this.frames === "batch" && !this.zstd && livePolicy.withinShare
      ? this.#fits(n > 1 ? shared.joined().length : n === 1 ? frames[0].length : 0)
      : this.socket.bufferedAmount < this.#budget.share();
    if (this.backlog === 0 && room) {
      if (n === 0) {
        // Nothing matched: only the position moves.
      } else if (this.frames === "arrow") this.#sendBinary(shared.arrow());
      else if (this.zstd) this.#sendBinary(shared.zstd!(this.#opts.compress!)); // §16: shared
      else if (this.frames === "batch" && n > 1) this.#sendText(shared.joined());
      else for (let i = 0; i < n; i++) this.#sendText(frames[i]);
      if (end !== null) this.next = end;
      return;
    }
    if (this.backlog + n > this.#opts.maxBacklog) {
      this.#overflow();
      return;
    }
    for (let i = 0; i < n; i++) this.#queue.push(frames[i]);
    if (this.zstd && n > 0) this.#zq.push({ bytes: shared.zstd!(this.#opts.compress!), frames: n });
    if (end !== null) this.#queueEnd = end;
    if (this.backlog === 0) {
      if (end !== null) this.next = end;
      return;
    }
    this.#block();
  }

  // Batched live frames in pieces (see live_pieces.ts): each piece goes out
  // while it fits the socket's share of the send buffer; the rest waits as
  // references to the shared pieces (or, with the `cursor` policy, the
  // subscriber goes back to the log from `next`), never as copies.
  #pushPieces(frames: readonly string[], end: number | null, shared: SharedFrames): void {
    const n = frames.length;
    const queued = this.#piecesHead < this.#pieces.length;
    if (n === 0) {
      // Nothing matched: only the position moves (after what is queued).
      if (end !== null) queued ? (this.#queueEnd = end) : (this.next = end);
      return;
    }
    const size = livePolicy.pieceBytes || this.#budget.share();
    const pieces = livePieces(frames, end, shared.joined, shared, this.filter !== null, size);
    let k = 0;
    if (!queued) {
      while (k < pieces.length && this.#fits(pieces[k].chars)) {
        this.#sendText(pieces[k].text);
        if (pieces[k].end !== null) this.next = pieces[k].end!;
        k++;
      }
      if (k === pieces.length) return;
      if (livePolicy.fallBehind === "cursor" && this.#host.durable) {
        this.#overflow();
        return;
      }
    }
    let rows = 0;
    for (let i = k; i < pieces.length; i++) rows += pieces[i].to - pieces[i].from;
    if (this.#pieceRows + rows > this.#opts.maxBacklog) {
      this.#overflow();
      return;
    }
    if (!queued) this.#pieceAt = pieces[k].from;
    for (let i = k; i < pieces.length; i++) this.#pieces.push(pieces[i]);
    this.#pieceRows += rows;
    if (end !== null) this.#queueEnd = end;
    this.#block(true);
  }

  // Whether a batched commit goes out in pieces: always with a piece size,
  // never with Infinity; with 0, when it is bigger than the socket's share (a
  // large fan-out). Whatever is queued decides, so frames keep their order.
  #pieced(shared: SharedFrames): boolean {
    if (this.#piecesHead < this.#pieces.length) return true;
    const size = livePolicy.pieceBytes;
    if (size === Infinity || this.#queueHead < this.#queue.length) return false;
    return size > 0 || shared.joined().length > this.#budget.share();
  }

  // Whether `bytes` more fit the socket's share (an idle socket takes any one frame).
  #fits(bytes: number): boolean {
    const buffered = this.socket.bufferedAmount;
    return buffered === 0 || buffered + bytes <= this.#budget.share();
  }

  // Sends queued frames while the socket has room: a piece that alone is
  // what fits as its shared text (no copy); else up to MAX_BATCH_ROWS frames
  // within the room, joined (a copy no bigger than the room). `next` follows
  // the last frame sent.
  #drainPieces(): void {
    const q = this.#pieces;
    while (this.#piecesHead < q.length) {
      const buffered = this.socket.bufferedAmount;
      const room = this.#budget.share() - buffered;
      if (buffered > 0 && room <= 0) break;
      const head = q[this.#piecesHead];
      const after = q[this.#piecesHead + 1];
      const rows = head.to - head.from;
      const more = after !== undefined && rows < MAX_BATCH_ROWS &&
        head.chars + 1 + after.frames[after.from].length <= room;
      if (
        this.#pieceAt === head.from && !more && rows <= MAX_BATCH_ROWS &&
        (buffered === 0 || head.chars <= room)
      ) {
        this.#sendText(head.text);
        this.#pieceRows -= rows;
        this.#nextPiece();
        this.#moveNext(rows, head.frames[head.to - 1]);
        continue;
      }
      const out: string[] = [];
      let chars = -1;
      let last = "";
      while (this.#piecesHead < q.length && out.length < MAX_BATCH_ROWS) {
        const p = q[this.#piecesHead];
        const f = p.frames[this.#pieceAt];
        if (chars + f.length + 1 > room && !(out.length === 0 && buffered === 0)) break;
        out.push(last = f);
        chars += f.length + 1;
        if (++this.#pieceAt === p.to) this.#nextPiece();
      }
      if (out.length === 0) break;
      this.#sendText(out.length === 1 ? out[0] : out.join("\n"));
      this.#pieceRows -= out.length;
      this.#moveNext(out.length, last);
    }
    if (this.#piecesHead === q.length) this.#clearPieces();
  }

  // On to the next queued piece, at its first frame.
  #nextPiece(): void {
    this.#piecesHead++;
    const p = this.#pieces[this.#piecesHead];
    if (p !== undefined) this.#pieceAt = p.from;
  }

  // `next` after `rows` more frames sent, the last of them `last`.
  #moveNext(rows: number, last: string): void {
    if (!this.#host.durable) return;
    this.next = this.#piecesHead === this.#pieces.length
      ? this.#queueEnd
      : this.filter
      ? frameOffset(last) + 1
      : this.next + rows;
  }

  #clearPieces(): void {
    this.#pieces = [];
    this.#piecesHead = 0;
    this.#pieceAt = 0;
    this.#pieceRows = 0;
  }

  #sendText(text: string): void {
    this.socket.send(text);
    this.#host.count(1, text.length, 0);
  }

  #sendBinary(bytes: Uint8Array, replayRows = 0): void {
    this.socket.send(bytes as Uint8Array<ArrayBuffer>);
    this.#host.count(1, bytes.byteLength, replayRows);
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
   * moved with no commit: a follower adopted chunks past its end).
   */
  _fromLog(): void {
    if (this.#state !== "live" || !this.#host.durable) return;
    this.#host.leaveLive(this);
    this.#queue = [];
    this.#queueHead = 0;
    this.#clearPieces();
    this.#zq = []; // compress= (§16)
    this.#zqHead = 0;
    this.#state = "catching_up";
    this.#catchUp().catch((err) => this.#fail(err));
  }

  // `quick`: a catching-up subscriber, re-checked soon (see DrainPoller).
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
    const buffered = this.socket.bufferedAmount;
    if (buffered < this.#lastBuffered || buffered === 0) this.#lastProgress = now;
    this.#lastBuffered = buffered;
    const full = buffered >= this.#budget.share() ||
      (this.#piecesHead < this.#pieces.length &&
        !this.#fits(this.#pieces[this.#piecesHead].text.length));
    if (full) {
      if (now - this.#lastProgress >= this.#opts.stallTimeoutMs) {
        this.#host.dropped("stalled");
        this.close(
          CloseCode.TooSlow,
          encodeCloseReason({ error: "too_slow", resume: this.#host.durable ? this.next : null }),
        );
        return (this.#blocked = false);
      }
      return true;
    }
    if (this.#state === "live") {
      this.#drainQueue();
      this.#drainPieces();
    }
    if (this.#wake) {
      const w = this.#wake;
      this.#wake = null;
      w();
    }
    const still = this.#state === "live" && this.backlog > 0;
    this.#blocked = still;
    return still;
  }

  #drainQueue(): void {
    const q = this.#queue;
    while (this.#queueHead < q.length && this.socket.bufferedAmount < this.#budget.share()) {
      const z = this.zstd ? this.#zq[this.#zqHead++] : null; // compress= (§16): a queued commit
      let take = z ? z.frames : Math.min(q.length - this.#queueHead, MAX_BATCH_ROWS);
      if (!z && this.frames === "batch" && livePolicy.withinShare) take = this.#roomRows(take);
      if (z) this.#sendBinary(z.bytes);
      else if (this.frames === "arrow") {
        const frames = q.slice(this.#queueHead, this.#queueHead + take);
        this.#sendBinary(this.#host.arrowEncoder().encodeFrames(frames));
      } else if (this.frames === "batch") {
        const text = q.slice(this.#queueHead, this.#queueHead + take).join("\n");
        this.#sendText(text);
      } else {
        for (let i = 0; i < take; i++) this.#sendText(q[this.#queueHead + i]);
      }
      this.#queueHead += take;
      if (this.#host.durable) {
        // Filtered frames skip offsets: the next one is after the last sent.
        this.next = this.#queueHead === q.length
          ? this.#queueEnd
          : this.filter
          ? frameOffset(q[this.#queueHead - 1]) + 1
          : this.next + take;
      }
    }
    if (this.#queueHead === q.length) {
      if (this.#host.durable && q.length > 0) this.next = this.#queueEnd;
      this.#queue = [];
      this.#queueHead = 0;
      this.#zq = []; // compress= (§16)
      this.#zqHead = 0;
    } else if (this.#queueHead > 65536) {
      this.#queue = q.slice(this.#queueHead);
      this.#queueHead = 0;
      this.#zq = this.#zq.slice(this.#zqHead); // compress= (§16)
      this.#zqHead = 0;
    }
  }

  // How many of the next `most` queued frames fit the socket's room (at least one).
  #roomRows(most: number): number {
    const q = this.#queue;
    const room = this.#budget.share() - this.socket.bufferedAmount;
    let k = 0;
    for (let chars = -1; k < most; k++) {
      chars += q[this.#queueHead + k].length + 1;
      if (k > 0 && chars > room) break;
    }
    return k;
  }

  // Waits until the socket's buffer is below the high-water mark.
  #drained(): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
      this.#block(true);
    });
  }

  async #catchUp(): Promise<void> {
    const host = this.#host;
    let reader: ReplayReader | null = host.reader(this.next);
    let empty = 0;
    try {
      while (this.#state === "catching_up") {
        if (this.socket.bufferedAmount >= this.#budget.share()) {
          await this.#drained();
          continue;
        }
        if (this.next >= host.endOffset()) {
          // Caught up: join the live set in this same synchronous step.
          reader.close();
          reader = null;
          this.#goLive();
          return;
        }
        // Read about what the socket has room for: what a blocked socket
        // holds stays near its high-water mark, however long it stalls.
        const room = this.#budget.share() - this.socket.bufferedAmount;
        const batch = await reader.read(
          Math.max(MIN_CATCH_UP_READ_BYTES, Math.min(CATCH_UP_READ_BYTES, room)),
        );
        if (this.#state !== "catching_up") return;
        if (batch.count === 0) {
          // Nothing more below the end (a fenced gap was skipped).
          this.next = Math.max(this.next, Math.min(reader.offset, host.endOffset()));
          if (this.next < host.endOffset()) {
            // The reader found nothing although rows lie below the end: a
            // commit racing the read. Never spin on it for long.
            if (++empty > 1000) {
              throw new Error(`log reader stuck at ${this.next} below ${host.endOffset()}`);
            }
            await new Promise((r) => empty > 100 ? setTimeout(r, 10) : setImmediate(r));
          }
          continue;
        }
        empty = 0;
        if (this.filter) {
          if (!(await this.#sendFiltered(batch))) return;
          continue;
        }
        // Sent in slices, each in its turn (see pacer.ts): replaying
        // subscribers share the event loop with live rows and new connections.
        for (let i = 0; i < batch.count;) {
          await catchUpPacer.turn();
          let cost = 0;
          try {
            if (this.#state !== "catching_up") return;
            const rows = this.#sendSlice(batch, i);
            cost = rows.cost;
            i += rows.rows;
            this.next = batch.offsets[i - 1] + 1;
          } finally {
            catchUpPacer.spend(cost);
          }
        }
      }
    } finally {
      reader?.close();
    }
  }

  // Sends the rows of a replayed batch that the filter matches, in slices
  // (each in its turn, like unfiltered ones), and moves `next` past the batch
  // even when none matched: a reader that matches nothing for long still
  // advances and reaches the live set. Returns false when it stopped catching up.
  async #sendFiltered(batch: RecordBatch): Promise<boolean> {
    let lines: string[] = [];
    await catchUpPacer.turn();
    let cost = 0;
    try {
      if (this.#state !== "catching_up") return false;
      const r = filterBatch(batch, this.filter!);
      lines = r.lines;
      cost = r.cost;
    } finally {
      catchUpPacer.spend(cost);
    }
    const after = batch.offsets[batch.count - 1] + 1;
    for (let i = 0; i < lines.length;) {
      await catchUpPacer.turn();
      cost = 0;
      try {
        if (this.#state !== "catching_up") return false;
        const sent = this.#sendLines(lines, i);
        cost = sent.cost;
        i += sent.rows;
        this.next = frameOffset(lines[i - 1]) + 1;
      } finally {
        catchUpPacer.spend(cost);
      }
    }
    if (this.#state !== "catching_up") return false;
    this.next = Math.max(this.next, after);
    return true;
  }

  // Sends frames from `i` of filtered replay lines, one slice: rows sent and their cost.
  #sendLines(lines: readonly string[], i: number): { rows: number; cost: number } {
    const host = this.#host;
    const maxRows = this.frames === "single" ? SLICE_FRAMES : MAX_BATCH_ROWS;
    let end = i;
    let bytes = 0;
    while (end < lines.length && end - i < maxRows && (bytes === 0 || bytes < SLICE_BYTES)) {
      bytes += lines[end++].length + 1;
    }
    if (this.frames === "arrow") {
      const out = host.arrowEncoder().encodeFrames(lines.slice(i, end));
      this.#sendBinary(out, end - i);
      return { rows: end - i, cost: out.byteLength + FRAME_COST };
    }
    if (this.frames === "batch") {
      const text = end - i === 1 ? lines[i] : lines.slice(i, end).join("\n");
      if (this.zstd) return this.#sendZstd(text, end - i); // compress= (§16)
      this.socket.send(text);
      host.count(1, text.length, end - i);
      return { rows: end - i, cost: text.length + FRAME_COST };
    }
    for (let k = i; k < end; k++) this.socket.send(lines[k]);
    host.count(end - i, bytes - (end - i), end - i);
    return { rows: end - i, cost: bytes + (end - i) * FRAME_COST };
  }

  // Sends records from `i` of a replayed batch, one slice: rows sent and their cost.
  #sendSlice(batch: RecordBatch, i: number): { rows: number; cost: number } {
    const host = this.#host;
    if (this.frames === "arrow") {
      const n = Math.min(MAX_BATCH_ROWS, batch.count - i);
      const bytes = host.arrowEncoder().encodeRecords(batch, i, n);
      this.#sendBinary(bytes, n);
      return { rows: n, cost: bytes.byteLength + FRAME_COST };
    }
    if (this.frames === "batch") {
      const { text, rows } = renderBatch(batch, i, MAX_BATCH_ROWS, SLICE_BYTES);
      if (this.zstd) return this.#sendZstd(text, rows); // compress= (§16)
      this.socket.send(text);
      host.count(1, text.length, rows);
      return { rows, cost: text.length + FRAME_COST };
    }
    const { text, rows } = renderBatch(batch, i, SLICE_FRAMES, SLICE_BYTES);
    // Frame text never holds a raw newline (JSON escapes it).
    for (const frame of text.split("\n")) this.socket.send(frame);
    host.count(rows, text.length - rows + 1, rows);
    return { rows, cost: text.length + rows * FRAME_COST };
  }

  // compress= (§16): a replayed slice as one zstd frame, compressed once for this read.
  #sendZstd(text: string, rows: number): { rows: number; cost: number } {
    const bytes = this.#host.compress!(text, this.#opts.compress!);
    this.#sendBinary(bytes, rows);
    return { rows, cost: text.length + FRAME_COST };
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
    this.#host.failed(err);
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
      this.#queue = [];
      this.#queueHead = 0;
      this.#clearPieces();
      this.#zq = []; // compress= (§16)
      this.#zqHead = 0;
      poller.delete(this);
      this.#wake?.();
      this.#wake = null;
      this.#host.gone(this);
      this.#budget.close(this.socket);
      open--;
    }
    try {
      if (
        this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING
      ) {
        this.socket.close(code, reason);
      }
    } catch {
      // The socket is already going away; nothing left to tell it.
    }
  }
}
