/**
 * The one way a request becomes a WebSocket, for subscribers and publishers
 * alike: refused with HTTP 503 (`Retry-After: 1`) before the upgrade while
 * the server holds `maxConnections` sockets (or fewer, as many as its
 * open-files limit leaves room for); upgraded with the `streamcast`
 * subprotocol when offered and the server's ping interval; counted among
 * the open sockets from the upgrade until its close or error event; closed
 * with 1001 if it opens while the server shuts down. A refusal after the
 * upgrade (a bad query, an unknown stream) is a close frame as soon as the
 * socket opens, and nothing else.
 *
 * @module
 */

import { SUBPROTOCOL } from "../../wire/subscribe.ts";
import { CloseCode } from "../../wire/close_reason.ts";
import type { LogFields } from "../../common/logger.ts";
import { offeredProtocols } from "../auth.ts";
import { parseReason, type SessionSocket, type SocketEnd, type SocketSession } from "../socket.ts";
import { boundForStreams } from "../open_files.ts";
import type { HttpContext } from "./context.ts";
import { json } from "./_respond.ts";

/**
 * The 503 for an upgrade while the server holds its `maxConnections`
 * sockets, or as many as its open-files limit leaves room for when that is
 * fewer (`openFilesBound`; the refusal then names `open_files`), counted and
 * logged; or null when there is room. The answer closes its connection
 * (`Connection: close`): a server out of room keeps no idle connection open.
 *
 * @example
 * ```ts ignore
 * const full = refuseWhenFull(ctx, remote);
 * if (full) return full;
 * ```
 */
export function refuseWhenFull(ctx: HttpContext, remote: string): Response | null {
  const { maxConnections } = ctx.settings;
  // Streams created since the start hold descriptors the start-time bound did not count.
  const openFilesBound = ctx.settings.openFilesBound === null
    ? null
    : boundForStreams(ctx.settings.openFilesBound, ctx.streamsAtStart, ctx.streams.size);
  const byFiles = openFilesBound !== null && openFilesBound < maxConnections;
  const max = byFiles ? openFilesBound : maxConnections;
  if (ctx.sockets.size < max) return null;
  const limit = byFiles ? "open_files" : "max_connections";
  ctx.metrics.limitRefusal(limit);
  ctx.logger.warn("refused", { status: 503, error: "overloaded", limit, max, remote });
  return json({ error: "overloaded", limit, max }, 503, {
    "retry-after": "1",
    connection: "close",
  });
}

/**
 * Upgrades `req` and runs `session(socket)` over the socket's life (the
 * session sees the socket's narrow side, `../socket.ts`); returns the
 * response that completes the upgrade. `stream`: the stream the socket is
 * open on (a subscriber's, a publisher's), whose deletion closes it.
 *
 * @example
 * ```ts ignore
 * return acceptSocket(ctx, req, (socket) => ({ open() {}, message() {}, ended() {} }));
 * ```
 */
export function acceptSocket(
  ctx: HttpContext,
  req: Request,
  session: (socket: SessionSocket) => SocketSession,
  stream?: string,
): Response {
  // The subprotocol to answer with: `streamcast` when offered, else none.
  const protocol = offeredProtocols(req).includes(SUBPROTOCOL) ? SUBPROTOCOL : undefined;
  const { socket, response } = ctx.upgrader.upgrade(req, {
    idleTimeoutS: ctx.settings.pingIntervalS,
    ...(protocol ? { protocol } : {}),
  });
  const s = session(socket);
  const close = (code: number, reason: string) =>
    s.close ? s.close(code, reason) : socket.close(code, reason);
  ctx.track(socket, close, stream);
  let ended = false;
  const end = (e: Event) => {
    if (ended) return;
    ended = true;
    ctx.untrack(socket, stream);
    s.ended(endOf(e));
  };
  socket.onopen = () => {
    if (ctx.shuttingDown) close(CloseCode.GoingAway, "");
    else return s.open();
  };
  socket.onmessage = (e) => s.message(e.data);
  socket.onclose = end;
  socket.onerror = end;
  return response;
}

/**
 * Upgrades `req` only to close the socket with `code` and `reason` as soon as
 * it opens (the refusal is logged with `fields`); returns the response that
 * completes the upgrade.
 *
 * @example
 * ```ts ignore
 * return refuseSocket(ctx, req, 4404, encodeCloseReason({ error: "not_found", stream }), { remote });
 * ```
 */
export function refuseSocket(
  ctx: HttpContext,
  req: Request,
  code: number,
  reason: string,
  fields: LogFields,
): Response {
  ctx.logger.info("refused", { code, ...parseReason(reason), ...fields });
  return acceptSocket(ctx, req, (socket) => ({
    open: () => socket.close(code, reason),
    message: () => {},
    ended: () => {},
  }));
}

// A socket's close or error event as a session sees it.
function endOf(e: Event): SocketEnd {
  if (e.type === "close") return { kind: "close", code: (e as CloseEvent).code };
  return { kind: "error", message: e instanceof ErrorEvent ? e.message : "error" };
}
