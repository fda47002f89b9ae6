/**
 * The leader's side of replication: each follower holds one WebSocket to the
 * leader (`replication_wire.ts`), and the leader ships it every commit, in
 * offset order, as soon as the commit is written — before its own fsync, so
 * that the follower's fsync runs beside it. A commit is still committed only
 * once the leader's fsync and the followers' reports cover it
 * (`commit_tracker.ts`); a follower may hold rows the leader never synced,
 * and cuts them when it rejoins (`replica_sink.ts`).
 *
 * - A commit the leader makes is encoded once ({@linkcode encodeCommit}) and
 *   kept in a ring of recent commits (bounded by `ringBytes`); every follower
 *   that is caught up is sent those same bytes.
 * - A follower that asks from an offset the ring no longer holds (a node
 *   that was away, a slow one) is caught up from the leader's log — its
 *   segments, then its chunks, through the log's reader — with the producer
 *   records of those rows from the leader's journal, and the terms they were
 *   written in; then it is served from the ring again.
 * - At most `windowBytes` are sent and not yet reported durable by a
 *   follower, and nothing is sent while its socket holds more than that:
 *   a slow follower costs reads of the leader's log, not its memory.
 * - The commit index goes to every follower when it moves
 *   (`{"type":"commit","index":C}`), at most once per turn of the event loop.
 * - A follower's reports are checked against what the leader knows before
 *   they reach the commit tracker: a `from` past the leader's durable end,
 *   or a `durable` end past the end of what was sent on that socket, is a
 *   protocol error (close 4416 `{"error":"ahead",…}`), never counted. Who may
 *   open a link at all is the replicate route's check (server/http/replicate.ts).
 *
 * @module
 */

import { setImmediate } from "node:timers";
import { Logger } from "../common/logger.ts";
import type { LogReader, RecordBatch } from "../log/mod.ts";
import { LogEvictedError } from "../log/errors.ts";
import type { DurableCommit, Replication } from "../log/replica/replication.ts";
import type { ProducerRecord } from "../log/producer/journal.ts";
import { termAt, termEnd } from "../log/replica/term_history.ts";
import {
  commitEnd,
  type ControlMessage,
  encodeCommit,
  parseControl,
  ReplicationWireError,
  type WireCommit,
  type WireRun,
} from "./replication_wire.ts";
import { CommitRing, type HeldCommit } from "./commit_ring.ts";

/**
 * Default bytes of recent commits the leader keeps for followers (the ring,
 * `--replica-ring-bytes`): 16 MiB.
 */
export const DEFAULT_RING_BYTES = 16 << 20;
/**
 * The smallest ring `--replica-ring-bytes` takes: 64 KiB. The ring always
 * keeps the newest commit, whatever its size.
 */
export const MIN_RING_BYTES = 64 << 10;
/** Default bytes sent to a follower and not yet durable there: 8 MiB. */
export const DEFAULT_WINDOW_BYTES = 8 << 20;
/** Bytes of the leader's log read at once to catch a follower up. */
const CATCH_UP_READ_BYTES = 1 << 20;

/**
 * What a source tells its owner about followers (the node hands them to its
 * commit tracker).
 */
export interface SourceEvents {
  /** `node` finished its handshake and is shipped from now on. */
  connected(node: string): void;
  /** `node`'s socket closed. */
  disconnected(node: string): void;
  /** `node` holds every row below `end` fsync'd. */
  durable(node: string, end: number): void;
}

/** Options of a {@linkcode ReplicationSource}. */
export interface ReplicationSourceOptions {
  /** The leader's term. */
  term: number;
  /** The stream's name (log lines). @default "" */
  stream?: string;
  /** Bytes of recent commits kept for followers. @default DEFAULT_RING_BYTES */
  ringBytes?: number;
  /** Bytes sent to a follower and not yet durable there. @default DEFAULT_WINDOW_BYTES */
  windowBytes?: number;
  /** How long a follower has to say where to start, ms. @default 10000 */
  handshakeMs?: number;
  /** Where events are reported. @default a text Logger on stderr */
  logger?: Logger;
}

