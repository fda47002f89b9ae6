/**
 * The stream a publish route names, once the handler granted the publish
 * (403 comes first, so that a 404 does not say which names exist): 404 for
 * an unknown stream, 405 for one not opened for publishing. Private to
 * `server/http/`.
 *
 * @module
 */

import type { Stream } from "../stream/stream.ts";
import { type HttpContext, isPublishable } from "./context.ts";
import { json, notFound } from "./_respond.ts";

/**
 * The stream `name` to publish to, or the refusal to answer with.
 *
 * @example
 * ```ts ignore
 * const stream = publishTarget(ctx, name);
 * if (stream instanceof Response) return stream;
 * ```
 */
export function publishTarget(ctx: HttpContext, name: string): Stream | Response {
  const stream = ctx.streams.get(name);
  if (!stream) return notFound(`no stream ${JSON.stringify(name)}`);
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
  return stream;
}
