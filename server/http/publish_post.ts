/**
 * `POST /{name}` (`POST /` for the unnamed stream): rows in one commit,
 * answered once durable (docs/SPEC.md §9.1). Checked in this order, each answering
 * before the next runs: the publish grant (403, by the handler), the stream (404), whether it
 * is opened for publishing (405), the media type (415), the producer headers
 * (400), the declared length (413), the body read up to the limit (413) and
 * without stalling (408 `body_timeout` once no byte came for
 * `publishBodyTimeoutS`), its
 * rows parsed (400 `invalid_row`), each row validated and encoded (400
 * `invalid_row`); then stored: 200 `{"first","last","count"}` (with
 * `"duplicate":true` for a producer's last seq sent again; with tokens a
 * producer id is scoped to the token's holder), 409 `stale_seq`,
 * 507 `disk_full` (with `Retry-After`: the stream takes no rows while its
 * disk is full) or 503 `write_failed`. On a cluster node, after the 405: 307 to the
 * leader, or 503 `no_leader` / `not_enough_replicas`, before the body is
 * read; 503 `no_leader` too when the node stops leading before the rows
 * are committed (then nothing was acknowledged). Nothing of a refused body is stored. The body
 * counts in the server's publish budget (`../publish/budget.ts`) as it
 * arrives; it is read further only while the budget has room.
 *
 * @module
 */

import {
  parseSeq,
  PRODUCER_HEADER,
  PRODUCER_PATTERN,
  PRODUCER_RULE,
  SEQ_HEADER,
} from "../../wire/publish.ts";
import { producerKey } from "../../log/producer/table.ts";
import { commitPublish } from "../publish/commit.ts";
import { postAnswer } from "../publish/answer.ts";
import { parseJsonArray, parseNdjson, readBody } from "../publish/body.ts";
import type { PublishRefusal } from "../publish/publish_metrics.ts";
import type { HttpContext } from "./context.ts";
import type { RouteRequest } from "./router.ts";
import { firstOutside, OUTSIDE_GRANT_DETAIL, rowGrant } from "../access/row_grant.ts";
import { json, streamField } from "./_respond.ts";
import { publishTarget } from "./_publish_target.ts";

const NDJSON_TYPES = new Set([
  "application/x-ndjson",
  "application/ndjson",
  "application/jsonl",
  "text/plain",
]);

/**
 * Answers a `POST` to the stream the path names.
 */
