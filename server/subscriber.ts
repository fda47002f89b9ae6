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

import { clearImmediate, setImmediate } from "node:timers";
import { CloseCode, encodeCloseReason, type FrameMode } from "../client/wire.ts";
import { LogEvictedError, type RecordBatch } from "../log/mod.ts";
import { MAX_BATCH_ROWS, renderBatch } from "./frames.ts";
import type { ArrowFrameEncoder } from "../arrow/frame_encoder.ts";
import type { Filter } from "../client/filter.ts";
import { FRAME_COST, Pacer } from "./pacer.ts";
import { filterBatch, frameOffset } from "./filtered_frames.ts";
import type { Compression } from "../client/wire.ts";

/** A commit's frames, encoded at most once per mode and shared by every subscriber. */
export interface SharedFrames {
  /** The frames joined with `\n` (batch mode). */
  joined(): string;
  /** One Arrow record batch message (arrow mode). */
  arrow(): Uint8Array;
  /**
   * compress=zstd (§16): the joined frames as one zstd frame, compressed once
   * per commit (optional so that hosts without compressed subscribers need not give it).
   */
  zstd?(): Uint8Array;
}

/** Socket buffer (bytes) above which nothing more is handed to it. */
export const HIGH_WATER_BYTES = 1 << 20;
/** Smallest per-socket budget when many subscribers share the process budget. */
export const MIN_HIGH_WATER_BYTES = 64 * 1024;
/**
 * Bytes all sockets of a process may hold unsent together (each socket gets
 * an equal share, between 64 KiB and 1 MiB): Deno copies every frame into its
 * socket's buffer, so a per-socket bound alone lets 1000 stalled readers hold
 * a gigabyte.
 */
export const PROCESS_SEND_BUDGET_BYTES = 64 << 20;

let sockets = 0;

/** The per-socket high-water mark for the number of sockets now open. */
export function highWaterBytes(): number {
  const share = Math.floor(PROCESS_SEND_BUDGET_BYTES / Math.max(1, sockets));
  return Math.max(MIN_HIGH_WATER_BYTES, Math.min(HIGH_WATER_BYTES, share));
}
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

/** The reads of a catching-up subscriber: a `LogReader`, or a wrapper around one. */
export interface ReplayReader {
  /** The next offset the reader will return (or the first after it). */
  readonly offset: number;
  /** Reads the next rows, about `maxBytes` of them. */
  read(maxBytes: number): Promise<RecordBatch>;
  /** Lets the reader go. */
  close(): void;
}

/** What a subscriber needs from its stream. */
export interface SubscriberHost {
  /** The stream name (for metrics and messages). */
  readonly name: string;
  /** Whether the stream has a log. */
  readonly durable: boolean;
  /** Durable end of the log. */
  endOffset(): number;
  /** Opens a log reader at `offset`. */
  reader(offset: number): ReplayReader;
  /** Adds the subscriber to the live set. */
  joinLive(sub: Subscriber): void;
  /** Removes it from the live set. */
  leaveLive(sub: Subscriber): void;
  /** Called once when the subscriber is gone. */
  gone(sub: Subscriber): void;
  /** Counts frames and bytes sent, and replayed rows. */
  count(frames: number, bytes: number, replayRows: number): void;
  /** Counts a drop by reason. */
  dropped(reason: string): void;
  /** Reports a failure that ends the subscriber (closed with 1011). */
  failed(err: unknown): void;
  /** The stream's Arrow frame encoder (only asked for by arrow subscribers). */
  arrowEncoder(): ArrowFrameEncoder;
  /**
   * compress=zstd (§16): one zstd frame of the text of a catching-up
   * subscriber's slice, counted (optional, like {@linkcode SharedFrames.zstd}).
   */
  compress?(text: string): Uint8Array;
}

/** The state of a subscriber. */
export type SubscriberState = "catching_up" | "live" | "closed";

/** Interval (ms) of the slow poll of blocked sockets. */
const SLOW_POLL_MS = 5;
/** Quick re-checks of a catching-up socket before it joins the slow poll. */
const QUICK_CHECKS = 4;
/** Delay (ms) between quick re-checks after the first (which is immediate). */
const QUICK_POLL_MS = 1;

/**
 * Re-polls blocked sockets (Deno's WebSocket has no drain event).
 *
 * Deno lowers `bufferedAmount` once the kernel has taken a whole frame, which
 * on a reading socket is usually the next turn of the event loop. So a
 * catching-up subscriber (whose next log read waits on it) is re-checked on
 * the next turn and then every millisecond a few times, before it joins the
 * slow poll every {@linkcode SLOW_POLL_MS} ms; a stalled socket costs a few
 * checks once, never a spin. Live subscribers go straight to the slow poll.
 */
