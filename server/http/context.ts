/**
 * What the routes of the portable handler share: the streams, the logger,
 * the metrics, the limits, the tokens, the open sockets, and the one
 * runtime-specific piece, the WebSocket upgrade, behind a small interface
 * (Deno's is in `../serve.ts`; a test can pass its own).
 *
 * @module
 */

import type { Logger } from "../../common/logger.ts";
import type { TokenTable } from "../auth.ts";
import type { Stream } from "../stream.ts";
import type { ServerMetrics } from "./metrics.ts";
import type { PublishMetrics } from "../publish/publish_metrics.ts";
import type { PublishBudget } from "../publish/budget.ts";

/**
 * What the publish routes share (DESIGN §13).
 *
 * @example
 * ```ts
 * import type { Publishing } from "./context.ts";
 * const open = (p: Publishing, name: string): boolean => p.streams.has(name);
 * console.log(typeof open); // function
 * ```
 */
export interface Publishing {
  /** The streams opened for publishing. */
  readonly streams: ReadonlySet<string>;
  /** Largest `POST` body and WebSocket frame, bytes (413 / close 1009 past it). */
  readonly maxPublishBytes: number;
  /** Frames a publish socket may have awaiting their ack. */
  readonly maxInFlight: number;
  /** Bytes of frames a publish socket may have awaiting their ack. */
  readonly maxInFlightBytes: number;
  /** The bytes of publishing the server holds at once (`publish/budget.ts`). */
  readonly budget: PublishBudget;
  /** The series of publishing. */
  readonly metrics: PublishMetrics;
}

/** What an upgrade gives: the server's end of the socket, and the 101 response. */
export interface WebSocketUpgrade {
  /** The socket (not open yet: its `open` event comes once the response is sent). */
  socket: WebSocket;
  /** The answer to the request. */
  response: Response;
}

/**
 * Upgrades a request to a WebSocket: the runtime's part of a subscribe.
 *
 * @example
 * ```ts
 * import type { WebSocketUpgrader } from "./context.ts";
 * const deno: WebSocketUpgrader = {
 *   upgrade: (req, o) =>
 *     Deno.upgradeWebSocket(req, { idleTimeout: o.idleTimeoutS, protocol: o.protocol }),
 * };
 * console.log(typeof deno.upgrade); // function
 * ```
 */
export interface WebSocketUpgrader {
  /** Upgrades `req`, answering with subprotocol `protocol` if set; pings after `idleTimeoutS` (0: off). */
  upgrade(req: Request, options: { protocol?: string; idleTimeoutS: number }): WebSocketUpgrade;
}

/** The state the routes share (made by {@linkcode HttpHandler}). */
export interface HttpContext {
  /** The streams by name. */
  readonly streams: ReadonlyMap<string, Stream>;
  /** Where events go. */
  readonly logger: Logger;
  /** The server's series. */
  readonly metrics: ServerMetrics;
  /** The runtime's WebSocket upgrade. */
  readonly upgrader: WebSocketUpgrader;
  /** Seconds between pings of an idle socket (0: off). */
  readonly pingIntervalS: number;
  /** Most WebSocket connections open at once. */
  readonly maxConnections: number;
  /** The tokens every request is checked against now; null: no access control. */
  readonly tokens: TokenTable | null;
  /** Whether the server is shutting down (upgrades get 1001, health 503). */
  readonly shuttingDown: boolean;
  /** WebSocket connections open (subscribers, and refused ones still closing). */
  readonly sockets: Set<WebSocket>;
  /** Adds a socket to `sockets`. */
  track(socket: WebSocket): void;
  /** Removes a socket from `sockets`. */
  untrack(socket: WebSocket): void;
  /** Publishing: which streams, the limits, the series. */
  readonly publishing: Publishing;
}
