/**
 * The publish socket, `/{name}/publish?producer=ID` (`/_/publish` for the
 * unnamed stream; docs/SPEC.md §9.2). With tokens the producer id is scoped
 * to the token's holder (docs/SPEC.md §9.3). Before the upgrade: the connection limit
 * (503) and the publish grant (403), checked by the handler, then the stream
 * (404) and whether it is opened for publishing (405); on a cluster node,
 * 307 (to the leader) or 503 (`no_leader`, `not_enough_replicas`) as a
 * `POST` is. After it: the query (4400), then the session
 * (`../publish/session.ts`): the greeting, the frames and their answers.
 *
 * @module
 */

import { CloseCode, encodeCloseReason } from "../../wire/close_reason.ts";
import { PRODUCER_PATTERN, PRODUCER_RULE, PUBLISH_PARAMS } from "../../wire/publish.ts";
import type { LogFields } from "../../common/logger.ts";
import { producerKey } from "../../log/producer/table.ts";
import { rowGrant } from "../access/row_grant.ts";
import { PublishSession, type PublishSessionContext } from "../publish/session.ts";
import type { HttpContext } from "./context.ts";
import type { RouteRequest } from "./router.ts";
import { acceptSocket, refuseSocket } from "./upgrade.ts";
import { streamField } from "./_respond.ts";
import { publishTarget } from "./_publish_target.ts";

/**
 * Answers a publish upgrade for the stream the path names.
 */
export function publishSocketRoute(ctx: HttpContext, r: RouteRequest): Response {
  const { req, url, grant, remote } = r;
  const name = r.params.name;
  const stream = publishTarget(ctx, name, url);
  if (stream instanceof Response) return stream;
  let problem: string | null = null;
  for (const k of new Set(url.searchParams.keys())) {
    if (!PUBLISH_PARAMS.includes(k)) problem = `unknown parameter ${k.slice(0, 40)}`;
    else if (url.searchParams.getAll(k).length > 1) problem = `repeated parameter ${k}`;
  }
  const producer = url.searchParams.get("producer");
  if (problem === null && producer !== null && !PRODUCER_PATTERN.test(producer)) {
    problem = `producer must be ${PRODUCER_RULE}`;
  }
  const who: LogFields = {
    stream: streamField(name),
    remote,
    ...(producer !== null ? { producer } : {}),
    ...(grant ? { token_name: grant.name } : {}),
  };
  if (problem !== null) {
    ctx.publishMetrics.refused(name, "protocol");
    const reason = encodeCloseReason({ error: "protocol", detail: problem });
    return refuseSocket(ctx, req, CloseCode.Protocol, reason, who);
  }
  // A row-level grant whose filter does not fit the stream: none of its rows may be published.
  const g = rowGrant(grant, stream.name, stream.schema.json);
  if (!g.ok) {
    ctx.publishMetrics.refused(name, "forbidden");
    const reason = encodeCloseReason({ error: "forbidden", detail: g.detail });
    return refuseSocket(ctx, req, CloseCode.Unauthorized, reason, who);
  }
  const access = { rows: g.filter, expiresAt: grant?.expiresAt ?? null };
  // With tokens a producer id is the holder's own (log/producer/table.ts).
  const key = producer === null ? null : producerKey(grant?.name ?? null, producer);
  return acceptSocket(
    ctx,
    req,
    (socket) => new PublishSession(sessionContext(ctx), socket, stream, producer, key, who, access),
    name,
  );
}

// What a publish session is given of the server's context.
function sessionContext(ctx: HttpContext): PublishSessionContext {
  return {
    logger: ctx.logger,
    metrics: ctx.publishMetrics,
    budget: ctx.publishBudget,
    maxInFlight: ctx.settings.maxInFlight,
    maxInFlightBytes: ctx.settings.maxPublishInflightBytes,
    maxBytes: ctx.settings.maxPublishBytes,
  };
}
