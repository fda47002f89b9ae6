/**
 * The {@linkcode Subscription} that {@linkcode connect} returns: a streamcast
 * subscription as an async iterator of `[offset, msg]` pairs, with its cursor
 * handling and its reconnect loop.
 *
 * Invariants kept here:
 * - offsets yielded on a durable stream strictly increase, also across
 *   reconnects, and none is below the offset asked for; a frame that breaks
 *   this ends the iteration with a {@linkcode ProtocolError};
 * - the cursor's offset never passes a row the loop has not finished: a row
 *   counts as handled only when the loop asks for the next one (or
 *   `commit()` is called), so `break`, an exception or a crash re-delivers it;
 * - a reconnect resumes at the offset after the last row received, with the
 *   stream id the subscription started with, and never crosses a change of it;
 *   given several URLs (one stream on several nodes), each attempt goes to
 *   the next of them, so a dead node is left for another.
 *
 * Web APIs only (WebSocket, URL, AbortSignal, timers): this runs in Deno and in
 * browsers. The options arrive checked (`connect.ts` checks them).
 *
 * @module
 */

import { Connection, type WebSocketConstructor } from "./_connection.ts";
import { CursorSaver } from "./_cursor_saver.ts";
import { NodeRing } from "./_node_ring.ts";
import type { Line, Row } from "./row.ts";
import { CompressChoice } from "./_compress_choice.ts";
import {
  closeError,
  ConnectionClosed,
  NotReplayable,
  ProtocolError,
  SubscriptionError,
  TokenExpired,
} from "./errors.ts";
import { BAD_LINE, clip, lineOffset, parseLine } from "./_frame.ts";
import {
  archiveOffsetAt,
  type CatchUp,
  catchUp,
  catchUpGreeting,
  type CatchUpOptions,
  ChunksForbidden,
} from "./catch_up.ts";
import { type CatchUpFilter, catchUpFilter } from "./catch_up_filter.ts";
import { fetchHead } from "./head.ts";
import { accessDenied, fetchWithToken, httpOrigin, tokenNow, withToken } from "./_token.ts";
import {
  DEFAULT_BACKOFF_MAX_MS,
  DEFAULT_BACKOFF_MIN_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_SAVE_EVERY_MS,
  DEFAULT_SAVE_EVERY_ROWS,
  type SubscriptionOptions,
} from "./connect_options.ts";
import { type Greeting, type OffsetRequest, splitBatch, subscribeUrl } from "../wire/subscribe.ts";
import { sinceMicros } from "../wire/since.ts";
import { backoffDelay, sleep } from "../common/backoff.ts";

