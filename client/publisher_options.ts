/**
 * The options of `publisher()` (client/publisher.ts). Browser-safe.
 *
 * @module
 */

import type { WebSocketConstructor } from "./_connection.ts";

/**
 * After a `disk_full` refusal the publisher holds its frames this long
 * before it sends the refused one again, ms (jittered to 50–100 %); the hold
 * doubles with each refusal in a row.
 */
export const DISK_FULL_HOLD_MIN_MS = 50;
/** The longest hold after `disk_full` refusals in a row, ms. */
export const DISK_FULL_HOLD_MAX_MS = 2000;
/** The default of `PublisherOptions.diskFullTimeoutMs`, ms. */
export const DEFAULT_DISK_FULL_TIMEOUT_MS = 60_000;

/**
 * Options of `publisher()`.
 */
export interface PublisherOptions {
  /**
   * The producer's name (1–128 printable ASCII characters, no space): the
   * server remembers its last seq, so a resend is never stored twice, also
   * across restarts of this process when the name is kept.
   * `null`: at-least-once publishing. @default a random name for this publisher
   */
  producer?: string | null;
  /**
   * A bearer token with a `"publish"` grant for the stream: the token, or a
   * function (sync or async) returning one, called before each connect and
   * reconnect. When the server closes the socket at the token's expiry
   * (4401 `token_expired`), a token function gives the reconnect a fresh
   * one (with or without `reconnect`) and the frames not answered are sent
   * again; a fixed token fails the publisher (`token_expired`).
   * @default undefined
   */
  token?: string | (() => string | Promise<string>);
  /** Most frames awaiting their answer at once (the server's `max_in_flight` caps it). @default 64 */
  maxInFlight?: number;
  /** Reconnect after a dropped connection and resend what was not answered. @default true */
  reconnect?: boolean;
  /** Reconnect delays. @default { minMs: 100, maxMs: 5000 } */
  backoff?: { minMs?: number; maxMs?: number };
  /**
   * Longest wait for a connection's greeting, after which that attempt
   * counts as failed (a host that takes the connection but never answers).
   * @default 10000
   */
  connectTimeoutMs?: number;
  /**
   * Longest wait of `Publisher.close` for the answers still
   * outstanding (e.g. while the server is down and reconnects fail); then
   * their sends reject with a `closed` `PublishError` saying why,
   * and `close` resolves. @default 10000
   */
  closeTimeoutMs?: number;
  /**
   * Longest time without a node that takes the publish, retrying across the
   * URLs with backoff, before the publisher fails: every unanswered send
   * rejects with a `closed` `PublishError` naming each URL and
   * what it answered last. At start, retries go on only while a node
   * answers that it waits for a leader (a 503 or a redirect); a start at
   * which no node can be reached rejects after one pass. @default 60000
   */
  retryTimeoutMs?: number;
  /**
   * Longest time a frame refused `disk_full` is held and sent again (after
   * {@linkcode DISK_FULL_HOLD_MIN_MS} doubling to
   * {@linkcode DISK_FULL_HOLD_MAX_MS}), counted from its first refusal;
   * then its `send` rejects with a `disk_full` `PublishError`, as after
   * `write_failed`. `0`: a `disk_full` refusal rejects at once. @default 60000
   */
  diskFullTimeoutMs?: number;
  /** Most redirects (307 from a follower to the leader) followed from one URL. @default 5 */
  maxRedirects?: number;
  /** Called after each reconnect with the producer's `last_seq` the server reported. */
  onReconnect?: (lastSeq: number) => void;
  /** The WebSocket constructor. @default globalThis.WebSocket */
  WebSocket?: WebSocketConstructor;
}
