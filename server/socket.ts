/**
 * The narrow side of a WebSocket the sessions (`fanout/subscribe_session.ts`,
 * `publish/session.ts`) and the subscribers they start use — send, close,
 * buffered amount, ready state, as Hono's `WSContext` — and what happens
 * over an accepted socket's life. `http/upgrade.ts` binds them to the
 * runtime's WebSocket; a test can fake both.
 *
 * @module
 */

import type { LogFields } from "../common/logger.ts";

/** The side of a socket a session uses. */
export interface SessionSocket {
  /** 0 connecting, 1 open, 2 closing, 3 closed (as `WebSocket.readyState`). */
  readonly readyState: number;
  /** Bytes sent and not yet handed to the network. */
  readonly bufferedAmount: number;
  /** Sends a text or binary frame. */
  send(data: string | Uint8Array): void;
  /** Starts the close handshake with `code` and `reason`. */
  close(code?: number, reason?: string): void;
}

/** `readyState` of a socket that is connecting. */
export const CONNECTING = 0;
/** `readyState` of an open socket. */
export const OPEN = 1;

/**
 * How a socket ended: its close event (with the code it closed with), or an
 * error event (the runtime's own end of it: a frame over its size limit,
 * invalid UTF-8, no pong, a reset) with its message.
 */
export type SocketEnd = { kind: "close"; code: number } | { kind: "error"; message: string };

/** What happens over an accepted socket's life (each called at most once but `message`). */
export interface SocketSession {
  /** The socket opened (not called when the server is shutting down: it is closed with 1001). */
  open(): void | Promise<void>;
  /** A message came: its data (a string for a text frame). */
  message(data: unknown): void;
  /** The socket ended. */
  ended(end: SocketEnd): void;
  /**
   * Closes the socket as the session closes it (a session that logs its
   * drops); the server's own closes (at shutdown) go through it. Absent: the
   * socket is closed as it is.
   */
  close?(code: number, reason: string): void;
}

/**
 * The fields of a JSON close reason, for a log event; `{}` when it is not JSON.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { parseReason } from "./socket.ts";
 * deepStrictEqual(parseReason('{"error":"too_slow"}'), { error: "too_slow" });
 * deepStrictEqual(parseReason("bye"), {});
 * ```
 */
export function parseReason(reason: string | undefined): LogFields {
  if (!reason) return {};
  try {
    const v = JSON.parse(reason);
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}
