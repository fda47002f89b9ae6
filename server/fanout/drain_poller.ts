/**
 * Re-polling blocked sockets: Deno's WebSocket has no drain event, so a
 * subscriber whose socket holds its share of the send buffer is re-checked
 * until `bufferedAmount` falls (see {@linkcode DrainPoller}).
 *
 * @module
 */

import { clearImmediate, setImmediate } from "node:timers";

/** What the poller re-checks: `_poll` returns whether it is still blocked. */
export interface Pollable {
  /** Re-checks the socket at `now` (ms); returns whether it is still blocked. */
  _poll(now: number): boolean;
}

/** Interval (ms) of the slow poll of blocked sockets. */
const SLOW_POLL_MS = 5;
/** Quick re-checks of a catching-up socket before it joins the slow poll. */
const QUICK_CHECKS = 4;
/** Delay (ms) between quick re-checks after the first (which is immediate). */
const QUICK_POLL_MS = 1;

/**
 * Re-polls blocked sockets (Deno's WebSocket has no drain event).
 *
 * Deno lowers `bufferedAmount` once the kernel has taken a whole frame, which
 * on a reading socket is usually the next turn of the event loop. So a
 * catching-up subscriber (whose next log read waits on it) is re-checked on
 * the next turn and then every millisecond a few times, before it joins the
 * slow poll every {@linkcode SLOW_POLL_MS} ms; a stalled socket costs a few
 * checks once, never a spin. Live subscribers go straight to the slow poll
 * unless they ask for the quick re-checks too.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { DrainPoller } from "./drain_poller.ts";
 * let left = 2;
 * const poller = new DrainPoller();
 * await new Promise<void>((done) => {
 *   poller.add({ _poll: () => --left > 0 || (done(), false) }, true);
 * });
 * equal(left, 0);
 * ```
 */
export class DrainPoller<S extends Pollable> {
  #subs = new Set<S>();
  #timer: ReturnType<typeof setInterval> | undefined;
  // Subscribers on quick re-checks, with the checks they have had.
  #quick = new Map<S, number>();
  #quickImmediate: ReturnType<typeof setImmediate> | undefined;
  #quickTimer: ReturnType<typeof setTimeout> | undefined;

  /** Subscribers being re-checked now. */
  get size(): number {
    return this.#subs.size + this.#quick.size;
  }

  /** Re-checks `sub` until its `_poll` returns false; `quick`: first on the next turns. */
  add(sub: S, quick = false): void {
    if (quick) {
      this.#quick.set(sub, 0);
      if (this.#quickImmediate === undefined && this.#quickTimer === undefined) {
        this.#quickImmediate = setImmediate(() => this.#quickTick());
      }
      return;
    }
    this.#subs.add(sub);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#tick(), SLOW_POLL_MS);
    }
  }

  /** Stops re-checking `sub`. */
  delete(sub: S): void {
    this.#quick.delete(sub);
    this.#subs.delete(sub);
    this.#stopIfIdle();
  }

  #quickTick(): void {
    this.#quickImmediate = undefined;
    this.#quickTimer = undefined;
    const now = Date.now();
    for (const [s, checks] of this.#quick) {
      if (!s._poll(now)) this.#quick.delete(s);
      else if (checks + 1 < QUICK_CHECKS) this.#quick.set(s, checks + 1);
      else {
        this.#quick.delete(s);
        this.add(s);
      }
    }
    if (this.#quick.size > 0) this.#quickTimer = setTimeout(() => this.#quickTick(), QUICK_POLL_MS);
  }

  #tick(): void {
    const now = Date.now();
    for (const s of this.#subs) {
      if (!s._poll(now)) this.#subs.delete(s);
    }
    this.#stopIfIdle();
  }

  #stopIfIdle(): void {
    if (this.#subs.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
    if (this.#quick.size === 0) {
      if (this.#quickImmediate !== undefined) clearImmediate(this.#quickImmediate);
      if (this.#quickTimer !== undefined) clearTimeout(this.#quickTimer);
      this.#quickImmediate = this.#quickTimer = undefined;
    }
  }
}
