/**
 * The stream a publish route names, once the handler granted the publish
 * (403 comes first, so that a 404 does not say which names exist): 404 for
 * an unknown stream, 405 for one not opened for publishing; on a cluster
 * node that does not take it now (docs/SPEC.md §11), 307 to the leader's same
 * path and query (`Location`), or 503 `no_leader` (with a `detail` when
 * this node may not lead: its log may lack committed rows) /
 * `not_enough_replicas` (`Retry-After: 1`). Private to `server/http/`.
 *
 * @module
 */

import type { Stream } from "../stream/stream.ts";
import { type HttpContext, isPublishable, roleOf } from "./context.ts";
import { json, streamMissing } from "./_respond.ts";

/**
 * The stream `name` to publish to, or the refusal to answer with.
 *
 * @example
 * ```ts ignore
 * const stream = publishTarget(ctx, name, url);
 * if (stream instanceof Response) return stream;
 * ```
 */
export function publishTarget(ctx: HttpContext, name: string, url: URL): Stream | Response {
  const stream = ctx.streams.get(name);
  if (!stream) return streamMissing(ctx.reopening, name);
  if (!isPublishable(ctx, stream)) {
    ctx.publishMetrics.refused(name, "not_publishable");
    return json(
      {
        error: "not_publishable",
        stream: name,
        detail: "this stream is not opened for publishing (serve --publish NAME)",
      },
      405,
      { allow: "GET, HEAD" },
    );
  }
  const role = roleOf(ctx, name);
  const refusal = role.kind === "member" ? role.member.publishable() : null;
  if (refusal === null) return stream;
  ctx.publishMetrics.refused(name, refusal.error);
  if (refusal.error === "not_leader") {
    const location = new URL(url.pathname + url.search, refusal.leader).href;
    return json({ error: "not_leader", leader: refusal.leader }, 307, { location });
  }
  const detail = refusal.error === "no_leader" ? refusal.detail : undefined;
  return json({ error: refusal.error, ...(detail ? { detail } : {}) }, 503, { "retry-after": "1" });
}
