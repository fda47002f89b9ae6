/**
 * The subscribe route, WebSocket `/{name}` (`/` for the unnamed stream).
 * Before it, the handler checked the connection limit (503) and the read
 * grant (403). Here, after the upgrade: the stream (4404) and the query
 * (4400; a `where=` filter is compiled there, once, against the stream's
 * columns); once the socket is open, the start (subscribe_start.ts: 4416),
 * the stream's subscriber limit (1013), the greeting, and the hand-over to
 * the stream. A refused subscribe gets no greeting: the close frame is its
 * only frame.
 *
 * @module
 */

import {
  type Compression,
  parseSubscribeQuery,
  type SubscribeQuery,
} from "../../wire/subscribe.ts";
import { CloseCode, type CloseReason, encodeCloseReason } from "../../wire/close_reason.ts";
import { compileFilter, type Filter, FilterError } from "../../wire/filter.ts";
import type { LogFields } from "../../common/logger.ts";
import type { Stream } from "../stream/stream.ts";
import type { Subscriber } from "../fanout/subscriber.ts";
import type { FrameDictionary } from "../frames/frame_dictionary.ts";
import { zstdStreamAvailable } from "../frames/zstd_stream.ts";
import { type HttpContext, roleOf } from "./context.ts";
import type { RouteRequest } from "./router.ts";
import { decideSinceStart, decideStart, mirrorLag, type StartDecision } from "./subscribe_start.ts";
import { acceptSocket, refuseSocket } from "./upgrade.ts";
import { parseReason } from "./_respond.ts";

/** Close codes of a server-side drop of an accepted subscriber (logged as `dropped`). */
const DROP_CODES: ReadonlySet<number> = new Set([
  CloseCode.PolicyViolation,
  CloseCode.MessageTooBig,
  CloseCode.InternalError,
  CloseCode.TooSlow,
]);

/**
 * Answers a subscribe: a refusal (a close frame after the upgrade) or an
 * accepted subscription.
 */
export function subscribeRoute(ctx: HttpContext, r: RouteRequest): Response {
  const { req, url, remote } = r;
  const name = r.params.name;
  const stream = ctx.streams.get(name);
  if (!stream) {
    ctx.metrics.protocolRefusal(CloseCode.NotFound);
    const reason = encodeCloseReason({ error: "not_found", stream: name });
    return refuseSocket(ctx, req, CloseCode.NotFound, reason, { remote });
  }
  const refuseQuery = (detail: string): Response => {
    ctx.metrics.protocolRefusal(CloseCode.Protocol);
    const reason = encodeCloseReason({ error: "protocol", detail });
    return refuseSocket(ctx, req, CloseCode.Protocol, reason, { stream: stream.name, remote });
  };
  const q = parseSubscribeQuery(url.searchParams);
  if (!q.ok) return refuseQuery(q.detail);
  // where=: compiled once per subscribe against the stream's columns.
  let filter: Filter | null = null;
  if (q.value.where !== null) {
    try {
      filter = compileFilter(q.value.where, stream.schema.json);
    } catch (err) {
      if (!(err instanceof FilterError)) throw err;
      return refuseQuery(err.detail);
    }
  }
  const who: LogFields = {
    stream: stream.name,
    remote,
    ...(r.grant ? { token_name: r.grant.name } : {}),
  };
  return acceptSocket(
    ctx,
    req,
    (socket) => new SubscribeSession(ctx, socket, stream, q.value, filter, who),
  );
}

/**
 * A WebSocket upgrade whose path is no subscribe's nor publish's: refused
 * with 4400 after the upgrade.
 *
 * @example
 * ```ts ignore
 * if (upgrade && match.kind !== "route") return refuseSubscribePath(ctx, req, url, match.kind === "bad_path", remote);
 * ```
 */
export function refuseSubscribePath(
  ctx: HttpContext,
  req: Request,
  url: URL,
  badEncoding: boolean,
  remote: string,
): Response {
  ctx.metrics.protocolRefusal(CloseCode.Protocol);
  const detail = badEncoding
    ? "path is not valid percent-encoding"
    : `no such path ${url.pathname}`;
  const reason = encodeCloseReason({ error: "protocol", detail });
  return refuseSocket(ctx, req, CloseCode.Protocol, reason, { remote });
}

// One subscribe over its socket's life: the start decided when it opens, then the subscriber.
class SubscribeSession {
  readonly #ctx: HttpContext;
  readonly #socket: WebSocket;
  readonly #stream: Stream;
  readonly #q: SubscribeQuery;
  readonly #filter: Filter | null;
  readonly #who: LogFields;
  readonly #waiting = new AbortController();
  #sub: Subscriber | null = null;
  #closedByServer = false;

