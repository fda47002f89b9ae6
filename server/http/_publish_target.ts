/**
 * The checks both publish routes make before anything else, in order: the
 * publish grant (403, before the stream is looked up, so that a 404 does not
 * say which names exist), the stream (404), and whether it is opened for
 * publishing (405).
 *
 * @module
 */

import { forbidden, type Grant } from "../auth.ts";
import type { Stream } from "../stream/stream.ts";
import type { HttpContext } from "./context.ts";
import { deny } from "./access.ts";
import { json, notFound, streamField } from "./_respond.ts";

/** Whether `stream` takes rows over the publish routes (what `/head` says as `publish`). */
export function isPublishable(ctx: HttpContext, stream: Stream): boolean {
  return ctx.publishing.streams.has(stream.name) && stream.log !== null;
}

/** The stream `name` to publish to, or the refusal to answer with. */
export function publishTarget(
  ctx: HttpContext,
  name: string,
  grant: Grant | null,
  remote: string,
): Stream | Response {
  const p = ctx.publishing;
  if (grant && !grant.mayPublish(name)) {
    return deny(ctx, forbidden({ stream: name }), "forbidden", {
      stream: streamField(name),
      token_name: grant.name,
      route: "publish",
      remote,
    });
  }
  const stream = ctx.streams.get(name);
  if (!stream) return notFound(`no stream ${JSON.stringify(name)}`);
  if (!isPublishable(ctx, stream)) {
    p.metrics.refused(name, "not_publishable");
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
