/**
 * A subscribe, from the upgrade request to the greeting: the checks in
 * order — connection limit (503), permission (403), path (4400), stream
 * (4404), query (4400; a `where=` filter is compiled there, once, against
 * the stream's columns) — then, once the socket is open, the start
 * ({@linkcode decideStart}: 4416), the stream's subscriber limit (1013), the
 * greeting, and the hand-over to the stream. A refused subscribe gets no
 * greeting: the close frame is its only frame.
 *
 * @module
 */

import {
  CloseCode,
  encodeCloseReason,
  type NotReplayableReason,
  parseSubscribeQuery,
  SUBPROTOCOL,
  type SubscribeQuery,
} from "../../client/wire.ts";
import { compileFilter, type Filter, FilterError } from "../../client/filter.ts";
import type { LogFields } from "../../common/logger.ts";
import type { TimeLookup } from "../../log/mod.ts";
import { type Grant, offeredProtocols } from "../auth.ts";
import type { Stream } from "../stream/stream.ts";
import type { Subscriber } from "../fanout/subscriber.ts";
import type { HttpContext } from "./context.ts";
import { denyStream } from "./access.ts";
import { json, parseReason, splitPath } from "./_respond.ts";

/** The start a subscribe asks for, once checked: a first offset, or live. */
export type StartDecision =
  | { ok: true; from: number | null }
  | { ok: false; reason: NotReplayableReason };

/**
 * Decides where a subscribe starts, or why it is refused, checking in the
 * order `not_durable`, `other_stream`, `ahead`, `empty`, `evicted`, `too_old`.
 *
 * @example
 * ```ts
 * import { decideStart } from "./subscribe.ts";
 * const log = { streamId: "0".repeat(32), endOffset: 10, earliest: 1, firstOffset: 1,
 *   rowsBetween: (a: number, b: number) => b - a };
 * const q = { offset: 12, streamId: null, frames: "single" as const, token: null,
 *   where: null, since: null };
 * const d = decideStart(log, null, q);
 * console.log(d.ok ? d.from : d.reason.why); // ahead
 * ```
 */
export function decideStart(
  log: {
    streamId: string;
    endOffset: number;
    earliest: number | null;
    firstOffset: number;
    rowsBetween(from: number, to: number): number;
    /** Last offset served as chunks over HTTP (null: the log keeps no chunks). */
    readonly chunksThrough?: number | null;
  } | null,
  maxReplay: number | null,
  q: SubscribeQuery,
): StartDecision {
  if (!log) {
    if (q.offset !== null) {
      return { ok: false, reason: { error: "not_replayable", why: "not_durable" } };
    }
    if (q.streamId !== null) {
      return { ok: false, reason: { error: "not_replayable", why: "other_stream" } };
    }
    return { ok: true, from: null };
  }
  if (q.streamId !== null && q.streamId !== log.streamId) {
    return { ok: false, reason: { error: "not_replayable", why: "other_stream" } };
  }
  const end = log.endOffset;
  if (q.offset === null) return { ok: true, from: null };
  const earliest = log.earliest;
  let from: number;
  if (q.offset === "earliest") {
    if (earliest === null) return { ok: true, from: end };
    from = earliest;
  } else {
    from = q.offset === 0 ? log.firstOffset : q.offset;
    if (from > end) {
      return {
        ok: false,
        reason: { error: "not_replayable", why: "ahead", offset: q.offset, end_offset: end },
      };
    }
    if (from === end) return { ok: true, from };
    if (earliest === null) {
      return {
        ok: false,
        reason: { error: "not_replayable", why: "empty", offset: q.offset, end_offset: end },
      };
    }
    if (from < earliest) {
      return {
        ok: false,
        reason: { error: "not_replayable", why: "evicted", offset: q.offset, earliest },
      };
    }
  }
  if (maxReplay !== null) {
    const rows = log.rowsBetween(from, end);
    // Refusing helps a client only if it can read the start some other way:
    // over HTTP from the chunks. Rows not sealed into chunks yet can only come
    // through the socket, and how many there are is bounded by sealing.
    const through = log.chunksThrough;
    const refuse = through === undefined || through === null || from <= through;
    if (rows > maxReplay && refuse) {
      return {
        ok: false,
        reason: {
          error: "not_replayable",
          why: "too_old",
          offset: from,
          end_offset: end,
          rows,
          max_replay: maxReplay,
        },
      };
    }
  }
  return { ok: true, from };
}