/**
 * Shipping one stream's commits to its followers.
 *
 * @example
 * ```ts ignore
 * const source = new ReplicationSource(log.replication!, events, { term: 7 });
 * log.replication!.onTaken = (c) => source.ship(c);
 * // the server's replicate route, after the upgrade:
 * source.accept(socket, "n2");
 * source.commitIndex(120); // tell the followers
 * source.close();
 * ```
 */
export class ReplicationSource {
  readonly #rep: Replication;
  readonly #events: SourceEvents;
  readonly #term: number;
  readonly #stream: string;
  readonly #windowBytes: number;
  readonly #handshakeMs: number;
  readonly #logger: Logger;
  readonly #ring: CommitRing;
  readonly #links = new Set<Link>();
  // Each follower's latest socket: only its closing says the follower left.
  readonly #current = new Map<string, Link>();
  #index = 0;
  #indexQueued = false;
  #inSync: string[] = [];
  #closed = false;

  /**
   * Ships the commits it is given ({@linkcode ReplicationSource.ship}: the
   * owner hands it `rep.onTaken`'s), and catches followers up from `rep`'s log.
   */
  constructor(rep: Replication, events: SourceEvents, options: ReplicationSourceOptions) {
    this.#rep = rep;
    this.#events = events;
    this.#term = options.term;
    this.#stream = options.stream ?? "";
    this.#ring = new CommitRing(options.ringBytes ?? DEFAULT_RING_BYTES);
    this.#windowBytes = options.windowBytes ?? DEFAULT_WINDOW_BYTES;
    this.#handshakeMs = options.handshakeMs ?? 10_000;
    this.#logger = options.logger ?? new Logger();
    this.#index = rep.commitIndex;
  }

  /** The term this source ships. */
  get term(): number {
    return this.#term;
  }