class DrainPoller {
  #subs = new Set<Subscriber>();
  #timer: ReturnType<typeof setInterval> | undefined;
  // Subscribers on quick re-checks, with the checks they have had.
  #quick = new Map<Subscriber, number>();
  #quickImmediate: ReturnType<typeof setImmediate> | undefined;
  #quickTimer: ReturnType<typeof setTimeout> | undefined;

  add(sub: Subscriber, quick = false): void {
    if (quick) {
      this.#quick.set(sub, 0);
      if (this.#quickImmediate === undefined && this.#quickTimer === undefined) {
        this.#quickImmediate = setImmediate(() => this.#quickTick());
      }
      return;
    }
    this.#subs.add(sub);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#tick(), SLOW_POLL_MS);
    }
  }

  delete(sub: Subscriber): void {
    this.#quick.delete(sub);
    this.#subs.delete(sub);
    this.#stopIfIdle();
  }

  #quickTick(): void {
    this.#quickImmediate = undefined;
    this.#quickTimer = undefined;
    const now = Date.now();
    for (const [s, checks] of this.#quick) {
      if (!s._poll(now)) this.#quick.delete(s);
      else if (checks + 1 < QUICK_CHECKS) this.#quick.set(s, checks + 1);
      else {
        this.#quick.delete(s);
        this.add(s);
      }
    }
    if (this.#quick.size > 0) this.#quickTimer = setTimeout(() => this.#quickTick(), QUICK_POLL_MS);
  }

  #tick(): void {
    const now = Date.now();
    for (const s of this.#subs) {
      if (!s._poll(now)) this.#subs.delete(s);
    }
    this.#stopIfIdle();
  }

  #stopIfIdle(): void {
    if (this.#subs.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
    if (this.#quick.size === 0) {
      if (this.#quickImmediate !== undefined) clearImmediate(this.#quickImmediate);
      if (this.#quickTimer !== undefined) clearTimeout(this.#quickTimer);
      this.#quickImmediate = this.#quickTimer = undefined;
    }
  }
}

const poller = new DrainPoller();

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
  /** compress= (§16): `"zstd"` sends every data frame as one binary zstd frame. @default null */
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

  /** A subscriber on `socket` whose first row is `next`. */
  constructor(socket: WebSocket, host: SubscriberHost, next: number, opts: SubscriberOptions) {
    this.socket = socket;
    this.#host = host;
    this.next = next;
    this.frames = opts.frames;
    this.filter = opts.filter ?? null;
    this.zstd = opts.compress === "zstd";
    this.#opts = opts;
    this.#state = "catching_up";
    sockets++;
  }

  /** The current state. */
  get state(): SubscriberState {
    return this.#state;
  }

  /** Frames queued and not yet handed to the socket. */
  get backlog(): number {
    return this.#queue.length - this.#queueHead;
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
    if (this.#state !== "live") return;
    const n = frames.length;
    if (this.backlog === 0 && this.socket.bufferedAmount < highWaterBytes()) {
      if (n === 0) {
        // Nothing matched: only the position moves.
      } else if (this.frames === "arrow") this.#sendBinary(shared.arrow());
      else if (this.zstd) this.#sendBinary(shared.zstd!()); // compress= (§16): shared bytes
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
    if (this.zstd && n > 0) this.#zq.push({ bytes: shared.zstd!(), frames: n }); // compress= (§16)
    if (end !== null) this.#queueEnd = end;
    if (this.backlog === 0) {
      if (end !== null) this.next = end;
      return;
    }
    this.#block();
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
    // Back to the log from the first offset not handed to the socket.
    this.#host.leaveLive(this);
    this.#queue = [];
    this.#queueHead = 0;
    this.#zq = []; // compress= (§16)
    this.#zqHead = 0;
    this.#host.dropped("to_catch_up");
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
    if (buffered >= highWaterBytes()) {
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
    if (this.#state === "live") this.#drainQueue();
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
    while (this.#queueHead < q.length && this.socket.bufferedAmount < highWaterBytes()) {
      const z = this.zstd ? this.#zq[this.#zqHead++] : null; // compress= (§16): a queued commit
      const take = z ? z.frames : Math.min(q.length - this.#queueHead, MAX_BATCH_ROWS);
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
        if (this.socket.bufferedAmount >= highWaterBytes()) {
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
        const room = highWaterBytes() - this.socket.bufferedAmount;
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

  // compress= (§16): a replayed slice as one zstd frame, compressed once for
  // this read. Its cost for the pacer is the text compressed plus the frame.
  #sendZstd(text: string, rows: number): { rows: number; cost: number } {
    const bytes = this.#host.compress!(text);
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
      this.#zq = []; // compress= (§16)
      this.#zqHead = 0;
      poller.delete(this);
      this.#wake?.();
      this.#wake = null;
      this.#host.gone(this);
      sockets--;
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
