/**
 * What a stream says of itself: the greeting of a subscription and its
 * `/head`, built from what the stream exposes.
 *
 * @module
 */

import {
  type FrameMode,
  type Greeting,
  PROTOCOL_VERSION,
  type StreamHead,
} from "../../client/wire.ts";
import type { Where } from "../../client/filter.ts";
import type { Log } from "../../log/mod.ts";
import type { RowSchema } from "../../schema/row_schema.ts";
import type { StreamFollow } from "./stream_hosting.ts";
import type { ArchiveLag } from "./archive_lag.ts";

/** What a greeting and a head are made of (a `Stream`). */
export interface StreamView {
  /** The stream's name. */
  readonly name: string;
  /** Its stream id (null: ephemeral). */
  readonly streamId: string | null;
  /** Its end offset (null: ephemeral). */
  readonly endOffset: number | null;
  /** Whether it has a log. */
  readonly durable: boolean;
  /** Its archive URI, or null. */
  readonly archive: string | null;
  /** Its compiled schema. */
  readonly schema: RowSchema;
  /** Subscribers now. */
  readonly subscribers: number;
  /** How far the archive lags (null: no archive). */
  archiveLag(): ArchiveLag | null;
}

/**
 * The greeting of a subscription of `s` starting at `from` (null: live).
 *
 * @example
 * ```ts
 * import { Stream } from "./stream.ts";
 * import { greetingOf } from "./views.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const s = Stream.ephemeral("t", { schema });
 * console.log(greetingOf(s, null, "batch", null).frames); // batch
 * ```
 */
export function greetingOf(
  s: StreamView,
  from: number | null,
  frames: FrameMode,
  where: Where | null,
): Greeting {
  const end = s.endOffset;
  return {
    streamcast: PROTOCOL_VERSION,
    stream: s.name,
    stream_id: s.streamId,
    end_offset: end,
    replay: from !== null && end !== null && from < end ? [from, end] : null,
    log: s.durable ? { name: s.name, archive: s.archive } : null,
    durable: s.durable,
    schema: s.schema.json,
    frames,
    where,
  };
}

/**
 * What `GET /{name}/head` serves for `s` (with its log, and its follower's fields).
 *
 * @example
 * ```ts
 * import { Stream } from "./stream.ts";
 * import { streamHead } from "./views.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const s = Stream.ephemeral("t", { schema });
 * console.log(streamHead(s, null, null).end_offset); // null
 * ```
 */
export function streamHead(
  s: StreamView,
  log: Log | null,
  follow: StreamFollow | null,
): StreamHead {
  return {
    stream: s.name,
    stream_id: s.streamId,
    end_offset: s.endOffset,
    earliest: log?.earliest ?? null,
    durable: s.durable,
    subscribers: s.subscribers,
    schema: s.schema.json,
    archive: s.archive,
    ...(s.archive ? { archive_lag: s.archiveLag() } : {}),
    ...(log ? { first_offset: log.firstOffset } : {}),
    ...follow?.head(),
  };
}
