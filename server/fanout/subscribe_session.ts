/**
 * A subscribe's session, once the route (`../http/subscribe.ts`) accepted
 * its socket: when the socket opens, the start (`subscribe_start.ts`:
 * 4416; on a mirror, an offset past its end waits for the primary's rows),
 * the stream's subscriber limit (1013), the greeting, and the hand-over to
 * the stream's fan-out. A refused subscribe gets no greeting: the close
 * frame is its only frame. A drop the server starts (1008, 1009, 1011,
 * 4429) is logged with the code and reason the peer is sent.
 *
 * @module
 */

import type { Compression, FrameMode, Greeting, SubscribeQuery } from "../../wire/subscribe.ts";
import { CloseCode, type CloseReason, encodeCloseReason } from "../../wire/close_reason.ts";
import type { Filter, Where } from "../../wire/filter.ts";
import type { LogFields, Logger } from "../../common/logger.ts";
import type { Log } from "../../log/mod.ts";
import type { ArrowFrameEncoder } from "../../arrow/frame_encoder.ts";
import type { StreamMirror } from "../role.ts";
import {
  OPEN,
  parseReason,
  type SessionSocket,
  type SocketEnd,
  type SocketSession,
} from "../socket.ts";
import type { FrameDictionary } from "../frames/frame_dictionary.ts";
import { zstdStreamAvailable } from "../frames/zstd_stream.ts";
import type { Serving } from "./serving.ts";
import type { Subscriber } from "./subscriber.ts";
import { atExpiry } from "../access/expiry.ts";
import { decideSinceStart, decideStart, mirrorLag, type StartDecision } from "./subscribe_start.ts";

/** Close codes of a server-side drop of an accepted subscriber (logged as `dropped`). */
const DROP_CODES: ReadonlySet<number> = new Set([
  CloseCode.PolicyViolation,
  CloseCode.MessageTooBig,
  CloseCode.InternalError,
  CloseCode.TooSlow,
]);

/** What a subscribe session is given by the server serving the stream. */
export interface SubscribeSessionContext {
  /** Where its events go. */
  readonly logger: Logger;
  /** What the subscriber it starts is given (replay gate, logger, send buffer). */
  readonly serving: Serving;
  /** The stream's mirror, when the stream is a mirror's replica (null: not). */
  readonly mirror: StreamMirror | null;
  /** Counts a subscribe refused as a protocol error (4400). */
  protocolRefused(): void;
  /** Counts a subscribe of the stream refused for `why` (a close reason's `why`, or a limit). */
  subscribeRefused(why: string): void;
  /** Starts the stream's subscriber on `socket` from `from` (its greeting sent). */
  subscribe(
    socket: SessionSocket,
    from: number,
    frames: FrameMode,
    filter: Filter | null,
    compress: Compression | null,
    serving: Serving,
    snapshot?: readonly string[] | null,
  ): Subscriber;
}

/** What a subscribe session needs of its stream (a `Stream`). */
export interface SubscribeTarget {
  /** The stream's name. */
  readonly name: string;
  /** Its log, or null when ephemeral. */
  readonly log: Log | null;
  /** Most rows a subscribe may replay (null: unbounded). */
  readonly maxReplay: number | null;
  /** Subscribers now. */
  readonly subscribers: number;
  /** Subscribers at once. */
  readonly maxSubscribers: number;
  /** The log's end, or null when ephemeral. */
  readonly endOffset: number | null;
  /** Its Arrow encoder (throws when the schema cannot be framed as Arrow). */
  arrowEncoder(): Promise<ArrowFrameEncoder>;
  /** Its zstd dictionary (`logger` takes a warning). */
  dictionary(logger: Logger): Promise<FrameDictionary | null>;
  /** The greeting of a subscription from `from`. */
  greeting(from: number | null, frames: FrameMode, where: Where | null): Greeting;
  /**
   * A keyed stream's snapshot (the latest row of each key `filter` matches,
   * below `end`); `"too_many_keys"` past its key limit; null: not keyed.
   */
  snapshot(filter: Filter | null): { end: number; lines: string[] } | "too_many_keys" | null;
}

