/**
 * What the routes of the portable handler share, made once by
 * {@linkcode HttpHandler} from the server's checked settings: the streams,
 * the role each plays here (`../role.ts`), the settings themselves (limits, publishing, the logger), the series, the
 * tokens, the open sockets, and the one runtime-specific piece, the
 * WebSocket upgrade, behind a small interface (Deno's is in `../serve.ts`; a
 * test can pass its own).
 *
 * @module
 */

import type { Logger } from "../../common/logger.ts";
import type { TokenTable, TokenVerifier } from "../auth.ts";
import { PRIMARY, type StreamRole } from "../role.ts";
import type { ServeSettings } from "../serve_options.ts";
import type { Stream } from "../stream/stream.ts";
import type { Serving } from "../fanout/serving.ts";
import type { PublishBudget } from "../publish/budget.ts";
import type { PublishMetrics } from "../publish/publish_metrics.ts";
import type { ServerMetrics } from "./metrics.ts";
import type { StreamAdmin } from "../stream_admin.ts";

/** What an upgrade gives: the server's end of the socket, and the 101 response. */
export interface WebSocketUpgrade {
  /** The socket (not open yet: its `open` event comes once the response is sent). */
  socket: WebSocket;
  /** The answer to the request. */
  response: Response;
}

/**
 * Upgrades a request to a WebSocket: the runtime's part of a subscribe.
 */
export interface WebSocketUpgrader {
  /** Upgrades `req`, answering with subprotocol `protocol` if set; pings after `idleTimeoutS` (0: off). */
  upgrade(req: Request, options: { protocol?: string; idleTimeoutS: number }): WebSocketUpgrade;
}

/** The state the routes share (made by {@linkcode HttpHandler}). */
export interface HttpContext {
  /** The streams by name, now (streams come and go while serving: see `stream_set.ts`). */
  readonly streams: ReadonlyMap<string, Stream>;
  /** The role each stream plays here, by name (a stream not in it is a primary). */
  readonly roles: ReadonlyMap<string, StreamRole>;
  /** The streams taking network publishes, by name. */
  readonly publish: ReadonlySet<string>;
  /** Streams being opened again on this node, with why (`stream_set.ts`): 503, not 404. */
  readonly reopening: ReadonlyMap<string, string>;
  /** Creates and deletes streams (`PUT`/`DELETE /_/streams/{name}`); null: not offered. */
  readonly admin: StreamAdmin | null;
  /** What the subscribers the server starts are given: its replay gate, logger, send buffer. */
  readonly serving: Serving;
  /** The server's options, checked, with their defaults. */
  readonly settings: ServeSettings;
  /** Where events go (`settings.logger`). */
  readonly logger: Logger;
  /** The server's series. */
  readonly metrics: ServerMetrics;
  /** The series of publishing. */
  readonly publishMetrics: PublishMetrics;
  /** The bytes of publishing the server holds at once (`settings.maxPublishServerBytes`). */
  readonly publishBudget: PublishBudget;
  /** The runtime's WebSocket upgrade. */
  readonly upgrader: WebSocketUpgrader;
  /** The tokens every request is checked against now; null: no access control. */
  readonly tokens: TokenTable | null;
  /** The keys signed tokens are checked against now; null: no signed tokens. */
  readonly signedTokens: TokenVerifier | null;
  /** Whether the server is shutting down (upgrades get 1001, health 503). */
  readonly shuttingDown: boolean;
  /** Streams served when the server started (what `settings.openFilesBound` counted). */
  readonly streamsAtStart: number;
  /** WebSocket connections open (subscribers, publishers, and refused ones still closing). */
  readonly sockets: ReadonlySet<WebSocket>;
  /**
   * Counts a socket in `sockets`; `close`: how the server closes it (its
   * session's close; absent: the socket's own); `stream`: the stream it is
   * open on, whose deletion closes it.
   */
  track(socket: WebSocket, close?: (code: number, reason: string) => void, stream?: string): void;
  /** Counts it out. */
  untrack(socket: WebSocket, stream?: string): void;
}

/**
 * Whether `stream` takes rows over the publish routes (what `/head` says as
 * `publish`): opened for it (`serve --publish`, a created stream's
 * `"publish": true`) and durable.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Stream } from "../stream/stream.ts";
 * import { isPublishable } from "./context.ts";
 * const s = Stream.ephemeral("t", { schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] } });
 * equal(isPublishable({ publish: new Set(["t"]) }, s), false); // ephemeral
 * ```
 */
export function isPublishable(ctx: Pick<HttpContext, "publish">, stream: Stream): boolean {
  return ctx.publish.has(stream.name) && stream.log !== null;
}

/**
 * The role stream `name` plays on this server: a primary unless it was
 * served as a mirror's replica or a cluster member's copy.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { roleOf } from "./context.ts";
 * equal(roleOf({ roles: new Map() }, "t").kind, "primary");
 * ```
 */
export function roleOf(ctx: Pick<HttpContext, "roles">, name: string): StreamRole {
  return ctx.roles.get(name) ?? PRIMARY;
}
