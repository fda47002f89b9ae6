/**
 * `GET /{name}/head` (`/_/head` for the unnamed stream) and `GET /_/streams`:
 * a stream's head (built by the stream: see `../stream/views.ts`), and the
 * heads of every stream the caller may read.
 *
 * @module
 */

import type { StreamHead } from "../../wire/subscribe.ts";
import type { Grant } from "../auth.ts";
import { type HttpContext, isPublishable } from "./context.ts";
import type { RouteRequest } from "./router.ts";
import { json } from "./_respond.ts";

/**
 * The heads of the streams `grant` may read (every stream without access control).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { checkServeOptions } from "../serve_options.ts";
 * import { Stream } from "../stream/stream.ts";
 * import { readableHeads } from "./head.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const streams = new Map(["a", "b"].map((n) => [n, Stream.ephemeral(n, { schema })]));
 * const ctx = { streams, settings: checkServeOptions({}) };
 * deepStrictEqual(readableHeads(ctx, null).map((h) => h.stream), ["a", "b"]);
 * ```
 */
export function readableHeads(
  ctx: Pick<HttpContext, "streams" | "settings">,
  grant: Grant | null,
): StreamHead[] {
  const out: StreamHead[] = [];
  for (const s of ctx.streams.values()) {
    if (!grant || grant.mayRead(s.name)) out.push(s.head(isPublishable(ctx, s)));
  }
  return out;
}

/**
 * `GET /{name}/head`: the head of the stream the path names.
 */
export function headRoute(ctx: HttpContext, r: RouteRequest): Response {
  return json(r.stream.head(isPublishable(ctx, r.stream)));
}

/**
 * `GET /_/streams`: the heads of the streams the caller may read, as a JSON array.
 */
export function streamsRoute(ctx: HttpContext, r: RouteRequest): Response {
  return json(readableHeads(ctx, r.grant));
}
