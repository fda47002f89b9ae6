/**
 * Every route of a server, declared once: what `serve` answers, and what
 * docs/SPEC.md's route table lists. The handler matches a request against
 * them in this order (router.ts), checks who may use the route, looks up the
 * stream its path names when it needs one, counts the request under the
 * route's name, and calls it.
 *
 * | route | counted as | who may use it |
 * |---|---|---|
 * | `GET /_/health` | health | anyone |
 * | `GET /_/client.js` | viewer | anyone |
 * | `GET /_/viewer.js` | viewer | anyone |
 * | `GET /_/metrics` | metrics | a token for every stream |
 * | `GET /_/streams` | streams | any token |
 * | `GET /_/streams/{name}` | streams | a token that reads it |
 * | `PUT /_/streams/{stream}` | admin | an admin token (`"admin": true`); without tokens, a loopback client |
 * | `DELETE /_/streams/{stream}` | admin | an admin token; without tokens, a loopback client |
 * | `GET /` | viewer | any token |
 * | WebSocket `/{name}` | upgrade | a token that reads the stream |
 * | WebSocket `/{name}/publish` | upgrade | a token that publishes to it |
 * | WebSocket `/{name}/replicate` | replicate | a cluster member: its name registered live in etcd, its registration's instance id shown, and (with tokens or `--cluster-token`) the cluster's token; a grant to read or publish is not enough |
 * | `POST /{name}` | publish | a token that publishes to it |
 * | `GET /{name}` | viewer | a token that reads it |
 * | `GET /{name}/head` | head | a token that reads it |
 * | `GET /{name}/at` | at | a token that reads it (a row-level grant gets `ts` null) |
 * | `GET /{name}/latest` | latest | a token that reads it (a row-level grant gets its rows) |
 * | `GET /{name}/manifest` | manifest | a token that reads every row of it (not a row-level grant) |
 * | `GET /{name}/chunks/{file}` | chunk | a token that reads every row of it (not a row-level grant) |
 * | `GET /{name}/dictionaries/{id}` | dictionary | a token that reads every row of it (a dictionary is trained on rows) |
 *
 * `{name}` is a stream's name; the unnamed stream's paths are `/` and `/_/…`
 * (`/_/head`, `/_/publish`). `GET` routes answer `HEAD` too.
 *
 * @module
 */

import { atResponse } from "./at.ts";
import { latestResponse } from "./latest.ts";
import { chunkResponse, manifestResponse } from "./chunks.ts";
import { dictionaryResponse } from "./dictionaries.ts";
import { headRoute, streamRoute, streamsRoute } from "./head.ts";
import { type Degraded, healthResponse } from "./health.ts";
import { metricsResponse } from "./metrics.ts";
import { publishPostRoute } from "./publish_post.ts";
import { publishSocketRoute } from "./publish_socket.ts";
import { replicateRoute } from "./replicate.ts";
import type { Access, Route } from "./router.ts";
import { subscribeRoute } from "./subscribe.ts";
import { deleteStreamRoute, putStreamRoute } from "./streams_admin.ts";
import { VIEWER_ASSETS, viewerAssetRoute, viewerPageRoute } from "./viewer.ts";
import { rowGrant } from "../access/row_grant.ts";
import { json } from "./_respond.ts";

function get(
  pattern: string,
  name: Route["name"],
  access: Access,
  handle: Route["handle"],
  stream = access === "read" || access === "rows",
): Route {
  return { method: "GET", upgrade: false, pattern, name, access, stream, handle };
}

function admin(method: "PUT" | "DELETE", handle: Route["handle"]): Route {
  const pattern = "/_/streams/{stream}";
  return { method, upgrade: false, pattern, name: "admin", access: "admin", stream: false, handle };
}

/**
 * The routes, in the order they are matched.
 */
export const ROUTES: readonly Route[] = Object.freeze([
  get("/_/health", "health", "public", (ctx) => {
    const degraded: Degraded[] = [];
    for (const [stream, s] of ctx.streams) {
      if (s.diskFull !== null) degraded.push({ stream, why: "disk_full" });
      if (s.log?.chunks.stopped) degraded.push({ stream, why: "chunks_stopped" });
    }
    return healthResponse(ctx.shuttingDown, ctx.streams.size, degraded);
  }),
  ...VIEWER_ASSETS.map((path) => get(path, "viewer", "public", viewerAssetRoute)),
  get("/_/metrics", "metrics", "all", (ctx) => metricsResponse(ctx.metrics.registry)),
  get("/_/streams", "streams", "token", streamsRoute),
  get("/_/streams/{name}", "streams", "read", streamRoute),
  admin("PUT", putStreamRoute),
  admin("DELETE", deleteStreamRoute),
  get("/", "viewer", "token", viewerPageRoute),
  {
    method: "GET",
    upgrade: true,
    pattern: "/{name}",
    name: "upgrade",
    access: "read",
    stream: false,
    handle: subscribeRoute,
  },
  {
    method: "GET",
    upgrade: true,
    pattern: "/{name}/publish",
    name: "upgrade",
    access: "publish",
    stream: false,
    handle: publishSocketRoute,
  },
  {
    method: "GET",
    upgrade: true,
    pattern: "/{name}/replicate",
    name: "replicate",
    access: "cluster",
    stream: false,
    handle: replicateRoute,
  },
  {
    method: "POST",
    upgrade: false,
    pattern: "/{name}",
    name: "publish",
    access: "publish",
    stream: false,
    handle: publishPostRoute,
  },
  get("/{name}", "viewer", "read", viewerPageRoute),
  get("/{name}/head", "head", "read", headRoute),
  get(
    "/{name}/at",
    "at",
    "read",
    (_, r) => atResponse(r.stream, r.url, (r.grant?.whereFor(r.stream.name) ?? null) === null),
  ),
  get("/{name}/latest", "latest", "read", (_, r) => {
    const g = rowGrant(r.grant, r.stream.name, r.stream.schema.json);
    if (!g.ok) return json({ error: "forbidden", detail: g.detail }, 403);
    return latestResponse(r.stream, r.url, g.filter);
  }),
  get("/{name}/manifest", "manifest", "rows", (_, r) => manifestResponse(r.stream)),
  get(
    "/{name}/chunks/{file}",
    "chunk",
    "rows",
    (_, r) => chunkResponse(r.req, r.stream, r.params.file),
  ),
  get(
    "/{name}/dictionaries/{id}",
    "dictionary",
    "rows",
    (_, r) => dictionaryResponse(r.req, r.stream, r.params.id),
  ),
]);
