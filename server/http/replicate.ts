/**
 * The replication socket, `/{name}/replicate?node=N` (`/_/replicate` for
 * the unnamed stream; docs/SPEC.md §11.7): a cluster follower's connection
 * to the leader, upgraded and handed to the stream's cluster node, which
 * ships it the leader's commits (a node that does not lead closes it with
 * 4409 `not_leader`). Guarded like publishing: a token that publishes to
 * the stream. A stream no cluster runs is 404; a missing or repeated `node`
 * is 400; both before the upgrade. The socket does not count against
 * `--max-connections` being refused: a leader must not lose its followers
 * to a crowd of subscribers.
 *
 * @module
 */

import { SUBPROTOCOL } from "../../client/wire.ts";
import { offeredProtocols } from "../auth.ts";
import type { HttpContext } from "./context.ts";
import type { RouteRequest } from "./router.ts";
import { json, notFound } from "./_respond.ts";

/**
 * Answers a replicate upgrade for the stream the path names.
 *
 * @example
 * ```ts ignore
 * { method: "GET", upgrade: true, pattern: "/{name}/replicate", name: "replicate", handle: replicateRoute }
 * ```
 */
export function replicateRoute(ctx: HttpContext, r: RouteRequest): Response {
  const name = r.params.name;
  const cluster = ctx.streams.get(name)?._cluster ?? null;
  if (cluster === null) return notFound(`no clustered stream ${JSON.stringify(name)}`);
  const nodes = r.url.searchParams.getAll("node");
  if (nodes.length !== 1 || nodes[0] === "") {
    return json({ error: "bad_request", detail: "give the follower's name once: ?node=NAME" }, 400);
  }
  // A follower showing a token offers it beside `streamcast`, which is answered.
  const protocol = offeredProtocols(r.req).includes(SUBPROTOCOL) ? SUBPROTOCOL : undefined;
  const { socket, response } = ctx.upgrader.upgrade(r.req, {
    idleTimeoutS: 0,
    ...(protocol ? { protocol } : {}),
  });
  ctx.track(socket);
  socket.addEventListener("close", () => ctx.untrack(socket), { once: true });
  socket.addEventListener("error", () => ctx.untrack(socket), { once: true });
  ctx.logger.debug("replicate_open", { stream: name, node: nodes[0], remote: r.remote });
  cluster.accept(socket, nodes[0]);
  return response;
}
