/**
 * What a stream is lent by what serves it: the server (its read gate, logger
 * and send buffer) and, for a replica, its follower.
 *
 * @module
 */

import type { Logger } from "../../common/logger.ts";
import type { Gate, SendBudget } from "../limits.ts";

/** What a server lends the streams it serves (see {@linkcode Stream._attach}). */
export interface StreamServing {
  /** Catching-up subscribers' log reads take turns through it; null: no gate. */
  gate: Gate | null;
  /** Where subscriber failures are reported. */
  logger: Logger;
  /** The server's send buffer, shared by its subscribers' sockets. @default one per process */
  sendBudget?: SendBudget;
}

/**
 * What a follower (`server/follow/`) lends the stream it replicates: the
 * `/head` fields it adds, and the primary's end asked afresh (the lag rule of
 * a subscribe past the follower's end).
 */
export interface StreamFollow {
  /** `follows` (the primary's URL, no token), `lag_rows`, `state`. */
  head(): Record<string, unknown>;
  /** The primary's end offset now, or null when it cannot be asked. */
  primaryEnd(): Promise<number | null>;
  /** Resolves true once the replica's end passes `offset`, false if `signal` aborts first. */
  reached(offset: number, signal: AbortSignal): Promise<boolean>;
}