/** What a subscribe's token says about it (none without access control). */
export interface SubscribeAccess {
  /** The `where=` the greeting echoes: the subscriber's own, not a row-level grant's. */
  readonly echo: Where | null;
  /** When its token expires (ms since the epoch): the socket closes then with 4401. Null: never. */
  readonly expiresAt: number | null;
  /**
   * Whether a row-level grant filters its rows. Such a holder may not read
   * the chunks (`/manifest`, `/chunks/…`), so `max_replay` does not refuse
   * it `too_old`: a refusal helps only a client that can read the start
   * another way. Its replay still takes turns through the replay gate.
   */
  readonly rowLevel?: boolean;
}

/**
 * One subscribe over its socket's life: the start decided when it opens,
 * then the subscriber (see the module doc).
 *
 * @example
 * ```ts ignore
 * return acceptSocket(ctx, req, (socket) => new SubscribeSession(sessionCtx, socket, stream, q, filter, who));
 * ```
 */
export class SubscribeSession implements SocketSession {
  readonly #ctx: SubscribeSessionContext;
  // The socket as the session and its subscriber use it: every close passes the drop log.
  readonly #socket: DropLoggedSocket;
  readonly #stream: SubscribeTarget;
  readonly #q: SubscribeQuery;
  readonly #filter: Filter | null;
  readonly #who: LogFields;
  // The wait for a mirror's rows, made only by a subscribe that waits for them.
  #waiting: AbortController | null = null;
  readonly #access: SubscribeAccess;
  #sub: Subscriber | null = null;
  #cancelExpiry: (() => void) | null = null;
  // Where the subscription starts, once decided (the resume of an expiry before its subscriber).
  #from: number | null = null;

  /**
   * A subscribe of `stream` over `socket` with query `q` and the filter of
   * the rows it gets (`where=`, and a row-level grant's).
   */
  constructor(
    ctx: SubscribeSessionContext,
    socket: SessionSocket,
    stream: SubscribeTarget,
    q: SubscribeQuery,
    filter: Filter | null,
    who: LogFields,
    access: SubscribeAccess = { echo: filter?.where ?? null, expiresAt: null },
  ) {
    this.#ctx = ctx;
    this.#access = access;
    this.#stream = stream;
    this.#q = q;
    this.#filter = filter;
    this.#who = who;
    // Every close the server starts here (the subscriber's too) passes
    // through this socket, so a drop is logged with the code and reason the
    // peer is sent.
    this.#socket = new DropLoggedSocket(socket, this);
  }

