/**
 * `GET /{name}/head` (`/_/head` for the unnamed stream), `GET /_/streams` and
 * `GET /_/streams/{name}`: a stream's head (built by the stream: see
 * `../stream/views.ts`), the heads of every stream the caller may read, and
 * one of them as the list shows it.
 *
 * @module
 */

import type { StreamHead } from "../../wire/subscribe.ts";
import type { Grant } from "../auth.ts";
import type { Stream } from "../stream/stream.ts";
import { type HttpContext, isPublishable, roleOf } from "./context.ts";
import { roleHead } from "../role.ts";
import type { RouteRequest } from "./router.ts";
import { json } from "./_respond.ts";

/**
 * The heads of the streams `grant` may read (every stream without access control).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Stream } from "../stream/stream.ts";
 * import { readableHeads } from "./head.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const streams = new Map(["a", "b"].map((n) => [n, Stream.ephemeral(n, { schema })]));
 * const ctx = { streams, roles: new Map(), publish: new Set<string>() };
 * deepStrictEqual(readableHeads(ctx, null).map((h) => h.stream), ["a", "b"]);
 * ```
 */
export function readableHeads(
  ctx: Pick<HttpContext, "streams" | "roles" | "publish">,
  grant: Grant | null,
): StreamHead[] {
  const out: StreamHead[] = [];
  for (const s of ctx.streams.values()) {
    if (!grant || grant.mayRead(s.name)) out.push(headOf(ctx, s));
  }
  return out;
}

/**
 * `GET /{name}/head`: the head of the stream the path names.
 */
export function headRoute(ctx: HttpContext, r: RouteRequest): Response {
  return json(headOf(ctx, r.stream));
}

// The head of `s` as this server serves it: whether it takes publishes, and its role's fields.
function headOf(ctx: Pick<HttpContext, "roles" | "publish">, s: Stream): StreamHead {
  return s.head(isPublishable(ctx, s), roleHead(roleOf(ctx, s.name)));
}

/**
 * `GET /_/streams`: the heads of the streams the caller may read, as a JSON
 * array; on a server that creates streams while serving, each with
 * `declared` (by flags or the config file) and its `definition`.
 */
export function streamsRoute(ctx: HttpContext, r: RouteRequest): Response {
  const heads = readableHeads(ctx, r.grant);
  if (ctx.admin === null) return json(heads);
  return json(heads.map((h) => ({ ...h, ...ctx.admin!.describe(h.stream) })));
}

/**
 * `GET /_/streams/{name}`: the stream's head as `GET /_/streams` lists it
 * (on a server that creates streams while serving, with `declared` and its
 * `definition`).
 */
export function streamRoute(ctx: HttpContext, r: RouteRequest): Response {
  const head = headOf(ctx, r.stream);
  if (ctx.admin === null) return json(head);
  return json({ ...head, ...ctx.admin.describe(r.stream.name) });
}
