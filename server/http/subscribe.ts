/**
 * The subscribe route, WebSocket `/{name}` (`/` for the unnamed stream).
 * Before it, the handler checked the connection limit (503) and the read
 * grant (403). Here, after the upgrade: the stream (4404) and the query
 * (4400; a `where=` filter is compiled there, once, against the stream's
 * columns); once the socket is open, the session
 * (`../fanout/subscribe_session.ts`): the start (4416), the stream's
 * subscriber limit (1013), the greeting, and the hand-over to the stream's
 * fan-out. A refused subscribe gets no greeting: the close frame is its only
 * frame.
 *
 * @module
 */

import { parseSubscribeQuery } from "../../wire/subscribe.ts";
import { CloseCode, encodeCloseReason } from "../../wire/close_reason.ts";
import { bothFilters, compileFilter, type Filter, FilterError } from "../../wire/filter.ts";
import type { LogFields, Logger } from "../../common/logger.ts";
import { rowGrant } from "../access/row_grant.ts";
import { SubscribeSession, type SubscribeSessionContext } from "../fanout/subscribe_session.ts";
import { type Stream, type StreamInside, streamInside } from "../stream/stream.ts";
import type { Serving } from "../fanout/serving.ts";
import type { StreamMirror } from "../role.ts";
import { type HttpContext, roleOf } from "./context.ts";
import type { RouteRequest } from "./router.ts";
import { acceptSocket, refuseSocket } from "./upgrade.ts";

/**
 * Answers a subscribe: a refusal (a close frame after the upgrade) or an
 * accepted subscription.
 */
export function subscribeRoute(ctx: HttpContext, r: RouteRequest): Response {
  const { req, url, remote } = r;
  const name = r.params.name;
  const stream = ctx.streams.get(name);
  if (!stream && ctx.reopening.has(name)) {
    // Opening again on this node: come back in a moment.
    ctx.metrics.protocolRefusal(CloseCode.TryAgainLater);
    const reason = encodeCloseReason({ error: "unavailable", stream: name });
    return refuseSocket(ctx, req, CloseCode.TryAgainLater, reason, { remote });
  }
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
  // A row-level grant: its filter ANDed with the subscriber's own, as one
  // filter, so that the filter groups share it like any other.
  const g = rowGrant(r.grant, stream.name, stream.schema.json);
  if (!g.ok) {
    // The token's filter does not fit the stream: its holder may read none of it.
    const reason = encodeCloseReason({ error: "forbidden", detail: g.detail });
    return refuseSocket(ctx, req, CloseCode.Unauthorized, reason, who);
  }
  const rows = g.filter === null
    ? filter
    : filter === null
    ? g.filter
    : bothFilters(g.filter, filter);
  const access = {
    echo: filter?.where ?? null,
    expiresAt: r.grant?.expiresAt ?? null,
    rowLevel: g.filter !== null,
  };
  return acceptSocket(
    ctx,
    req,
    (socket) =>
      new SubscribeSession(sessionContext(ctx, stream), socket, stream, q.value, rows, who, access),
    stream.name,
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

// Each stream's session context, made on its first subscribe and shared by
// every later one (a subscriber then holds no context of its own).
const contexts = new WeakMap<Stream, { ctx: HttpContext; session: SubscribeSessionContext }>();

// What the subscribe sessions of `stream` are given of the server's context and of the stream.
function sessionContext(ctx: HttpContext, stream: Stream): SubscribeSessionContext {
  const known = contexts.get(stream);
  if (known?.ctx === ctx) return known.session;
  const session = new StreamSessionContext(ctx, stream);
  contexts.set(stream, { ctx, session });
  return session;
}

// The session context of one stream on one server. The stream's role is
// read at each subscribe: a replica can be promoted while the server runs.
class StreamSessionContext implements SubscribeSessionContext {
  readonly #ctx: HttpContext;
  readonly #name: string;
  readonly #inside: StreamInside;

  constructor(ctx: HttpContext, stream: Stream) {
    this.#ctx = ctx;
    this.#name = stream.name;
    this.#inside = streamInside(stream);
  }

  get logger(): Logger {
    return this.#ctx.logger;
  }

  get serving(): Serving {
    return this.#ctx.serving;
  }

  get mirror(): StreamMirror | null {
    const role = roleOf(this.#ctx, this.#name);
    return role.kind === "mirror" ? role.mirror : null;
  }

  protocolRefused(): void {
    this.#ctx.metrics.protocolRefusal(CloseCode.Protocol);
  }

  subscribeRefused(why: string): void {
    this.#inside.subscribeRefused(why);
  }

  subscribe(
    ...args: Parameters<SubscribeSessionContext["subscribe"]>
  ): ReturnType<SubscribeSessionContext["subscribe"]> {
    return this.#inside.subscribe(...args);
  }
}