export type { Line, Row } from "./row.ts";

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/**
 * A subscription to one stream: iterate it with `for await` to get
 * `[offset, msg]` pairs, replay first and then live, with no gap and no
 * duplicate. Get one from {@linkcode connect}.
 *
 * Leaving the loop (by `break`, `return` or an exception) closes the
 * subscription and saves the cursor at the row the loop was on, so that row
 * is delivered again on resume.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { connect, MemoryCursor } from "./mod.ts";
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("ticks", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * await stream.sendMany([{ v: 1 }, { v: 2 }, { v: 3 }]);
 * const cursor = new MemoryCursor();
 * const sub = await connect<{ v: number }>(`${server.url}/ticks`, { offset: 1, cursor });
 * equal(sub.greeting.end_offset, 4);
 * for await (const [, msg] of sub) {
 *   if (msg.v === 2) break; // row 2 is not handled: a resume starts there
 * }
 * equal(cursor.value?.offset, 2);
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export class Subscription<T = unknown> implements AsyncIterableIterator<Row<T>> {
  readonly #nodes: NodeRing;
  readonly #opts: SubscriptionOptions;
  #conn: Connection | null = null;
  #pastBytes = 0; // data message bytes of the connections before #conn
  #greeting: Greeting | null = null;
  #streamId: string | null = null;
  #durable = false;
  /** Durable streams: the lowest offset the next row may have. */
  #expect = 0;
  #lastOffset: number | null = null;
  /** The offset of the row yielded last (null: ephemeral), `undefined` when none is current. */
  #current: number | null | undefined = undefined;
  /** The resume position and the cursor's saving. */
  readonly #saver: CursorSaver;
  /** The lines of the frame being read, and the index of the next one. */
  #lines: string[] = [];
  #lineAt = 0;
  #busy = false;
  #closed = false;
  #closing: Promise<void> | null = null;
  #aborted = false;
  #abortReason: unknown = undefined;
  /** Aborted to cut a reconnect delay short (a close, an abort). */
  #sleeping: AbortController | null = null;
  #reconnects = 0;
  #catchUp: CatchUp | null = null;
  #catchUpRows = 0;
  #catchUpFilter: CatchUpFilter | null = null; // where= on chunk rows
  // since= (µs): asked for on the first connect only; from then on, offsets.
  #since: number | null = null;
  // snapshot=1: asked for on the first connect only; then the snapshot's
  // rows still to come, and the offset where the rows after them start.
  #snapshot = false;
  #snapshotLeft = 0;
  #snapshotEnd = 0;
  readonly #onAbort = (): void => this.#abort();
  readonly #baseWS: WebSocketConstructor;
  // The token of the latest connect (a token function is called before each).
  #token: string | undefined = undefined;
  readonly #compress: CompressChoice; // compress= (§16): asked for, decoded, fallen back

  private constructor(urls: readonly URL[], options: SubscriptionOptions) {
    this.#nodes = new NodeRing(urls.map((u) => u.toString()));
    this.#opts = options;
    const WS = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WS) throw new TypeError("connect: no WebSocket here; pass the WebSocket option");
    this.#baseWS = WS;
    this.#saver = new CursorSaver(options.cursor ?? null, {
      everyRows: options.saveEveryRows ?? DEFAULT_SAVE_EVERY_ROWS,
      everyMs: options.saveEveryMs ?? DEFAULT_SAVE_EVERY_MS,
      ...(options.beforeSave ? { beforeSave: options.beforeSave } : {}),
    }, () => this.#conn?.wakeUp());
    this.#compress = new CompressChoice(options, () => this.#token, () => this.#url);
  }

  /**
   * @internal Use `connect`, which checks `url` and `options` (this trusts them).
   */
  static async _open<T>(
    urls: readonly URL[],
    options: SubscriptionOptions,
  ): Promise<Subscription<T>> {
    const signal = options.signal;
    signal?.throwIfAborted();
    const sub = new Subscription<T>(urls, options);
    signal?.addEventListener("abort", sub.#onAbort, { once: true });
    try {
      await sub.#start();
    } catch (err) {
      await sub.#shutdown(false);
      throw err;
    }
    return sub;
  }

  async #start(): Promise<void> {
    let offset: OffsetRequest = this.#opts.offset ?? null;
    let streamId: string | null = null;
    const saved = this.#opts.cursor ? await this.#opts.cursor.load() : null;
    if (saved) {
      offset = saved.offset;
      streamId = saved.streamId;
    } else if (this.#opts.since !== undefined) this.#since = sinceMicros(this.#opts.since);
    else if (this.#opts.snapshot) this.#snapshot = true;
    // Each node in turn while the one tried cannot be reached.
    const failures: string[] = [];
    for (let i = 1;; i++) {
      try {
        await this.#openOrCatchUp(offset, streamId, null);
        break;
      } catch (err) {
        const n = this.#nodes;
        if (n.size === 1 || !(err instanceof SubscriptionError) || !n.moveOn(err)) throw err;
        failures.push(err.message);
        if (i >= n.size) throw n.unreachable(failures);
        n.next();
      }
    }
    if (this.#opts.cursor && !this.#durable) {
      throw new NotReplayable(this.#url, { why: "not_durable", offset: saved?.offset });
    }
    // No cursor yet: this start is the position from now on.
    await this.#saver.begin(this.#durable ? this.#expect : null, this.#streamId, !saved);
  }

  /**
   * Opens a socket at `offset`; when refused for reaching too far back and
   * `catchUp` is on, starts reading the gap from the chunks instead (the
   * socket is opened again once they are read).
   */
  async #openOrCatchUp(
    offset: OffsetRequest,
    streamId: string | null,
    resume: number | null,
  ): Promise<void> {
    try {
      // compress= (§16): a server that does not know a value refuses it (4400): ask with less.
      const tryOpen = (): Promise<void> =>
        this.#open(offset, streamId, resume)
          .catch((e) => this.#compress.fallBack(e) ? tryOpen() : Promise.reject(e));
      await tryOpen();
    } catch (err) {
      const opt = this.#opts.catchUp;
      if (!opt || !(err instanceof NotReplayable)) throw err;
      const options: CatchUpOptions = opt === true ? {} : opt;
      const canRead = err.why === "too_old" ||
        ((err.why === "evicted" || err.why === "empty") && options.archive);
      if (!canRead) throw err;
      let from = typeof offset === "number" ? Math.max(1, offset) : (err.offset ?? 1);
      // since= below what the server holds: start where the archive reaches the time.
      if (this.#since !== null && err.offset === undefined && options.archive) {
        from = (await archiveOffsetAt(options.archive, this.#since)) ?? from;
      }
      // No progress since the last catch-up ended here: the refusal stands.
      if (this.#catchUpRows === 0 && this.#expect === from && this.#greeting !== null) throw err;
      const token = this.#token;
      let c: CatchUp;
      try {
        c = await catchUp(
          this.#url,
          from,
          streamId ?? this.#streamId,
          token === undefined ? options : {
            ...options,
            fetch: fetchWithToken(options.fetch ?? fetch, token, httpOrigin(this.#url)),
          },
        );
      } catch (e) {
        // A row-level grant reads only through the socket: catch up there.
        if (!(e instanceof ChunksForbidden) || typeof offset !== "number") throw e;
        await this.#open(offset, streamId, resume);
        return;
      }
      const head = await fetchHead(
        this.#url,
        token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } },
      );
      const f = this.#catchUpFilter = catchUpFilter(this.#opts.where, head.schema, this.#url);
      this.#catchUp = c;
      this.#since = null;
      this.#catchUpRows = 0;
      this.#durable = true;
      this.#streamId = this.#saver.streamId = head.stream_id;
      this.#expect = Math.max(this.#expect, from);
      this.#greeting = { ...catchUpGreeting(head, from), where: f.where };
    }
  }

  /**
   * Opens a socket at `offset` and waits for its greeting. Returns with the
   * subscription updated, or throws the typed error for the refusal, the
   * close, the timeout or the abort.
   */
  async #open(
    offset: OffsetRequest,
    streamId: string | null,
    resume: number | null,
  ): Promise<void> {
    const ctx = { url: this.#url, offset, streamId };
    const token = this.#token = await tokenNow(this.#opts.token, "connect");
    const conn = new Connection(
      token === undefined ? this.#baseWS : withToken(this.#baseWS, token),
      subscribeUrl(this.#url, {
        offset,
        streamId,
        frames: "batch",
        where: this.#opts.where,
        since: this.#since,
        compress: this.#compress.query, // compress= (§16)
        snapshot: this.#snapshot,
      }),
      this.#compress.zstd,
      this.#compress.dict,
      this.#compress.stream,
    );
    this.#pastBytes += this.#conn?.bytes ?? 0;
    this.#conn = conn;
    const ms = this.#opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    let timedOut = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        timedOut = true;
        resolve();
      }, ms);
    });
    try {
      while (
        conn.greeting === null && conn.closed === null && conn.problem === null && !timedOut &&
        !this.#aborted && !this.#closed
      ) {
        await Promise.race([conn.wait(), timeout]);
      }
    } finally {
      clearTimeout(timer);
    }
    if (this.#aborted) {
      await conn.close();
      throw this.#abortReason;
    }
    if (this.#closed) return;
    if (conn.greeting === null && conn.problem !== null) {
      await conn.close();
      throw new ProtocolError(conn.problem, this.#url);
    }
    if (conn.greeting === null) {
      if (conn.closed !== null) {
        const c = conn.closed;
        if (c.code === 1006) {
          const denied = await accessDenied(
            this.#url,
            token,
            Math.min(this.#opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, 5_000),
            resume,
          );
          if (denied) throw denied;
        }
        const err = closeError(c.code, c.reason, ctx, resume, c.wasClean);
        if (err instanceof ConnectionClosed) {
          throw new ConnectionClosed(
            this.#url,
            c.code,
            c.reason,
            resume,
            `${c.code === 1006 ? "1006: refused or dropped" : c.code} before the greeting`,
            c.wasClean,
          );
        }
        throw err;
      }
      await conn.close();
      throw new ConnectionClosed(this.#url, null, "", resume, `no greeting within ${ms} ms`);
    }
    const g = conn.greeting;
    if (this.#streamId !== null && g.stream_id !== this.#streamId) {
      // A server that does not check stream_id: never cross a change of log.
      await conn.close();
      throw new NotReplayable(this.#url, {
        why: "other_stream",
        offset: typeof offset === "number" ? offset : undefined,
        streamId: this.#streamId,
      });
    }
    this.#greeting = g;
    this.#since = null;
    this.#snapshot = false;
    this.#durable = g.durable;
    this.#streamId = this.#saver.streamId = g.stream_id;
    this.#snapshotLeft = 0;
    if (g.durable && g.snapshot && g.snapshot.keys > 0) {
      // Its rows are below its end, in offset order; the rows after them from its end.
      this.#snapshotLeft = g.snapshot.keys;
      this.#snapshotEnd = g.snapshot.end;
    } else if (g.durable) {
      const floor = g.replay ? g.replay[0] : (g.end_offset as number);
      this.#expect = Math.max(floor, typeof offset === "number" ? offset : 0, this.#expect);
    }
  }

  // The stream's URL on the node connected to (or tried).
  get #url(): string {
    return this.#nodes.current;
  }

  /** The URL of the node connected to (or tried next), as a WebSocket URL. */
  get url(): string {
    return this.#url;
  }

  /** The greeting of the current connection (updated on reconnect). */
  get greeting(): Greeting {
    return this.#greeting!;
  }

  /** The stream id (`null` on an ephemeral stream). */
  get streamId(): string | null {
    return this.#streamId;
  }

  /** The offset of the last row yielded, or `null` (none yet, or an ephemeral stream). */
  get lastOffset(): number | null {
    return this.#lastOffset;
  }

  /**
   * The resume position: the first offset not yet handled, which is what the
   * cursor saves (`null` on an ephemeral stream).
   */
  get position(): number | null {
    return this.#saver.position;
  }

  /** How many times the subscription reconnected. */
  get reconnects(): number {
    return this.#reconnects;
  }

  /**
   * Bytes of data messages received over every connection so far, as the
   * WebSocket gave them (binary: compressed bytes; text: UTF-16 code units).
   */
  get wireBytes(): number {
    return this.#pastBytes + (this.#conn?.bytes ?? 0);
  }

  /** At least this many rows are received and ready to be yielded without waiting. */
  get buffered(): number {
    return this.#lines.length - this.#lineAt + (this.#conn?.pending ?? 0);
  }

  /**
   * Marks the current row (the one yielded last) handled and saves the cursor
   * now. Without a cursor it only marks.
   */
  async commit(): Promise<void> {
    if (typeof this.#current === "number") this.#saver.commit(this.#current);
    if (this.#opts.cursor && this.#durable) await this.#saver.save();
  }

  /**
   * Closes the subscription: the loop ends (a pending `next()` resolves done)
   * and the cursor is saved at the first row not handled. Resolves once the
   * socket is closed; rejects if that last save fails.
   */
  close(): Promise<void> {
    return this.#shutdown(true);
  }

  /** This subscription, as its own iterator of `[offset, msg]`. */
  [Symbol.asyncIterator](): AsyncIterableIterator<Row<T>> {
    return this;
  }

  /** The next row; see the class documentation. */
  next(): Promise<IteratorResult<Row<T>, undefined>> {
    const now = this.#tryNow(false);
    if (now !== null) return Promise.resolve(now as IteratorResult<Row<T>, undefined>);
    return this.#next(false) as Promise<IteratorResult<Row<T>, undefined>>;
  }

  /** Closes the subscription (a `for await` loop calls this on `break`). */
  async return(): Promise<IteratorResult<Row<T>, undefined>> {
    await this.close();
    return DONE;
  }

  /**
   * The rows as `[offset, line]`, where `line` is the `[offset,msg]` text
   * exactly as received (nothing re-encoded, `msg` not parsed): for tools that
   * pass rows on, like `cli.ts tail`. Same cursor rules as iterating the
   * subscription; use one or the other.
   *
   * @example
   * ```ts
   * import { equal } from "node:assert/strict";
   * import { connect } from "./connect.ts";
   * import { serve, Stream } from "../mod.ts";
   * const stream = Stream.ephemeral("ticks", {
   *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
   * });
   * const server = serve([stream], { port: 0, onListen: () => {} });
   * const sub = await connect(`${server.url}/ticks`);
   * await stream.send({ v: 1.5 });
   * for await (const [, line] of sub.lines()) {
   *   equal(line, '[null,{"v":1.5}]');
   *   break;
   * }
   * await server.shutdown();
   * ```
   */
  lines(): AsyncIterableIterator<Line> {
    const it: AsyncIterableIterator<Line> = {
      next: () => {
        const now = this.#tryNow(true);
        if (now !== null) return Promise.resolve(now as IteratorResult<Line, undefined>);
        return this.#next(true) as Promise<IteratorResult<Line, undefined>>;
      },
      return: async () => {
        await this.close();
        return DONE;
      },
      [Symbol.asyncIterator]: () => it,
    };
    return it;
  }

  /** The loop asked for the next row: the current one is handled. */
  #markHandled(): void {
    const cur = this.#current;
    if (cur === undefined) return;
    this.#current = undefined;
    this.#saver.handled(cur);
  }

  /**
   * The fast path of next(): a row already received, when nothing else (a
   * save, a close, an abort, a bad line) needs the async path. `null`: take
   * the async path.
   */
  #tryNow(raw: boolean): IteratorResult<Row<T> | Line, undefined> | null {
    if (this.#busy || this.#closed || this.#aborted || this.#saver.failed) return null;
    this.#markHandled();
    if (this.#saver.due) return null;
    if (this.#lineAt >= this.#lines.length) {
      const frame = this.#conn?.take();
      if (frame === undefined) return null;
      this.#lines = splitBatch(frame);
      this.#lineAt = 0;
    }
    // A bad line is left in place for the async path to report.
    const value = this.#row(this.#lines[this.#lineAt], raw);
    if (typeof value === "string") return null;
    this.#lineAt++;
    return { done: false, value };
  }

  async #next(raw: boolean): Promise<IteratorResult<Row<T> | Line, undefined>> {
    if (this.#busy) {
      throw new TypeError(
        "Subscription: next() called while another next() is pending; use one for await loop",
      );
    }
    this.#busy = true;
    try {
      this.#markHandled();
      // Awaited, so a crash re-delivers at most saveEveryRows handled rows.
      if (this.#saver.due) await this.#saveOrEnd();
      while (true) {
        if (this.#saver.failed) {
          const err = this.#saver.takeError();
          await this.#shutdown(false).catch(() => {});
          throw err;
        }
        if (this.#aborted) {
          await this.#shutdown(true).catch(() => {});
          throw this.#abortReason;
        }
        if (this.#closed) return DONE;
        if (this.#lineAt < this.#lines.length) {
          const value = this.#row(this.#lines[this.#lineAt++], raw);
          if (typeof value === "string") await this.#fail(value);
          return { done: false, value: value as Row<T> | Line };
        }
        if (this.#catchUp) {
          // Rows read over HTTP come first; then the socket, where they end.
          const r = await this.#catchUp.lines.next();
          if (!r.done) {
            this.#lines = this.#catchUpFilter!.pick(r.value);
            this.#lineAt = 0;
            this.#catchUpRows += r.value.length;
            continue;
          }
          const at = Math.max(this.#catchUp.next(), this.#expect);
          this.#catchUp = null;
          try {
            await this.#openOrCatchUp(at, this.#streamId, at);
          } catch (e) {
            await this.#shutdown(true).catch(() => {});
            throw e;
          }
          continue;
        }
        const conn = this.#conn!;
        const frame = conn.take();
        if (frame !== undefined) {
          this.#lines = splitBatch(frame);
          this.#lineAt = 0;
          continue;
        }
        if (conn.problem !== null) await this.#fail(conn.problem);
        if (conn.closed !== null) {
          const c = conn.closed;
          const err = closeError(
            c.code,
            c.reason,
            {
              url: this.#url,
              offset: this.#durable ? this.#expect : null,
              streamId: this.#streamId,
            },
            this.#durable ? this.#expect : null,
            c.wasClean,
          );
          // A token function renews an expired token: reconnect, with or without `reconnect`.
          const renew = err instanceof TokenExpired && typeof this.#opts.token === "function";
          if (
            (this.#opts.reconnect && err.reconnectable && !(err instanceof TokenExpired)) || renew
          ) {
            try {
              await this.#reconnect(err);
            } catch (e) {
              await this.#shutdown(true).catch(() => {});
              throw e;
            }
            continue;
          }
          await this.#shutdown(true).catch(() => {});
          throw err;
        }
        await conn.wait();
      }
    } finally {
      this.#busy = false;
    }
  }

  /** Checks one line and makes it the current row; returns what is wrong with it instead. */
  #row(line: string, raw: boolean): Row<T> | Line | string {
    let offset: number | null;
    let value: Row<T> | Line;
    if (raw) {
      const o = lineOffset(line);
      if (o === BAD_LINE) return `a frame line is not [offset,msg]: ${clip(line)}`;
      offset = o;
      value = [o, line];
    } else {
      const r = parseLine(line);
      if (r === null) return `a frame line is not [offset,msg]: ${clip(line)}`;
      offset = r[0];
      value = r as Row<T>;
    }
    if (this.#durable) {
      if (offset === null) return `a row without an offset on a durable stream: ${clip(line)}`;
      if (offset < this.#expect) {
        return this.#lastOffset !== null && offset <= this.#lastOffset
          ? `offset ${offset} came after ${this.#lastOffset}: offsets must increase ` +
            `(a server bug, or rows of another stream)`
          : `offset ${offset} is below ${this.#expect}, the first offset this subscription ` +
            `asked for (a server bug, or rows of another stream)`;
      }
      this.#expect = offset + 1;
      this.#lastOffset = offset;
      // The snapshot's last row: the rows after it start at its end.
      if (this.#snapshotLeft > 0 && --this.#snapshotLeft === 0) {
        this.#expect = Math.max(this.#expect, this.#snapshotEnd);
      }
    } else if (offset !== null) {
      return `a row with offset ${offset} on an ephemeral stream`;
    }
    this.#current = offset;
    return value;
  }

  /** Ends the subscription with a ProtocolError (the current row is not handled). */
  async #fail(detail: string): Promise<never> {
    await this.#shutdown(true).catch(() => {});
    throw new ProtocolError(detail, this.#url);
  }

  async #reconnect(cause: SubscriptionError): Promise<void> {
    const minMs = this.#opts.backoff?.minMs ?? DEFAULT_BACKOFF_MIN_MS;
    const maxMs = this.#opts.backoff?.maxMs ?? DEFAULT_BACKOFF_MAX_MS;
    let err = cause;
    for (let attempt = 1;; attempt++) {
      const delayMs = backoffDelay(attempt, minMs, maxMs);
      const resumeAt = this.#durable ? this.#expect : null;
      this.#nodes.next();
      const url = this.#url;
      this.#opts.onReconnect?.({
        error: err,
        attempt,
        delayMs,
        resumeAt,
        lost: !this.#durable,
        url,
      });
      const sleeping = (this.#sleeping = new AbortController());
      await sleep(delayMs, sleeping.signal);
      this.#sleeping = null;
      if (this.#closed || this.#aborted) return;
      try {
        await this.#openOrCatchUp(resumeAt, this.#streamId, resumeAt);
      } catch (e) {
        if (e instanceof SubscriptionError && this.#nodes.moveOn(e) && !this.#aborted) {
          err = e;
          continue;
        }
        throw e;
      }
      if (!this.#closed && !this.#aborted) this.#reconnects++;
      return;
    }
  }

  #abort(): void {
    this.#aborted = true;
    this.#abortReason = this.#opts.signal?.reason;
    this.#sleeping?.abort();
    this.#conn?.wakeUp();
  }

  /** Saves in the loop; a failed save ends the subscription. */
  async #saveOrEnd(): Promise<void> {
    try {
      await this.#saver.save();
    } catch (err) {
      await this.#shutdown(false).catch(() => {});
      throw err;
    }
  }

  #shutdown(save: boolean): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      this.#saver.halt();
      this.#opts.signal?.removeEventListener("abort", this.#onAbort);
      this.#sleeping?.abort();
      this.#lines = [];
      this.#lineAt = 0;
      await this.#conn?.close();
      await this.#saver.stop(save && this.#durable);
    })();
    return this.#closing;
  }
}