  constructor(
    ctx: HttpContext,
    socket: WebSocket,
    stream: Stream,
    q: SubscribeQuery,
    filter: Filter | null,
    who: LogFields,
  ) {
    this.#ctx = ctx;
    this.#socket = socket;
    this.#stream = stream;
    this.#q = q;
    this.#filter = filter;
    this.#who = who;
    // Every close the server starts (the subscriber's too) passes here, so a
    // drop is logged with the code and reason the peer is sent.
    const close = socket.close.bind(socket);
    socket.close = (code?: number, reason?: string) => {
      if (!this.#closedByServer) {
        this.#closedByServer = true;
        if (code !== undefined && DROP_CODES.has(code)) {
          ctx.logger.warn("dropped", {
            ...who,
            code,
            ...parseReason(reason),
            sent: this.#sub?.next,
          });
        }
      }
      close(code, reason);
    };
  }

  // Closes with `code` and a reason refusing the subscribe, logged and counted as `why`.
  #refuse(code: number, reason: CloseReason, why: string | null, warn = false): void {
    if (why !== null) this.#stream._subscribeRefused(why);
    const fields = { ...this.#who, code, ...reason };
    if (warn) this.#ctx.logger.warn("refused", fields);
    else this.#ctx.logger.info("refused", fields);
    this.#socket.close(code, encodeCloseReason(reason));
  }

  get #isOpen(): boolean {
    return this.#socket.readyState === WebSocket.OPEN;
  }

  async open(): Promise<void> {
    const { logger } = this.#ctx;
    const stream = this.#stream;
    const q = this.#q;
    const socket = this.#socket;
    let encoder = null;
    if (q.frames === "arrow") {
      try {
        encoder = await stream.arrowEncoder();
      } catch (err) {
        this.#ctx.metrics.protocolRefusal(CloseCode.Protocol);
        const detail = `frames=arrow: ${err instanceof Error ? err.message : err}`;
        this.#refuse(CloseCode.Protocol, { error: "protocol", detail }, null);
        return;
      }
      if (!this.#isOpen) return;
    }
    // compress=zstd-dict: the stream's dictionary, built on first use;
    // without one (too few rows, no libzstd, a failed write) plain zstd frames.
    let dictionary: FrameDictionary | null = null;
    if (q.compress === "zstd-dict") {
      try {
        dictionary = await stream.dictionary(logger);
      } catch (err) {
        logger.warn("dictionary_failed", { ...this.#who, error: String(err) });
      }
      if (!this.#isOpen) return;
    }
    let d: StartDecision;
    try {
      d = q.since === null
        ? decideStart(stream.log, stream.maxReplay, q)
        : await decideSinceStart(stream.log, stream.maxReplay, q);
    } catch (err) {
      // The time lookup read a damaged file: this subscribe cannot start.
      const detail = err instanceof Error ? err.message : String(err);
      logger.error("since_failed", { ...this.#who, since: q.since, error: detail });
      socket.close(CloseCode.InternalError, encodeCloseReason({ error: "internal", detail }));
      return;
    }
    if (!this.#isOpen) return;
    const role = roleOf(this.#ctx, stream.name);
    const mirror = role.kind === "mirror" ? role.mirror : null;
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
    const from = d.from ?? stream.endOffset;
    const greeting = stream.greeting(d.from, q.frames, this.#filter?.where ?? null);
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
      const reached = await mirror!.reached(from!, this.#waiting.signal);
      if (!reached || !this.#isOpen) {
        if (this.#isOpen) socket.close(CloseCode.GoingAway, "");
        return;
      }
    }
    this.#sub = stream._subscribe(
      socket,
      from ?? 0,
      q.frames,
      this.#filter,
      compress,
      this.#ctx.serving,
    );
    logger.info("subscribe", {
      ...this.#who,
      offset: q.offset,
      ...(q.since !== null ? { since: q.since } : {}),
      from: d.from,
      end_offset: stream.endOffset,
      frames: q.frames,
      ...(this.#filter ? { where: this.#filter.key } : {}),
      ...(compress ? { compress } : {}),
    });
  }

  message(): void {
    // Subscriptions are read-only.
    const reason = encodeCloseReason({ error: "read_only", detail: "subscriptions are read-only" });
    if (this.#sub) this.#sub.close(CloseCode.PolicyViolation, reason);
    else this.#socket.close(CloseCode.PolicyViolation, reason);
  }

  ended(e: Event): void {
    const { logger } = this.#ctx;
    if (e.type === "close") {
      logger.debug("unsubscribe", {
        ...this.#who,
        code: (e as CloseEvent).code,
        sent: this.#sub?.next,
      });
    } else if (!this.#closedByServer) {
      // The runtime's own ends: a frame over its size limit, invalid UTF-8,
      // no pong, a reset. It closes the socket itself.
      const error = e instanceof ErrorEvent ? e.message : "error";
      logger.info("dropped", { ...this.#who, reason: "runtime", error, sent: this.#sub?.next });
    }
    this.#waiting.abort();
    this.#sub?.close();
  }
}
