/**
 * The replication socket, `/{name}/replicate?node=N` (`/_/replicate` for
 * the unnamed stream; docs/SPEC.md §11.7): a cluster follower's connection
 * to the leader, upgraded and handed to the stream's cluster node, which
 * ships it the leader's commits (a node that does not lead closes it with
 * 4409 `not_leader`).
 *
 * Only a cluster member opens it. Checked in this order, each answering
 * before the upgrade:
 *
 * 1. The cluster's credential, when the server checks tokens or has a
 *    cluster token: the bearer token must be the cluster's token
 *    (`--cluster-token`) or a tokens-file entry with `"cluster": true` (no
 *    token 401, an unknown one 401, any other grant — to read or to publish
 *    — 403).
 * 2. A stream no cluster runs is 404; a missing or repeated `node` is 400.
 * 3. `--max-replica-links` sockets open already: 503 (these sockets do not
 *    count against `--max-connections`, nor subscribers against them).
 * 4. The node: its name must be registered live in etcd, and the follower
 *    must show its registration's instance id (`cluster/nodes.ts`) in the
 *    `streamcast-instance` header; otherwise 403 — so a second socket under
 *    a member's name cannot displace the member's own without that proof.
 *    etcd not answering: 503.
 *
 * The socket is pinged (WebSocket pings): one silent for the replica lag
 * (`--replica-lag-ms`) is closed.
 *
 * @module
 */

import { SUBPROTOCOL } from "../../wire/subscribe.ts";
import { INSTANCE_HEADER } from "../../cluster/replication_wire.ts";
import { findToken, offeredProtocols, sameToken, unauthorized } from "../auth.ts";
import { type HttpContext, roleOf } from "./context.ts";
import type { DenyWhy } from "./metrics.ts";
import type { RouteRequest } from "./router.ts";
import { json, notFound, streamField } from "./_respond.ts";

// The replication sockets open on each server (a handler's context is its server's).
const LINKS = new WeakMap<HttpContext, Set<WebSocket>>();

function linksOf(ctx: HttpContext): Set<WebSocket> {
  let set = LINKS.get(ctx);
  if (set === undefined) LINKS.set(ctx, set = new Set());
  return set;
}

const NOT_CLUSTER_DETAIL = "opening a replication link needs the cluster's token " +
  '(--cluster-token, or a tokens-file entry with "cluster": true); a grant to read ' +
  "or publish is not enough";

// Counts and logs a denial, and returns its answer `res`.
function deny(
  ctx: HttpContext,
  r: RouteRequest,
  res: Response,
  why: DenyWhy,
  fields: Record<string, unknown>,
): Response {
  ctx.metrics.denial(why);
  ctx.logger.warn("denied", {
    status: res.status,
    why,
    route: "replicate",
    stream: streamField(r.params.name),
    remote: r.remote,
    ...fields,
  });
  return res;
}

/**
 * The answer refusing a request without the cluster's credential, or null
 * when it shows it (or when neither tokens nor a cluster token are set).
 */
function refuseCredential(
  ctx: HttpContext,
  r: RouteRequest,
  clusterToken: string | null,
): Response | null {
  if (ctx.tokens === null && clusterToken === null) return null;
  const f = findToken(r.req, r.url, true);
  if (!f.ok) {
    return deny(ctx, r, json({ error: "bad_request", detail: f.detail }, 400), "bad_request", {
      detail: f.detail,
    });
  }
  if (f.token === null) return deny(ctx, r, unauthorized(false), "missing_token", {});
  if (f.carrier === "subprotocol" && !offeredProtocols(r.req).includes(SUBPROTOCOL)) {
    // Answering with the bearer subprotocol would echo the token.
    const detail = `offer the ${SUBPROTOCOL} subprotocol beside bearer.TOKEN`;
    return deny(ctx, r, json({ error: "bad_request", detail }, 400), "bad_request", { detail });
  }
  if (clusterToken !== null && sameToken(f.token, clusterToken)) return null;
  const grant = ctx.tokens?.lookup(f.token) ?? null;
  if (grant === null) {
    return deny(ctx, r, unauthorized(true), "invalid_token", { carrier: f.carrier });
  }
  if (grant.cluster) return null;
  const res = json(
    { error: "forbidden", route: "replicate", detail: NOT_CLUSTER_DETAIL },
    403,
    { "www-authenticate": `Bearer realm="streamcast", error="insufficient_scope"` },
  );
  return deny(ctx, r, res, "forbidden", { token_name: grant.name });
}

