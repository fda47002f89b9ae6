/**
 * A server's send buffer (`sendBufferBytes`), shared out between its
 * subscribers' sockets, and its allowance of live frames per turn of the
 * event loop (`fanoutTurnBytes`).
 *
 * Why: Deno's `WebSocket.send` copies each frame into that socket's own
 * buffer. The frames are shared strings; the copies are not. So what bounds
 * the native memory of a fan-out is how much each socket may hold, not how
 * the frames are built.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import {
  checkLimit,
  DEFAULT_FANOUT_TURN_BYTES,
  DEFAULT_SEND_BUFFER_BYTES,
  MIN_SEND_BUFFER_BYTES,
} from "../limits.ts";

/** The most one socket may hold of the send buffer (few subscribers each get this). */
export const MAX_SEND_SHARE_BYTES: number = 1 << 20;
/** The least one socket may hold (many subscribers each get at least this). */
export const MIN_SEND_SHARE_BYTES: number = 16 * 1024;

/**
 * A server's send buffer, shared out equally between its open subscriber
 * sockets: each may hold {@linkcode SendBudget.share} bytes handed to `send`
 * and not yet written, between {@linkcode MIN_SEND_SHARE_BYTES} and
 * {@linkcode MAX_SEND_SHARE_BYTES}. A subscriber over its share stops
 * calling `send` and falls behind (see fanout/live_queue.ts), so the copies
 * Deno makes per socket stay within about `sendBufferBytes` (plus one frame
 * per socket).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { SendBudget } from "./send_budget.ts";
 * const budget = new SendBudget(64 << 20);
 * const sockets = Array.from({ length: 1000 }, () => ({ bufferedAmount: 10 }));
 * for (const s of sockets) budget.open(s);
 * equal(budget.sockets, 1000);
 * equal(budget.share(), 67108); // 64 MiB / 1000
 * equal(budget.buffered(), 10000);
 * budget.close(sockets[0]);
 * equal(budget.sockets, 999);
 * ```
 */
export class SendBudget {
  /** Bytes all sockets may hold together. */
  readonly bytes: number;
  /** Bytes of live frames handed to the sockets in one turn of the event loop (0: unbounded). */
  readonly turnBytes: number;
  readonly #sockets = new Set<{ readonly bufferedAmount: number }>();
  #spent = 0;
  #armed = false;

  /**
   * A budget of `bytes` (an integer ≥ `MIN_SEND_BUFFER_BYTES`), handing out
   * at most `turnBytes` (an integer ≥ 0; 0: unbounded) of live frames per
   * turn of the event loop.
   */
  constructor(
    bytes: number = DEFAULT_SEND_BUFFER_BYTES,
    turnBytes: number = DEFAULT_FANOUT_TURN_BYTES,
  ) {
    this.bytes = checkLimit("sendBufferBytes", bytes, MIN_SEND_BUFFER_BYTES);
    this.turnBytes = checkLimit("fanoutTurnBytes", turnBytes, 0);
  }

  /** Whether this turn's live fan-out allowance is used up (never, with `turnBytes` 0). */
  turnSpent(): boolean {
    return this.turnBytes > 0 && this.#spent >= this.turnBytes;
  }

  /**
   * Counts `bytes` handed to sockets in this turn. The count restarts at the
   * next turn once it has reached half the allowance; below that it carries
   * over, so that a turn always has at least half the allowance and never
   * more than all of it, and a commit that hands out little (one small row
   * to a few hundred sockets) schedules no extra turn to restart the count.
   */
  charge(bytes: number): void {
    if (bytes <= 0 || this.turnBytes === 0) return;
    this.#spent += bytes;
    if (this.#armed || this.#spent * 2 < this.turnBytes) return;
    this.#armed = true;
    setImmediate(() => {
      this.#spent = 0;
      this.#armed = false;
    });
  }

  /** Sockets sharing the budget now. */
  get sockets(): number {
    return this.#sockets.size;
  }

  /** Counts `socket` in (once, however often it is opened). */
  open(socket: { readonly bufferedAmount: number }): void {
    this.#sockets.add(socket);
  }

  /** Counts `socket` out. */
  close(socket: { readonly bufferedAmount: number }): void {
    this.#sockets.delete(socket);
  }

  /** Bytes one socket may hold now. */
  share(): number {
    const share = Math.floor(this.bytes / Math.max(1, this.#sockets.size));
    return Math.max(MIN_SEND_SHARE_BYTES, Math.min(MAX_SEND_SHARE_BYTES, share));
  }

  /** Bytes the sockets hold now, handed to `send` and not yet written (their `bufferedAmount`s). */
  buffered(): number {
    let n = 0;
    for (const s of this.#sockets) n += s.bufferedAmount;
    return n;
  }
}