// --- since= (DESIGN §12) ---

/** What {@linkcode decideSinceStart} needs of a log: {@linkcode decideStart}'s, and the time lookup. */
export type SinceLog = NonNullable<Parameters<typeof decideStart>[0]> & {
  offsetAt(sinceUs: number): Promise<TimeLookup>;
};

// Refusals that come before `evicted` in the order of DESIGN §5.
const BEFORE_EVICTED = new Set(["not_durable", "other_stream", "ahead", "empty"]);

/**
 * Decides where a subscribe with `since` starts (DESIGN §12): the time
 * resolves through the log to the first offset whose append time is at or
 * after it, then acts exactly like `offset=` that offset (every refusal of
 * {@linkcode decideStart} applies, in its order). After the last row it is
 * `offset=end_offset` (live, `replay` null). Before the earliest row held
 * while older rows were dropped: `evicted` with `earliest` (`empty` when
 * nothing is held); when nothing was ever dropped, from the first row. On an
 * ephemeral stream, `not_durable`. A query without `since` is
 * {@linkcode decideStart}'s.
 *
 * @example
 * ```ts
 * import { decideSinceStart } from "./subscribe.ts";
 * const log = { streamId: "0".repeat(32), endOffset: 10, earliest: 1, firstOffset: 1,
 *   rowsBetween: (a: number, b: number) => b - a,
 *   offsetAt: () => Promise.resolve({ offset: 4, ts: 7, exact: true, evicted: false }) };
 * const q = { offset: null, streamId: null, frames: "single" as const, token: null,
 *   where: null, since: 5 };
 * const d = await decideSinceStart(log, null, q);
 * console.log(d.ok ? d.from : d.reason.why); // 4
 * ```
 */
export async function decideSinceStart(
  log: SinceLog | null,
  maxReplay: number | null,
  q: SubscribeQuery,
): Promise<StartDecision> {
  if (q.since === null) return decideStart(log, maxReplay, q);
  if (!log) return { ok: false, reason: { error: "not_replayable", why: "not_durable" } };
  const at = await log.offsetAt(q.since);
  const d = decideStart(log, maxReplay, { ...q, offset: at.offset });
  if (!d.ok && BEFORE_EVICTED.has(d.reason.why)) return d;
  if (at.evicted) {
    const earliest = log.earliest;
    const reason: NotReplayableReason = earliest === null
      ? { error: "not_replayable", why: "empty", since: q.since, end_offset: log.endOffset }
      : { error: "not_replayable", why: "evicted", since: q.since, earliest };
    return { ok: false, reason };
  }
  return d;
}

// --- end of since= ---

// --- followers (DESIGN §15): the lag rule ---

/**
 * On a follower, an offset past its end is `ahead` only when it is past the
 * primary's end too, asked afresh (the last known end when the primary does
 * not answer); otherwise the subscribe is accepted and waits for the rows.
 * Resolves the decision to act on, and whether to wait.
 */
async function followLag(
  stream: Stream,
  q: SubscribeQuery,
  d: StartDecision,
): Promise<{ d: StartDecision; wait: boolean }> {
  const follow = stream._follow;
  if (d.ok || d.reason.why !== "ahead" || !follow || typeof q.offset !== "number") {
    return { d, wait: false };
  }
  const primary = await follow.primaryEnd();
  if (primary === null || q.offset > primary) return { d, wait: false };
  return { d: { ok: true, from: q.offset }, wait: true };
}

// --- end of followers ---

/** Close codes of a server-side drop of an accepted subscriber (logged as `dropped`). */
const DROP_CODES: ReadonlySet<number> = new Set([
  CloseCode.PolicyViolation,
  CloseCode.MessageTooBig,
  CloseCode.InternalError,
  CloseCode.TooSlow,
]);

function upgrade(ctx: HttpContext, req: Request): { socket: WebSocket; response: Response } {
  // The subprotocol to answer with: `streamcast` when offered, else none.
  const protocol = offeredProtocols(req).includes(SUBPROTOCOL) ? SUBPROTOCOL : undefined;
  return ctx.upgrader.upgrade(req, {
    idleTimeoutS: ctx.pingIntervalS,
    ...(protocol ? { protocol } : {}),
  });
}