export async function publishPostRoute(ctx: HttpContext, r: RouteRequest): Promise<Response> {
  const { req, grant, remote } = r;
  const name = r.params.name;
  const t0 = performance.now();
  const settings = ctx.settings;
  const m = ctx.publishMetrics;
  const refuse = (reason: PublishRefusal, status: number, body: Record<string, unknown>) => {
    m.refused(name, reason);
    ctx.logger.info("publish_refused", {
      stream: streamField(name),
      status,
      ...body,
      remote,
      ...(grant ? { token_name: grant.name } : {}),
    });
    return json(body, status);
  };
  const stream = publishTarget(ctx, name, r.url);
  if (stream instanceof Response) return stream;
  const type = (req.headers.get("content-type") ?? "application/x-ndjson").split(";")[0].trim()
    .toLowerCase();
  const array = type === "application/json";
  if (!array && !NDJSON_TYPES.has(type)) {
    return refuse("unsupported_media_type", 415, {
      error: "unsupported_media_type",
      detail:
        `content-type ${type}: send application/x-ndjson (rows one per line) or application/json (an array)`,
    });
  }
  const producer = req.headers.get(PRODUCER_HEADER);
  const seqText = req.headers.get(SEQ_HEADER);
  if ((producer === null) !== (seqText === null)) {
    return refuse("bad_request", 400, {
      error: "bad_request",
      detail: `${PRODUCER_HEADER} and ${SEQ_HEADER} go together: give both or neither`,
    });
  }
  if (producer !== null && !PRODUCER_PATTERN.test(producer)) {
    return refuse("bad_request", 400, {
      error: "bad_request",
      detail: `${PRODUCER_HEADER} must be ${PRODUCER_RULE}`,
    });
  }
  const seq = seqText === null ? null : parseSeq(seqText.trim());
  if (seqText !== null && seq === null) {
    return refuse("bad_request", 400, {
      error: "bad_request",
      detail: `${SEQ_HEADER} must be an integer from 1 to 2^53-1, got ${
        JSON.stringify(seqText.slice(0, 40))
      }`,
    });
  }
  const declared = Number(req.headers.get("content-length") ?? "0");
  const tooLarge = () =>
    refuse("too_large", 413, { error: "too_large", max_bytes: settings.maxPublishBytes });
  if (declared > settings.maxPublishBytes) return tooLarge();
  // The body counts in the server's publish budget as its bytes arrive,
  // until it is answered; it is read on only while the rest it declares (or
  // the most it may be) fits, else it waits, and TCP pushes back. A body
  // that stalls is cut, and what it held freed.
  const budget = ctx.publishBudget;
  const expected = declared > 0 ? declared : settings.maxPublishBytes;
  const owner = {};
  let held = 0;
  try {
    const body = await readBody(req.body, settings.maxPublishBytes, {
      idleMs: settings.publishBodyTimeoutS * 1000,
      beforeRead: (read) => budget.beforeRead(Math.max(0, expected - read), held, owner),
      arrived: (bytes) => {
        held += bytes;
        budget.took(bytes);
      },
    });
    if (!body.ok && body.error === "timeout") {
      return refuse("body_timeout", 408, {
        error: "body_timeout",
        detail: `no byte of the body arrived for ${settings.publishBodyTimeoutS} s: ` +
          "send the whole body without pausing",
      });
    }
    if (!body.ok) return tooLarge();
    const parsed = array ? parseJsonArray(body.bytes) : parseNdjson(body.bytes);
    if (!parsed.ok) {
      if (parsed.line === 0) {
        return refuse("invalid_body", 400, { error: "invalid_body", detail: parsed.detail });
      }
      return refuse("invalid_row", 400, {
        error: "invalid_row",
        line: parsed.line,
        detail: parsed.detail,
      });
    }
    if (parsed.rows.length === 0) {
      return refuse("invalid_body", 400, {
        error: "invalid_body",
        detail: "the body holds no row",
      });
    }
    // A row-level grant: every row must match it, or nothing is stored.
    const g = rowGrant(grant, stream.name, stream.schema.json);
    if (!g.ok) return refuse("forbidden", 403, { error: "forbidden", detail: g.detail });
    const outside = g.filter === null ? -1 : firstOutside(g.filter, parsed.rows);
    if (outside !== -1) {
      return refuse("forbidden", 403, {
        error: "forbidden",
        line: parsed.lines[outside],
        detail: OUTSIDE_GRANT_DETAIL,
      });
    }
    // With tokens a producer id is the holder's own (log/producer/table.ts).
    const tag = producer !== null && seq !== null
      ? { producer: producerKey(grant?.name ?? null, producer), seq }
      : null;
    const out = await commitPublish(stream, parsed.rows, tag);
    const { body: answer, status, refusal } = postAnswer(out, parsed.lines);
    if (out.kind === "invalid") return refuse("invalid_row", status, answer);
    m.acked("http", t0);
    if (out.kind === "failed") {
      ctx.logger.error("publish_failed", { stream: streamField(name), error: out.detail, remote });
      m.refused(name, "write_failed");
      return json(answer, status);
    }
    if (out.kind === "disk_full") {
      m.refused(name, "disk_full");
      // The stream tries again every second.
      return json(answer, status, { "retry-after": "1" });
    }
    // Stale, or (no_leader) this node stopped leading before the rows were
    // committed: nothing was acknowledged.
    if (out.kind !== "ack") return refuse(refusal!, status, answer);
    if (out.duplicate) m.duplicate(name);
    else m.published(name, "http", out.last - out.first + 1);
    return json(answer);
  } finally {
    budget.endBody(held, owner);
  }
}