  /** Followers connected (handshake done). */
  get followers(): string[] {
    return [...this.#links].filter((l) => l.from !== null).map((l) => l.node);
  }

  /** One of the leader's commits is written: encoded once, kept in the ring, shipped. */
  ship(c: DurableCommit): void {
    if (this.#closed) return;
    if (this.#links.size === 0) {
      // No follower to send it to (R = 1, or all away): not encoded at all;
      // one that connects later is caught up from the log.
      this.#ring.clear();
      return;
    }
    const bytes = encodeCommit({
      term: this.#term,
      first: c.first,
      runs: c.runs,
      records: c.records,
    });
    if (this.#ring.end !== c.first) this.#ring.clear(); // not the next: start again from it
    this.#ring.push(c.first, c.end, bytes);
    for (const l of this.#links) l.wake();
  }

  /** The ring's commit starting at `offset`, or null. */
  _fromRing(offset: number): HeldCommit | null {
    return this.#ring.get(offset);
  }

  /** Tells every follower the in-sync set (for their `/head`), now and on each change. */
  inSync(nodes: readonly string[]): void {
    this.#inSync = [...nodes];
    const msg = JSON.stringify({ type: "in_sync", nodes: this.#inSync });
    for (const l of this.#links) if (l.from !== null) l.send(msg);
  }

  /** Tells every follower that rows below `index` are committed. */
  commitIndex(index: number): void {
    if (index <= this.#index) return;
    this.#index = index;
    if (this.#indexQueued) return;
    this.#indexQueued = true;
    setImmediate(() => {
      this.#indexQueued = false;
      const msg = JSON.stringify({ type: "commit", index: this.#index });
      for (const l of this.#links) if (l.from !== null) l.send(msg);
    });
  }

  /** Takes a follower's replication socket (open or opening); `node` is its name. */
  accept(socket: WebSocket, node: string): void {
    if (this.#closed) {
      closeSocket(socket, 4409, "not_leader");
      return;
    }
    for (const l of this.#links) {
      // The same node again: its old socket is stale.
      if (l.node === node) l.close(4409, "replaced");
    }
    const link = new Link(this, socket, node);
    this.#links.add(link);
    this.#current.set(node, link);
    link.run().catch((err) => {
      this.#logger.warn("replication_link_failed", {
        stream: this.#stream,
        node,
        error: err instanceof Error ? err.message : String(err),
      });
    }).finally(() => {
      this.#links.delete(link);
      link.close(1001, "closed");
      this.#logger.info("replication_link_closed", {
        stream: this.#stream,
        node,
        code: link.closedWith.code,
        reason: link.closedWith.reason,
      });
      if (this.#current.get(node) === link) {
        this.#current.delete(node);
        this.#events.disconnected(node);
      }
    });
  }

  /** Closes every follower's socket (the leader steps down, or stops). */
  close(code = 4409, reason = "not_leader"): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const l of this.#links) l.close(code, reason);
  }

  /** @internal What a link needs of its source. */
  get _ctx(): LinkContext {
    return {
      rep: this.#rep,
      events: this.#events,
      term: this.#term,
      stream: this.#stream,
      windowBytes: this.#windowBytes,
      handshakeMs: this.#handshakeMs,
      logger: this.#logger,
      index: () => this.#index,
      inSync: () => this.#inSync,
      closed: () => this.#closed,
      ring: (offset) => this._fromRing(offset),
    };
  }
}

interface LinkContext {
  rep: Replication;
  events: SourceEvents;
  term: number;
  stream: string;
  windowBytes: number;
  handshakeMs: number;
  logger: Logger;
  index(): number;
  inSync(): string[];
  closed(): boolean;
  ring(offset: number): HeldCommit | null;
}

function closeSocket(socket: WebSocket, code: number, reason: string): void {
  try {
    socket.close(code, reason);
  } catch {
    // already closing
  }
}

// One follower's socket: the handshake, then shipping until it closes.
class Link {
  readonly node: string;
  readonly #ctx: LinkContext;
  readonly #socket: WebSocket;
  /** Where the follower asked to start (null until it said). */
  from: number | null = null;
  #next = 0;
  #closed = false;
  /** Why the link closed: this side's close, or the socket's close event. */
  closedWith: { code: number; reason: string } = { code: 0, reason: "" };
  #wake: (() => void) | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined = undefined;
  #timerAt = 0;
  // Sent and not yet reported durable: the end of each message and its size.
  readonly #unacked: { end: number; bytes: number }[] = [];
  #unackedBytes = 0;
  #reader: LogReader | null = null;
  #records: { list: ProducerRecord[]; through: number } | null = null;
  #carry: RecordBatch[] = [];

  constructor(source: ReplicationSource, socket: WebSocket, node: string) {
    this.#ctx = source._ctx;
    this.#socket = socket;
    this.node = node;
  }

  wake(): void {
    const w = this.#wake;
    this.#wake = null;
    w?.();
  }

  send(data: string | Uint8Array): void {
    if (this.#closed || this.#socket.readyState !== WebSocket.OPEN) return;
    try {
      this.#socket.send(data);
    } catch {
      this.close(1011, "send failed");
    }
  }

  close(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.closedWith = { code, reason };
    closeSocket(this.#socket, code, reason);
    this.#reader?.close();
    this.#reader = null;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.wake();
  }

  // One timer per link, armed at the earliest deadline asked for and left
  // armed across waits that end sooner, so that a wait woken by the next
  // commit makes no timer: a timer made and cleared at each of hundreds of
  // waits a second grew the leader's old generation by tens of MB a minute
  // (V8's --trace-gc). A timer that fires early only wakes the loop, which
  // looks again.
  #sleep(ms: number): Promise<void> {
    const at = performance.now() + ms;
    if (this.#timer === undefined || at < this.#timerAt) {
      clearTimeout(this.#timer);
      this.#timerAt = at;
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.wake();
      }, ms);
    }
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }

  async run(): Promise<void> {
    const ctx = this.#ctx;
    const socket = this.#socket;
    socket.binaryType = "arraybuffer";
    const opened = new Promise<boolean>((resolve) => {
      if (socket.readyState === WebSocket.OPEN) resolve(true);
      socket.addEventListener("open", () => resolve(true), { once: true });
      socket.addEventListener("close", () => resolve(false), { once: true });
    });
    // The peer's close, or the runtime's when a ping went unanswered.
    socket.addEventListener("close", (e) => this.close(e.code, e.reason));
    socket.addEventListener("message", (e) => this.#onMessage(e));
    if (!(await opened) || this.#closed) return;
    const rep = ctx.rep;
    this.send(JSON.stringify({
      type: "hello",
      stream_id: rep.streamId,
      term: ctx.term,
      terms: rep.terms,
      end: rep.durableEnd,
      commit: ctx.index(),
    }));
    const deadline = performance.now() + ctx.handshakeMs;
    while (this.from === null && !this.#closed) {
      const left = deadline - performance.now();
      if (left <= 0) {
        this.close(4408, "no from within the handshake time");
        return;
      }
      await this.#sleep(left);
    }
    if (this.#closed) return;
    ctx.events.connected(this.node);
    // What it holds from: durable there (its log was cut and synced, or never grew).
    ctx.events.durable(this.node, this.from!);
    this.send(JSON.stringify({ type: "commit", index: ctx.index() }));
    this.send(JSON.stringify({ type: "in_sync", nodes: ctx.inSync() }));
    this.#next = this.from!;
    await this.#ship();
  }

  #onMessage(e: MessageEvent): void {
    if (this.#closed) return;
    let m: ControlMessage;
    try {
      if (typeof e.data !== "string") throw new ReplicationWireError("a follower sends text only");
      m = parseControl(e.data);
    } catch (err) {
      this.close(4400, String(err instanceof Error ? err.message : err).slice(0, 120));
      return;
    }
    const rep = this.#ctx.rep;
    if (m.type === "from" && this.from === null) {
      if (m.from < 1 || m.from > rep.durableEnd) {
        this.close(4416, JSON.stringify({ error: "ahead", from: m.from, end: rep.durableEnd }));
        return;
      }
      this.from = m.from;
      this.#next = m.from;
      this.wake();
    } else if (m.type === "durable" && this.from !== null) {
      // It cannot hold durably what it was never sent: a report past that is
      // a follower that lies or is confused, and must not move the commit.
      if (m.end > this.#next) {
        this.close(4416, JSON.stringify({ error: "ahead", durable: m.end, sent: this.#next }));
        return;
      }
      while (this.#unacked.length > 0 && this.#unacked[0].end <= m.end) {
        this.#unackedBytes -= this.#unacked.shift()!.bytes;
      }
      this.#ctx.events.durable(this.node, m.end);
      this.wake();
    } else {
      this.close(4400, `unexpected ${m.type}`);
    }
  }

  // Ships from #next on until the socket closes.
  async #ship(): Promise<void> {
    const ctx = this.#ctx;
    const rep = ctx.rep;
    while (!this.#closed && !ctx.closed()) {
      if (
        this.#unackedBytes >= ctx.windowBytes ||
        this.#socket.bufferedAmount >= ctx.windowBytes
      ) {
        await this.#sleep(this.#unackedBytes >= ctx.windowBytes ? 1000 : 5);
        continue;
      }
      // The ring may hold commits past the durable end (written, shipped
      // before the leader's sync); the log is read only up to it.
      const shipped = this.#reader === null ? ctx.ring(this.#next) : null;
      if (shipped) {
        this.#sent(shipped.end, shipped.bytes);
        continue;
      }
      if (this.#next >= rep.durableEnd) {
        const reading = this.#reader !== null;
        this.#reader?.close();
        this.#reader = null;
        // Caught up from the log: the ring may hold what follows already.
        if (!reading) await this.#sleep(1000);
        continue;
      }
      const commit = await this.#catchUp();
      if (commit === null) continue;
      this.#sent(commitEnd(commit), encodeCommit(commit));
      // Back on the ring as soon as it holds the next commit.
      if (ctx.ring(this.#next)) {
        this.#reader?.close();
        this.#reader = null;
        this.#carry = [];
      }
    }
  }

  #sent(end: number, bytes: Uint8Array): void {
    this.send(bytes);
    this.#next = end;
    this.#unacked.push({ end, bytes: bytes.length });
    this.#unackedBytes += bytes.length;
  }

  // The next stretch of the leader's log from #next, as one commit that
  // splits no producer commit and no term; null when nothing could be read.
  async #catchUp(): Promise<WireCommit | null> {
    const rep = this.#ctx.rep;
    if (this.#reader === null) {
      // Once per stretch read from the log: the ring no longer held #next
      // (a follower far behind, or back after being away).
      this.#ctx.logger.info("replication_catch_up", {
        stream: this.#ctx.stream,
        node: this.node,
        from: this.#next,
        to: rep.durableEnd,
      });
      this.#reader = rep.reader(this.#next);
      this.#carry = [];
    }
    let batch: RecordBatch;
    try {
      batch = await this.#reader.read(CATCH_UP_READ_BYTES);
    } catch (err) {
      if (!(err instanceof LogEvictedError) || err.earliest === null) throw err;
      // Rows the leader no longer holds: the follower starts past them (a fenced gap).
      this.#reader.close();
      this.#reader = null;
      this.#next = err.earliest;
      return null;
    }
    // At the log's end, rows kept from the last read (the next term's, past
    // a commit split at a term) still go out.
    if (batch.count === 0 && this.#carry.length === 0) {
      await this.#sleep(5);
      return null;
    }
    const rows = batch.count === 0 ? this.#carry : [...this.#carry, batch];
    this.#carry = [];
    const first = rows[0].offsets[0];
    const tail = rows[rows.length - 1];
    const last = tail.offsets[tail.count - 1];
    const records = await this.#recordsOf(first, last + 1);
    // A producer commit that goes on past this read: keep its rows for the next.
    let end = last + 1;
    for (const r of records) if (r.first <= last && r.last > last) end = Math.min(end, r.first);
    if (end <= first) {
      this.#carry = rows;
      if (batch.count === 0) await this.#sleep(5); // its other rows are not durable yet
      return null;
    }
    const terms = rep.terms;
    const term = termAt(terms, first);
    // Rows of one term only: the next term begins a commit of its own.
    const termStop = termEnd(terms, term, end).end;
    if (termStop > first) end = Math.min(end, termStop);
    const runs: WireRun[] = [];
    const keep: RecordBatch[] = [];
    for (const b of rows) {
      for (let i = 0; i < b.count; i++) {
        const o = b.offsets[i];
        if (o >= end) {
          keep.push(sliceFrom(b, i));
          break;
        }
        const t = b.times[i];
        const p = b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]);
        const run = runs[runs.length - 1];
        if (run && run.timeUs === t) run.payloads.push(p);
        else runs.push({ timeUs: t, payloads: [p] });
      }
    }
    this.#carry = keep;
    // Past a fenced gap of the leader's log `first` is above #next: the
    // follower fences too, so its offsets stay the leader's.
    const inRange = records.filter((r) => r.first >= first && r.last < end);
    return { term, first, runs, records: inRange };
  }

  // The leader's journal records of rows in [from, to): read afresh when the
  // copy held was read before those rows were durable (a commit's records
  // reach the journal before its rows).
  async #recordsOf(from: number, to: number): Promise<ProducerRecord[]> {
    if (this.#records === null || this.#records.through < to) {
      const through = this.#ctx.rep.durableEnd;
      this.#records = { list: await this.#ctx.rep.producerRecords(), through };
    }
    return this.#records.list.filter((r) => r.seq > 0 && r.last >= from && r.first < to);
  }
}

function sliceFrom(b: RecordBatch, i: number): RecordBatch {
  return {
    buf: b.buf,
    count: b.count - i,
    offsets: b.offsets.subarray(i),
    times: b.times.subarray(i),
    starts: b.starts.subarray(i),
    lengths: b.lengths.subarray(i),
  };
}
