/**
 * Holding an etcd lease: granted once, renewed every third of its TTL, and
 * counted on the holder's own clock (`lease_clock.ts`). Once the clock runs
 * out — every renewal failed for a whole TTL, etcd said the lease is gone,
 * or the process was paused past it — the lease is lost for good: `lost`
 * aborts, renewals stop, and whoever held something with it (a leadership,
 * a node's registration) starts again with a new lease. A lease that etcd
 * may still hold is revoked when etcd can be reached, so that the keys
 * attached to it go at once rather than a TTL later.
 *
 * @module
 */

import type { EtcdClient } from "./etcd_client.ts";
import { LeaseClock } from "./lease_clock.ts";

/** Options of {@linkcode LeaseKeeper.grant}. */
export interface LeaseKeeperOptions {
  /** The lease's TTL, s (etcd may raise it to its minimum; the granted TTL counts). */
  ttlSeconds: number;
  /** Taken off each renewal for clock drift, ms. @default defaultMarginMs(TTL) */
  marginMs?: number;
  /** The monotonic clock, ms. @default performance.now */
  now?: () => number;
  /** Told once, when the lease is lost, why. */
  onLost?: (why: string) => void;
}

/**
 * A lease kept alive until it is lost, revoked or closed.
 *
 * @example
 * ```ts ignore
 * const lease = await LeaseKeeper.grant(etcd, { ttlSeconds: 5 });
 * if (lease.valid()) await etcd.put("/k", "v", { lease: lease.id });
 * lease.lost.addEventListener("abort", () => console.log(lease.lostWhy));
 * await lease.revoke();
 * ```
 */
export class LeaseKeeper {
  /** The lease id. */
  readonly id: string;
  /** The TTL etcd granted, s. */
  readonly ttlSeconds: number;
  /** The holder's clock of this lease. */
  readonly clock: LeaseClock;
  readonly #client: EtcdClient;
  readonly #lost = new AbortController();
  readonly #onLost: ((why: string) => void) | undefined;
  #why: string | null = null;
  #renewTimer: ReturnType<typeof setTimeout> | undefined;
  #lapseTimer: ReturnType<typeof setTimeout> | undefined;
  #renewing: Promise<void> | null = null;
  #closed = false;

  private constructor(
    client: EtcdClient,
    id: string,
    ttlSeconds: number,
    clock: LeaseClock,
    onLost: ((why: string) => void) | undefined,
  ) {
    this.#client = client;
    this.id = id;
    this.ttlSeconds = ttlSeconds;
    this.clock = clock;
    this.#onLost = onLost;
  }

  /** Grants a lease and starts renewing it. The clock counts from before the grant was sent. */
  static async grant(client: EtcdClient, options: LeaseKeeperOptions): Promise<LeaseKeeper> {
    const clock = new LeaseClock({ marginMs: options.marginMs, now: options.now });
    const sentAt = clock.now();
    const lease = await client.grant(options.ttlSeconds);
    clock.renewed(sentAt, lease.ttlSeconds);
    const keeper = new LeaseKeeper(client, lease.id, lease.ttlSeconds, clock, options.onLost);
    if (!clock.valid()) {
      keeper.#lose(`the grant took longer than the lease (${lease.ttlSeconds} s) less its margin`);
    } else keeper.#schedule();
    return keeper;
  }

  /** Aborts once the lease is lost (or revoked, or closed). */
  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** Why it was lost, or null while held. */
  get lostWhy(): string | null {
    return this.#why;
  }

  /** Whether the lease is ours now, on our own clock: ask before every act it allows. */
  valid(): boolean {
    if (this.#why !== null) return false;
    if (this.clock.valid()) return true;
    this.#lose("the lease ran out on this node's clock");
    return false;
  }

  /** How long the lease is still ours, ms. */
  remainingMs(): number {
    return this.valid() ? this.clock.remainingMs() : 0;
  }

  #schedule(): void {
    if (this.#why !== null) return;
    clearTimeout(this.#lapseTimer);
    // Wakes when the clock runs out, to say so even while a renewal hangs.
    this.#lapseTimer = setTimeout(() => this.valid(), this.clock.remainingMs() + 1);
    clearTimeout(this.#renewTimer);
    this.#renewTimer = setTimeout(() => this.#renew(), (this.ttlSeconds * 1000) / 3);
  }

  #renew(): void {
    if (!this.valid()) return;
    this.#renewing = (async () => {
      let retryMs = 100;
      while (this.valid()) {
        const sentAt = this.clock.now();
        try {
          const ttl = await this.#client.keepAlive(this.id, {
            timeoutMs: Math.max(50, Math.min(this.#client.timeoutMs, this.clock.remainingMs())),
            signal: this.#lost.signal,
          });
          if (this.#why !== null) return;
          if (ttl <= 0) {
            this.#lose("etcd no longer has the lease (expired or revoked)");
            return;
          }
          this.clock.renewed(sentAt, ttl);
          this.#schedule();
          return;
        } catch {
          if (this.#why !== null) return;
          // Unreachable for now: try again while the lease is still ours.
          await new Promise((r) => setTimeout(r, Math.min(retryMs, this.clock.remainingMs() + 1)));
          retryMs = Math.min(retryMs * 2, 1000);
        }
      }
    })().finally(() => (this.#renewing = null));
  }

  #lose(why: string): void {
    if (this.#why !== null) return;
    this.#why = why;
    this.clock.expire();
    clearTimeout(this.#renewTimer);
    clearTimeout(this.#lapseTimer);
    this.#lost.abort(new Error(why));
    if (!this.#closed) this.#onLost?.(why);
  }

  /**
   * Stops renewing and revokes the lease in etcd (its keys go at once);
   * false when etcd could not be reached (the lease then lapses by its TTL).
   */
  async revoke(): Promise<boolean> {
    this.#closed = true;
    this.#lose("revoked");
    await this.#renewing;
    try {
      await this.#client.revoke(this.id);
      return true;
    } catch {
      return false; // unreachable: it lapses by itself
    }
  }

  /** Stops renewing without revoking (the lease lapses by its TTL). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#lose("closed");
    await this.#renewing;
  }
}
