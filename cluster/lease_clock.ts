/**
 * A lease as its holder's own clock sees it. etcd counts a lease's TTL from
 * when its member received the grant or keepalive; the holder counts it from
 * when it SENT the request, which is earlier, and takes a margin off for
 * the two clocks running at different rates. So the holder's lease ends
 * before etcd can have expired it, and a holder that was paused (SIGSTOP),
 * cut off, or whose answer came late, knows on its own clock — before doing
 * anything — that it may no longer hold it. The clock is monotonic
 * (`performance.now()`), so a wall-clock step changes nothing.
 *
 * Patroni's leader lease in etcd and Kafka's controller lease keep the same
 * rule: the holder stops acting as leader before the lease can have lapsed.
 *
 * @module
 */

/**
 * The default margin taken off a lease for clock drift: a tenth of the TTL,
 * at least 100 ms.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { defaultMarginMs } from "./lease_clock.ts";
 * equal(defaultMarginMs(5), 500);
 * equal(defaultMarginMs(0.5), 100);
 * ```
 */
export function defaultMarginMs(ttlSeconds: number): number {
  return Math.max(100, Math.round(ttlSeconds * 100));
}

/** Options of {@linkcode LeaseClock}. */
export interface LeaseClockOptions {
  /** Taken off each renewal for clock drift, ms. @default defaultMarginMs(TTL) */
  marginMs?: number;
  /** The monotonic clock, ms. @default performance.now */
  now?: () => number;
}

/**
 * Until when a lease is ours, on our own clock.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { LeaseClock } from "./lease_clock.ts";
 * let now = 1000;
 * const clock = new LeaseClock({ marginMs: 500, now: () => now });
 * equal(clock.valid(), false); // never renewed
 * clock.renewed(1000, 5); // the keepalive was sent at 1000; etcd said TTL 5 s
 * now = 5000;
 * equal(clock.valid(), true);
 * equal(clock.remainingMs(), 500);
 * now = 5500; // 1000 + 5000 - 500
 * equal(clock.valid(), false);
 * ```
 */
export class LeaseClock {
  readonly #marginMs: number | null;
  readonly #now: () => number;
  #until = -Infinity;

  /** A clock for a lease not yet renewed. */
  constructor(options: LeaseClockOptions = {}) {
    if (options.marginMs !== undefined && !(options.marginMs >= 0)) {
      throw new RangeError(`marginMs must be ≥ 0, got ${options.marginMs}`);
    }
    this.#marginMs = options.marginMs ?? null;
    this.#now = options.now ?? (() => performance.now());
  }

  /** The clock's reading now, ms. */
  now(): number {
    return this.#now();
  }

  /**
   * A grant or keepalive sent at `sentAtMs` (this clock) was answered with
   * `ttlSeconds`: the lease is ours until `sentAtMs + TTL − margin` (never
   * earlier than a renewal already counted). A TTL of 0 (etcd no longer
   * has the lease) ends it now.
   */
  renewed(sentAtMs: number, ttlSeconds: number): void {
    if (ttlSeconds <= 0) {
      this.expire();
      return;
    }
    const margin = this.#marginMs ?? defaultMarginMs(ttlSeconds);
    this.#until = Math.max(this.#until, sentAtMs + ttlSeconds * 1000 - margin);
  }

  /** Ends the lease now (lost, revoked). */
  expire(): void {
    this.#until = -Infinity;
  }

  /** The reading of this clock at which the lease ends (−Infinity: not held). */
  get validUntil(): number {
    return this.#until;
  }

  /** Whether the lease is ours now. */
  valid(): boolean {
    return this.#now() < this.#until;
  }

  /** How long the lease is still ours, ms (0 when it is not). */
  remainingMs(): number {
    return Math.max(0, this.#until - this.#now());
  }
}