/** Upgrades, then closes with `code` and `reason` as soon as the socket opens. */
function refuse(
  ctx: HttpContext,
  req: Request,
  code: number,
  reason: string,
  fields: LogFields,
): Response {
  const { socket, response } = upgrade(ctx, req);
  ctx.track(socket);
  ctx.logger.info("refused", { code, ...parseReason(reason), ...fields });
  socket.onopen = () => socket.close(code, reason);
  socket.onclose = () => ctx.untrack(socket);
  socket.onerror = () => ctx.untrack(socket);
  return response;
}

function accept(
  ctx: HttpContext,
  req: Request,
  stream: Stream,
  q: SubscribeQuery,
  filter: Filter | null,
  grant: Grant | null,
  remote: string,
): Response {
  const { logger } = ctx;
  const { socket, response } = upgrade(ctx, req);
  const who: LogFields = {
    stream: stream.name,
    remote,
    ...(grant ? { token_name: grant.name } : {}),
  };
  let sub: Subscriber | null = null;
  let closedByServer = false;
  let ended = false;
  ctx.track(socket);
  // Every close the server starts (the subscriber's too) passes here, so a
  // drop is logged with the code and reason the peer is sent.
  const close = socket.close.bind(socket);
  socket.close = (code?: number, reason?: string) => {
    if (!closedByServer) {
      closedByServer = true;
      if (code !== undefined && DROP_CODES.has(code)) {
        logger.warn("dropped", { ...who, code, ...parseReason(reason), sent: sub?.next });
      }
    }
    close(code, reason);
  };
  const waiting = new AbortController();
  const end = () => {
    if (ended) return;
    ended = true;
    waiting.abort();
    ctx.untrack(socket);
    sub?.close();
  };
  socket.onopen = async () => {
    if (ctx.shuttingDown) {
      socket.close(CloseCode.GoingAway, "");
      return;
    }
    let encoder = null;
    if (q.frames === "arrow") {
      try {
        encoder = await stream.arrowEncoder();
      } catch (err) {
        ctx.metrics.protocolRefusal(CloseCode.Protocol);
        const detail = `frames=arrow: ${err instanceof Error ? err.message : err}`;
        logger.info("refused", { ...who, code: CloseCode.Protocol, error: "protocol", detail });
        socket.close(CloseCode.Protocol, encodeCloseReason({ error: "protocol", detail }));
        return;
      }
      if (socket.readyState !== WebSocket.OPEN) return;
    }
    // compress=zstd-dict (§16): the stream's dictionary, built on first use;
    // without one (too few rows, no libzstd, a failed write) plain zstd frames.
    let dictionary = null;
    if (q.compress === "zstd-dict") {
      try {
        dictionary = await stream.dictionary();
      } catch (err) {
        logger.warn("dictionary_failed", { ...who, error: String(err) });
      }
      if (socket.readyState !== WebSocket.OPEN) return;
    }
    // Decide now, not at request time: the log may have moved since.
    let d: StartDecision;
    try {
      d = q.since === null
        ? decideStart(stream.log, stream.maxReplay, q)
        : await decideSinceStart(stream.log, stream.maxReplay, q);
    } catch (err) {
      // The time lookup read a damaged file: this subscribe cannot start.
      const detail = err instanceof Error ? err.message : String(err);
      logger.error("since_failed", { ...who, since: q.since, error: detail });
      socket.close(CloseCode.InternalError, encodeCloseReason({ error: "internal", detail }));
      return;
    }
    if (socket.readyState !== WebSocket.OPEN) return;
    const lag = await followLag(stream, q, d);
    d = lag.d;
    if (socket.readyState !== WebSocket.OPEN) return;
    if (!d.ok) {
      stream._subscribeRefused(d.reason.why);
      logger.info("refused", { ...who, code: CloseCode.NotReplayable, ...d.reason });
      socket.close(CloseCode.NotReplayable, encodeCloseReason(d.reason));
      return;
    }
    // Counted and joined in this same synchronous step: the limit is exact.
    if (stream.subscribers >= stream.maxSubscribers) {
      stream._subscribeRefused("max_subscribers");
      const reason = { error: "overloaded", limit: "max_subscribers", max: stream.maxSubscribers };
      logger.warn("refused", { ...who, code: CloseCode.TryAgainLater, ...reason });
      socket.close(CloseCode.TryAgainLater, encodeCloseReason(reason));
      return;
    }
    const from = d.from ?? stream.endOffset;
    const frames = q.frames;
    const greeting = stream.greeting(d.from, frames, filter?.where ?? null);
    greeting.since = q.since; // since= (§12): echoed, µs or null
    // compress= (§16): zstd-dict only with a dictionary, which the greeting names.
    const compress = q.compress === "zstd-dict" && !dictionary ? "zstd" : q.compress ?? null;
    if (compress !== null) greeting.compress = "zstd";
    if (dictionary) greeting.dictionary = dictionary.id;
    socket.send(JSON.stringify(greeting));
    // Arrow: the schema message goes first, then record batches.
    if (encoder) socket.send(encoder.schemaMessage());
    if (lag.wait) {
      // A follower behind the offset asked for: the rows come as they arrive.
      const reached = await stream._follow!.reached(from!, waiting.signal);
      if (!reached || socket.readyState !== WebSocket.OPEN) {
        if (socket.readyState === WebSocket.OPEN) socket.close(CloseCode.GoingAway, "");
        return;
      }
    }
    sub = stream._subscribe(socket, from ?? 0, frames, filter, compress);
    logger.info("subscribe", {
      ...who,
      offset: q.offset,
      ...(q.since !== null ? { since: q.since } : {}),
      from: d.from,
      end_offset: stream.endOffset,
      frames,
      ...(filter ? { where: filter.key } : {}),
      ...(compress ? { compress } : {}),
    });
  };
  socket.onmessage = () => {
    // Subscriptions are read-only.
    const reason = encodeCloseReason({
      error: "read_only",
      detail: "subscriptions are read-only",
    });
    if (sub) sub.close(CloseCode.PolicyViolation, reason);
    else socket.close(CloseCode.PolicyViolation, reason);
  };
  socket.onclose = (e) => {
    if (!ended) logger.debug("unsubscribe", { ...who, code: e.code, sent: sub?.next });
    end();
  };
  socket.onerror = (e) => {
    // The runtime's own ends: a frame over its size limit, invalid UTF-8,
    // no pong, a reset. It closes the socket itself.
    if (!ended && !closedByServer) {
      const error = e instanceof ErrorEvent ? e.message : "error";
      logger.info("dropped", { ...who, reason: "runtime", error, sent: sub?.next });
    }
    end();
  };
  return response;
}

