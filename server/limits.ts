/**
 * The server's limits, in one place: each limit's default, and the check
 * every limit's value passes.
 *
 * | limit | default | where | past it |
 * |---|---|---|---|
 * | WebSocket connections open at once | 10,000 | `ServeOptions.maxConnections` | HTTP 503 before the upgrade |
 * | cluster replication links open at once (per server) | 1,024 | `ServeOptions.maxReplicaLinks` | HTTP 503 before the upgrade |
 * | streams served (declared and created while serving) | 1,000 | the CLI's `--max-streams` | `PUT /_/streams/{name}` answers 409 `too_many_streams` |
 * | subscribers per stream | 5,000 | `StreamOptions.maxSubscribers` | close 1013, no greeting |
 * | request URL | 8 KiB | `ServeOptions.maxUrlBytes` | HTTP 414 |
 * | replay reads at once (per server) | 16 | `ServeOptions.maxReplayReaders` | the read waits its turn (fanout/replay_gate.ts) |
 * | bytes handed to sockets, not yet written (per server) | 64 MiB | `ServeOptions.sendBufferBytes` | a subscriber over its share falls behind (queue of shared frames, then the log; fanout/send_budget.ts) |
 * | bytes of live frames handed to sockets in one turn of the event loop (per server) | 8 MiB | `ServeOptions.fanoutTurnBytes` | the rest of the fan-out waits for the next turn (fanout/fanout_pacer.ts) |
 * | row (payload) size | 16 MiB | `LogOptions.maxPayloadBytes` | `send` rejects; ingest rejects the line |
 * | `POST` body, publish frame | 16 MiB | `ServeOptions.maxPublishBytes` | HTTP 413, close 1009 |
 * | publish frames awaiting their ack (per socket) | 64 frames, 16 MiB | `ServeOptions.maxInFlight`, `maxPublishInflightBytes` | more wait, unread |
 * | publishing held at once (per server) | 64 MiB | `ServeOptions.maxPublishServerBytes` | frames and bodies wait, unread (publish/budget.ts) |
 * | a stream's definition (`PUT /_/streams/{name}` body) | 1 MiB | fixed (`MAX_DEFINITION_BYTES`, stream_definition.ts) | HTTP 413 |
 * | stream name | 64 characters | fixed (wire contract) | 4404 / refused at declaration |
 * | client data frame | any data frame closes | fixed | 1008 (runtime: 64 MiB, then dropped) |
 * | how deep a schema nests | 136 levels | fixed (`MAX_SCHEMA_DEPTH`, schema/rules.ts) | refused at declaration; `PUT /_/streams/{name}` answers 400 |
 * | a `PUT /_/streams/{name}` 400's detail | 1,024 characters | fixed (`MAX_DETAIL_CHARS`, http/streams_admin.ts) | cut, ending `…` |
 *
 * docs/CLI.md holds the full table with the flags and config keys.
 *
 * @module
 */

import { DEFAULT_MAX_PAYLOAD_BYTES } from "../log/log.ts";

/** Default `maxConnections`: WebSocket connections open at once on one server. */
export const DEFAULT_MAX_CONNECTIONS = 10_000;
/**
 * Default `maxReplicaLinks`: replication sockets (`/{name}/replicate`) open
 * at once on one server — one per stream and follower, counted apart from
 * `maxConnections` so that subscribers cannot crowd followers out, nor
 * links subscribers.
 */
export const DEFAULT_MAX_REPLICA_LINKS = 1024;
/** Default `--max-streams`: streams one server serves at once, declared and created. */
export const DEFAULT_MAX_STREAMS = 1000;
/** Default `maxSubscribers`: subscribers of one stream at once. */
export const DEFAULT_MAX_SUBSCRIBERS = 5_000;
/** Default `maxUrlBytes`: the longest request URL accepted. */
export const DEFAULT_MAX_URL_BYTES = 8192;
/** Default `maxReplayReaders`: log reads for catching-up subscribers in flight at once. */
export const DEFAULT_MAX_REPLAY_READERS = 16;
/**
 * Default `sendBufferBytes`: bytes that all the subscribers' sockets of one
 * server may hold together, handed to `send` and not yet written to the
 * kernel. Deno's `send` copies each frame into its socket's own buffer, so
 * this (not the frames' sharing) bounds the native memory fan-out uses.
 */
export const DEFAULT_SEND_BUFFER_BYTES: number = 64 << 20;
/** Smallest `sendBufferBytes` accepted. */
export const MIN_SEND_BUFFER_BYTES: number = 1 << 20;
/**
 * Default `fanoutTurnBytes`: bytes of live frames one server hands to its
 * sockets in one turn of the event loop; the rest of a fan-out waits for the
 * next turn, by when the runtime has written (and freed) most of those copies
 * (see fanout/fanout_pacer.ts). 0: no pacing (one synchronous pass).
 */
export const DEFAULT_FANOUT_TURN_BYTES: number = 8 << 20;
/** Default row size limit: the log's own default `maxPayloadBytes` (16 MiB). */
export const DEFAULT_MAX_ROW_BYTES: number = DEFAULT_MAX_PAYLOAD_BYTES;
/** Default largest `POST /{name}` body or publish frame (docs/SPEC.md §9): 16 MiB. */
export const DEFAULT_MAX_PUBLISH_BYTES: number = 16 << 20;
/**
 * Default `maxPublishServerBytes`: bytes of publishing (frames taken, `POST`
 * bodies) one server holds at once (see publish/budget.ts): 64 MiB.
 */
export const DEFAULT_MAX_PUBLISH_SERVER_BYTES: number = 64 << 20;
/** Default most time between two reads of a `POST` body's bytes before it is cut, seconds. */
export const DEFAULT_PUBLISH_BODY_TIMEOUT_S = 30;
/** Longest body timeout, seconds: a timer runs at most 2^31-1 ms. */
export const MAX_PUBLISH_BODY_TIMEOUT_S: number = Math.floor((2 ** 31 - 1) / 1000);

/**
 * Checks that `value` is an integer ≥ `min`; throws `RangeError` naming `what`.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { checkLimit } from "./limits.ts";
 * equal(checkLimit("maxConnections", 100, 1), 100);
 * throws(() => checkLimit("maxConnections", 0, 1), /maxConnections must be an integer >= 1, got 0/);
 * ```
 */
export function checkLimit(what: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${what} must be an integer >= ${min}, got ${value}`);
  }
  return value;
}
