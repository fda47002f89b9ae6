/**
 * The streamcast client, for Deno and browsers: {@linkcode connect} to a
 * stream and iterate `[offset, msg]` pairs, replay then live, with typed
 * errors for refusals, cursors to resume where a consumer stopped, and
 * optional reconnects, catch-up over HTTP, and the wire types a consumer
 * reads (greetings, close codes, refusals).
 *
 * Everything exported here uses web APIs only. In Deno, `cursor: "path"`
 * keeps the cursor in a file (`FileCursor`, in `client/file_cursor.ts`, loaded
 * only then); in a browser pass a store such as `LocalStorageCursor`.
 *
 * ```ts
 * import { deepStrictEqual, rejects } from "node:assert/strict";
 * import { connect, NotReplayable } from "./mod.ts"; // "@streamcast/server/client"
 * // A server to talk to (normally another process: `cli.ts serve`).
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("ticks", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * await stream.sendMany([{ v: 1 }, { v: 2 }]);
 *
 * const sub = await connect(`${server.url}/ticks`, { offset: "earliest" });
 * const seen: [number | null, unknown][] = [];
 * for await (const [offset, msg] of sub) {
 *   seen.push([offset, msg]);
 *   if (offset === 2) break;
 * }
 * deepStrictEqual(seen, [[1, { v: 1 }], [2, { v: 2 }]]);
 * await rejects(connect(`${server.url}/ticks`, { offset: 10 }), (err) => {
 *   return err instanceof NotReplayable && err.why === "ahead";
 * });
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 *
 * @module
 */

// Named exports, not `export *`: wire/, errors.ts, cursor.ts and catch_up.ts also hold
// what only the server, client/s3.ts and the tests use (they import those modules directly).
export { connect } from "./connect.ts";
export { Subscription } from "./subscription.ts";
export type { Line, Row } from "./subscription.ts";
export type {
  BackoffOptions,
  ConnectOptions,
  ReconnectEvent,
  WebSocketConstructor,
} from "./connect_options.ts";
export { backoffDelay } from "../common/backoff.ts";
export { type Cursor, type CursorStore, MemoryCursor } from "./cursor.ts";
export {
  type CursorStorage,
  LocalStorageCursor,
  type LocalStorageCursorOptions,
} from "./local_storage_cursor.ts";
export {
  ConnectionClosed,
  NotReplayable,
  type NotReplayableInfo,
  ProtocolError,
  RECONNECT_CODES,
  StreamNotFound,
  SubscriptionError,
  TokenExpired,
  TooSlow,
} from "./errors.ts";
export { fetchHead, headUrl } from "./head.ts";
// A stream on several nodes: the URLs connect() and publisher() take.
export { type NodeUrls, nodeUrls } from "./node_urls.ts";
// Publishing (docs/SPEC.md §9): rows in, acknowledged once durable, never stored twice.
export {
  type Published,
  Publisher,
  publisher,
  type PublisherOptions,
  PublishError,
} from "./publisher.ts";
// where=: the filter a subscribe (and catch-up) applies, for callers that build or check one.
export {
  compileFilter,
  type Filter,
  type FilterCondition,
  FilterError,
  type FilterRange,
  type FilterScalar,
  MAX_FILTER_VALUES,
  type Where,
} from "../wire/filter.ts";
export {
  type CatchUp,
  catchUp,
  type CatchUpOptions,
  type ChunkInfo,
  type ChunkSource,
  CorruptChunk,
  type ManifestInfo,
} from "./catch_up.ts";
// The wire types a consumer reads, from the contract the server shares (wire/).
export {
  type FrameMode,
  type Greeting,
  type GreetingLog,
  PROTOCOL_VERSION,
  type StreamHead,
  SUBPROTOCOL,
} from "../wire/subscribe.ts";
export {
  CloseCode,
  type CloseReason,
  NOT_REPLAYABLE_WHYS,
  type NotFoundReason,
  type NotReplayableReason,
  type NotReplayableWhy,
  type ProtocolReason,
  type TokenExpiredReason,
  type TooSlowReason,
} from "../wire/close_reason.ts";
export { type PublishAnswer, type PublishFrame, type PublishGreeting } from "../wire/publish.ts";