/**
 * Answers a WebSocket upgrade request: a refusal (HTTP before the upgrade,
 * or a close frame after it) or an accepted subscribe.
 *
 * @example
 * ```ts ignore
 * if (upgrade) return handleSubscribe(ctx, req, url, grant, remote);
 * ```
 */
export function handleSubscribe(
  ctx: HttpContext,
  req: Request,
  url: URL,
  grant: Grant | null,
  remote: string,
): Response {
  const { logger, metrics } = ctx;
  if (ctx.sockets.size >= ctx.maxConnections) {
    const max = ctx.maxConnections;
    metrics.limitRefusal("max_connections");
    logger.warn("refused", {
      status: 503,
      error: "overloaded",
      limit: "max_connections",
      max,
      remote,
    });
    return json({ error: "overloaded", limit: "max_connections", max }, 503, {
      "retry-after": "1",
    });
  }
  const r = splitPath(url.pathname);
  if (r && grant && !grant.mayRead(r.name)) return denyStream(ctx, r.name, grant, remote);
  if (!r || r.rest !== "") {
    metrics.protocolRefusal(CloseCode.Protocol);
    const detail = r ? `no such path ${url.pathname}` : "path is not valid percent-encoding";
    return refuse(
      ctx,
      req,
      CloseCode.Protocol,
      encodeCloseReason({ error: "protocol", detail }),
      { remote },
    );
  }
  const stream = ctx.streams.get(r.name);
  if (!stream) {
    metrics.protocolRefusal(CloseCode.NotFound);
    return refuse(
      ctx,
      req,
      CloseCode.NotFound,
      encodeCloseReason({ error: "not_found", stream: r.name }),
      { remote },
    );
  }
  const refuseQuery = (detail: string): Response => {
    metrics.protocolRefusal(CloseCode.Protocol);
    return refuse(
      ctx,
      req,
      CloseCode.Protocol,
      encodeCloseReason({ error: "protocol", detail }),
      { stream: stream.name, remote },
    );
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
  return accept(ctx, req, stream, q.value, filter, grant, remote);
}