  /** Logs a drop the server starts (its close `code` and `reason`), once, as the peer is sent it. */
  closing(code: number | undefined, reason: string | undefined): void {
    if (code === undefined || !DROP_CODES.has(code)) return;
    this.#ctx.logger.warn("dropped", {
      ...this.#who,
      code,
      ...parseReason(reason),
      sent: this.#sub?.next,
    });
  }

  // Closes with `code` and a reason refusing the subscribe, logged and counted as `why`.
  #refuse(code: number, reason: CloseReason, why: string | null, warn = false): void {
    if (why !== null) this.#ctx.subscribeRefused(why);
    const fields = { ...this.#who, code, ...reason };
    if (warn) this.#ctx.logger.warn("refused", fields);
    else this.#ctx.logger.info("refused", fields);
    this.#socket.close(code, encodeCloseReason(reason));
  }

  get #isOpen(): boolean {
    return this.#socket.readyState === OPEN;
  }

  /** Decides the start, greets and hands the socket to the stream's fan-out; or refuses. */
  async open(): Promise<void> {
    const expiresAt = this.#access.expiresAt;
    if (expiresAt !== null) this.#cancelExpiry = atExpiry(expiresAt, () => this.#expired());
    await this.#start();
  }

  // The token expired: closed with 4401 and the offset to resume at.
  #expired(): void {
    if (!this.#isOpen) return;
    const stream = this.#stream;
    const resume = stream.log === null ? null : this.#sub?.next ?? this.#from ?? stream.endOffset;
    const reason = encodeCloseReason({ error: "token_expired", resume });
    this.#ctx.logger.info("token_expired", { ...this.#who, resume });
    if (this.#sub) this.#sub.close(CloseCode.Unauthorized, reason);
    else this.#socket.close(CloseCode.Unauthorized, reason);
  }

  async #start(): Promise<void> {
    const { logger } = this.#ctx;
    const stream = this.#stream;
    const q = this.#q;
    const socket = this.#socket;
    let encoder = null;
    if (q.frames === "arrow") {
      try {
        encoder = await stream.arrowEncoder();
      } catch (err) {
        this.#ctx.protocolRefused();
        const detail = `frames=arrow: ${err instanceof Error ? err.message : err}`;
        this.#refuse(CloseCode.Protocol, { error: "protocol", detail }, null);
        return;
      }
      if (!this.#isOpen) return;
    }
    // compress=zstd-dict: the stream's dictionary, built on first use;
    // without one (too few rows, no libzstd, a failed write) plain zstd frames.
    let dictionary: FrameDictionary | null = null;
    // A row-level grant gets no dictionary: it is trained on rows the grant may leave out.
    if (q.compress === "zstd-dict" && !this.#access.rowLevel) {
      try {
        dictionary = await stream.dictionary(logger);
      } catch (err) {
        logger.warn("dictionary_failed", { ...this.#who, error: String(err) });
      }
      if (!this.#isOpen) return;
    }
    let d: StartDecision;
    try {
      const maxReplay = this.#access.rowLevel ? null : stream.maxReplay;
      d = q.since === null
        ? decideStart(stream.log, maxReplay, q)
        : await decideSinceStart(stream.log, maxReplay, q);
    } catch (err) {
      // The time lookup read a damaged file: this subscribe cannot start.
      const detail = err instanceof Error ? err.message : String(err);
      logger.error("since_failed", { ...this.#who, since: q.since, error: detail });
      socket.close(CloseCode.InternalError, encodeCloseReason({ error: "internal", detail }));
      return;
    }
    if (!this.#isOpen) return;
    const mirror = this.#ctx.mirror;
    const lag = await mirrorLag(mirror, q, d);
    d = lag.d;
    if (!this.#isOpen) return;
    if (!d.ok) {
      this.#refuse(CloseCode.NotReplayable, d.reason, d.reason.why);
      return;
    }
    // Counted and joined in this same synchronous step: the limit is exact.
    if (stream.subscribers >= stream.maxSubscribers) {
      const reason = { error: "overloaded", limit: "max_subscribers", max: stream.maxSubscribers };
      this.#refuse(CloseCode.TryAgainLater, reason, "max_subscribers", true);
      return;
    }
    // snapshot=1: the rows below its end first, then from its end; taken in
    // the step that starts the subscriber, which reads the rows after it.
    let snapshot: { end: number; lines: string[] } | null = null;
    if (q.snapshot) {
      const s = stream.snapshot(this.#filter);
      if (s === null) {
        this.#ctx.protocolRefused();
        const detail = `snapshot=1: stream ${JSON.stringify(stream.name)} has no key`;
        this.#refuse(CloseCode.Protocol, { error: "protocol", detail }, null);
        return;
      }
      if (s === "too_many_keys") {
        const reason = { error: "snapshot_unavailable", why: "too_many_keys" };
        this.#refuse(CloseCode.Unavailable, reason, "too_many_keys", true);
        return;
      }
      snapshot = s;
      d = { ok: true, from: s.end };
    }
    const from = d.from ?? stream.endOffset;
    this.#from = from;
    const greeting = stream.greeting(d.from, q.frames, this.#access.echo);
    if (snapshot !== null) greeting.snapshot = { end: snapshot.end, keys: snapshot.lines.length };
    greeting.since = q.since; // since=: echoed, µs or null
    // compress=zstd-dict only with a dictionary, which the greeting names;
    // compress=zstd-stream only where libzstd loads (else plain zstd frames).
    const compress: Compression | null = (q.compress === "zstd-dict" && !dictionary) ||
        (q.compress === "zstd-stream" && !zstdStreamAvailable())
      ? "zstd"
      : q.compress ?? null;
    if (compress !== null) greeting.compress = compress === "zstd-stream" ? compress : "zstd";
    if (dictionary) greeting.dictionary = dictionary.id;
    socket.send(JSON.stringify(greeting));
    // Arrow: the schema message goes first, then record batches.
    if (encoder) socket.send(encoder.schemaMessage());
    if (lag.wait) {
      // A mirror behind the offset asked for: the rows come as they arrive.
      this.#waiting = new AbortController();
      const reached = await mirror!.reached(from!, this.#waiting.signal);
      if (!reached || !this.#isOpen) {
        if (this.#isOpen) socket.close(CloseCode.GoingAway, "");
        return;
      }
    }
    this.#sub = this.#ctx.subscribe(
      socket,
      from ?? 0,
      q.frames,
      this.#filter,
      compress,
      this.#ctx.serving,
      snapshot?.lines,
    );
    logger.info("subscribe", {
      ...this.#who,
      offset: q.offset,
      ...(q.since !== null ? { since: q.since } : {}),
      from: d.from,
      ...(snapshot !== null ? { snapshot: snapshot.lines.length } : {}),
      end_offset: stream.endOffset,
      frames: q.frames,
      ...(this.#filter ? { where: this.#filter.key } : {}),
      ...(compress ? { compress } : {}),
    });
  }

  /** Closes the socket (a drop is logged with the code and reason the peer is sent). */
  close(code: number, reason: string): void {
    this.#socket.close(code, reason);
  }

  /** A subscriber sent a frame: subscriptions are read-only, the socket is closed. */
  message(): void {
    // Subscriptions are read-only.
    const reason = encodeCloseReason({ error: "read_only", detail: "subscriptions are read-only" });
    if (this.#sub) this.#sub.close(CloseCode.PolicyViolation, reason);
    else this.#socket.close(CloseCode.PolicyViolation, reason);
  }

  /** The socket ended: the subscriber, or the wait for a mirror's rows, stops. */
  ended(end: SocketEnd): void {
    const { logger } = this.#ctx;
    if (end.kind === "close") {
      logger.debug("unsubscribe", { ...this.#who, code: end.code, sent: this.#sub?.next });
    } else if (!this.#socket.closedByServer) {
      // The runtime's own ends: a frame over its size limit, invalid UTF-8,
      // no pong, a reset. It closes the socket itself.
      logger.info("dropped", {
        ...this.#who,
        reason: "runtime",
        error: end.message,
        sent: this.#sub?.next,
      });
    }
    this.#waiting?.abort();
    this.#cancelExpiry?.();
    this.#sub?.close();
  }
}

/**
 * A subscriber's socket as its session and subscriber use it: the runtime's
 * socket, with the first close the server starts logged by the session when
 * it is a drop. A class, so that each subscriber holds one small object and
 * no closures of its own.
 */
class DropLoggedSocket implements SessionSocket {
  readonly #socket: SessionSocket;
  readonly #session: SubscribeSession;
  /** Whether the server started closing the socket. */
  closedByServer = false;

  constructor(socket: SessionSocket, session: SubscribeSession) {
    this.#socket = socket;
    this.#session = session;
  }

  get readyState(): number {
    return this.#socket.readyState;
  }

  get bufferedAmount(): number {
    return this.#socket.bufferedAmount;
  }

  send(data: string | Uint8Array): void {
    this.#socket.send(data);
  }

  close(code?: number, reason?: string): void {
    if (!this.closedByServer) {
      this.closedByServer = true;
      this.#session.closing(code, reason);
    }
    this.#socket.close(code, reason);
  }
}
