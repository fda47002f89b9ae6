/**
 * What a stream says of itself, each built in this one place: the greeting
 * of a subscription, and its head (`GET /{name}/head`, `GET /_/streams`, the
 * viewer page's first data).
 *
 * @module
 */

import {
  type FrameMode,
  type Greeting,
  PROTOCOL_VERSION,
  type StreamHead,
} from "../../wire/subscribe.ts";
import type { Where } from "../../wire/filter.ts";
import type { Log } from "../../log/mod.ts";
import type { RowSchema } from "../../schema/row_schema.ts";
import { archiveLagOf } from "./archive_lag.ts";

/** What a greeting and a head are made of (a `Stream`). */
export interface StreamView {
  /** The stream's name. */
  readonly name: string;
  /** Its log, or null when it is ephemeral. */
  readonly log: Log | null;
  /** Its archive URI, or null. */
  readonly archive: string | null;
  /** Its compiled schema. */
  readonly schema: RowSchema;
  /** Every version of its schema, oldest first (see `Stream.schemaVersions`). */
  readonly schemaVersions: readonly { from: number | null; schema: Record<string, unknown> }[];
  /** Subscribers now. */
  readonly subscribers: number;
}

/**
 * The greeting of a subscription of `s` starting at `from` (null: live),
 * in frame mode `frames`, with the `where=` filter as parsed (null: none).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Stream } from "./stream.ts";
 * import { greetingOf } from "./views.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const g = greetingOf(Stream.ephemeral("t", { schema }), null, "batch", null);
 * equal(g.frames, "batch");
 * equal(g.replay, null);
 * ```
 */
export function greetingOf(
  s: StreamView,
  from: number | null,
  frames: FrameMode,
  where: Where | null,
): Greeting {
  const log = s.log;
  const end = log ? log.endOffset : null;
  return {
    streamcast: PROTOCOL_VERSION,
    stream: s.name,
    stream_id: log ? log.streamId : null,
    end_offset: end,
    replay: from !== null && end !== null && from < end ? [from, end] : null,
    log: log ? { name: s.name, archive: s.archive } : null,
    durable: log !== null,
    schema: s.schema.json,
    frames,
    where,
  };
}

/**
 * The head of `s`: its log's ends, its subscribers, its schema and every
 * version of it (`schema_versions`, each with the first offset it applies
 * from), its archive and how far the archive lags, `extra` fields (its
 * Iceberg table's, and those of the role it is served in: a mirror's, a
 * cluster member's), and `publish`: whether it takes rows over the publish
 * routes (the serving server's knowledge).
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { Stream } from "./stream.ts";
 * import { headOf } from "./views.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const head = headOf(Stream.ephemeral("t", { schema }), false);
 * equal(head.end_offset, null);
 * deepStrictEqual(head.schema_versions, [{ from: null, schema }]);
 * equal(head.publish, false);
 * ```
 */
export function headOf(
  s: StreamView,
  publish: boolean,
  extra: Record<string, unknown> = {},
): StreamHead {
  const log = s.log;
  return {
    stream: s.name,
    stream_id: log ? log.streamId : null,
    end_offset: log ? log.endOffset : null,
    earliest: log?.earliest ?? null,
    durable: log !== null,
    subscribers: s.subscribers,
    schema: s.schema.json,
    archive: s.archive,
    ...(s.archive ? { archive_lag: log ? archiveLagOf(log) : null } : {}),
    ...(log ? { first_offset: log.firstOffset, ...retentionOf(log) } : {}),
    ...extra,
    schema_versions: s.schemaVersions,
    publish,
  };
}

/**
 * What a durable stream's head says of its retention: the bounds in force
 * (`age_s`, `bytes`: null for none) and the bytes of local history it holds
 * (its segments and its chunks).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Log } from "../../log/mod.ts";
 * import { retentionOf } from "./views.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, {
 *   timers: false,
 *   chunks: { retainAgeMs: 90_000, retainBytes: null },
 * });
 * deepStrictEqual(retentionOf(log), { retention: { age_s: 90, bytes: null }, bytes: 128 });
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function retentionOf(
  log: Log,
): { retention: { age_s: number | null; bytes: number | null }; bytes: number } {
  const r = log.chunks.retention;
  return {
    retention: { age_s: r.ageMs === null ? null : r.ageMs / 1000, bytes: r.bytes },
    bytes: log.sizeBytes + log.chunks.bytes,
  };
}