function refuseWhenFull(ctx: HttpContext, r: RouteRequest, open: number): Response | null {
  const max = ctx.settings.maxReplicaLinks;
  if (open < max) return null;
  ctx.metrics.limitRefusal("max_replica_links");
  ctx.logger.warn("refused", {
    status: 503,
    error: "overloaded",
    limit: "max_replica_links",
    max,
    remote: r.remote,
  });
  return json(
    {
      error: "overloaded",
      limit: "max_replica_links",
      max,
      detail: `${max} replication links are open on this server (--max-replica-links)`,
    },
    503,
    { "retry-after": "1" },
  );
}

/**
 * Answers a replicate upgrade for the stream the path names (see the
 * module doc for who may open it).
 */
export async function replicateRoute(ctx: HttpContext, r: RouteRequest): Promise<Response> {
  const name = r.params.name;
  const role = ctx.streams.has(name) ? roleOf(ctx, name) : null;
  const cluster = role?.kind === "member" ? role.member : null;
  // Without a cluster there is no cluster token: any valid token then (the 404 follows).
  const denied = refuseCredential(ctx, r, cluster?.token ?? null);
  if (denied) return denied;
  if (cluster === null) return notFound(`no clustered stream ${JSON.stringify(name)}`);
  const nodes = r.url.searchParams.getAll("node");
  if (nodes.length !== 1 || nodes[0] === "") {
    return json({ error: "bad_request", detail: "give the follower's name once: ?node=NAME" }, 400);
  }
  const node = nodes[0];
  const links = linksOf(ctx);
  const full = refuseWhenFull(ctx, r, links.size);
  if (full) return full;
  let why: string | null;
  try {
    why = await cluster.admit(node, r.req.headers.get(INSTANCE_HEADER));
  } catch (err) {
    const detail = `cannot read node ${JSON.stringify(node)}'s registration in etcd: ${
      err instanceof Error ? err.message : String(err)
    }`.slice(0, 300);
    ctx.logger.warn("replicate_unchecked", { stream: streamField(name), node, detail });
    return json({ error: "cluster_unavailable", detail }, 503, { "retry-after": "1" });
  }
  if (why !== null) {
    const res = json({ error: "forbidden", route: "replicate", node, detail: why }, 403);
    return deny(ctx, r, res, "forbidden", { node, detail: why });
  }
  // Others may have been let in while etcd answered.
  const stillFull = refuseWhenFull(ctx, r, links.size);
  if (stillFull) return stillFull;
  // A follower showing a token offers it beside `streamcast`, which is answered.
  const protocol = offeredProtocols(r.req).includes(SUBPROTOCOL) ? SUBPROTOCOL : undefined;
  const { socket, response } = ctx.upgrader.upgrade(r.req, {
    // Pinged; no pong within the replica lag closes it.
    idleTimeoutS: cluster.replicaLagMs / 1000,
    ...(protocol ? { protocol } : {}),
  });
  links.add(socket);
  ctx.track(socket);
  const gone = () => {
    links.delete(socket);
    ctx.untrack(socket);
  };
  socket.addEventListener("close", gone, { once: true });
  socket.addEventListener("error", gone, { once: true });
  ctx.logger.debug("replicate_open", { stream: streamField(name), node, remote: r.remote });
  cluster.accept(socket, node);
  return response;
}
