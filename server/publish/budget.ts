/**
 * The bytes of publishing a server holds at once: every publish frame taken
 * from a socket (parsed, validated, committing) and every `POST` body being
 * read or committed counts here until it is answered. Past the bound a
 * socket takes no more frames (they wait, unread, as beyond its window) and
 * a `POST` body is not read (TCP pushes back on its sender) until answers
 * free room. One publish always goes when nothing else is held, whatever
 * its size, so a body or frame up to `max_publish_bytes` is never stuck.
 *
 * @module
 */

/** Default bound of {@linkcode PublishBudget}: 64 MiB. */
export const DEFAULT_MAX_PUBLISH_SERVER_BYTES = 64 << 20;

/**
 * Bytes of publishing held server-wide, against a bound.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { PublishBudget } from "./budget.ts";
 * const b = new PublishBudget(100);
 * const took = [b.tryTake(80), b.tryTake(30)]; // the second would pass the bound
 * let woken = false;
 * b.whenFreed(() => (woken = true));
 * b.release(80);
 * deepEqual([took, woken, b.tryTake(30), b.used], [[true, false], true, true, 30]);
 * ```
 */
export class PublishBudget {
  /** The bound, bytes. */
  readonly maxBytes: number;
  #used = 0;
  #waiting: (() => void)[] = [];

  /** A budget of `maxBytes`. */
  constructor(maxBytes: number) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
      throw new RangeError(`the publish bytes bound must be an integer ≥ 1, got ${maxBytes}`);
    }
    this.maxBytes = maxBytes;
  }

  /** Bytes held now. */
  get used(): number {
    return this.#used;
  }

  /** Takes `bytes` if they fit (or nothing is held); whether it did. */
  tryTake(bytes: number): boolean {
    if (this.#used > 0 && this.#used + bytes > this.maxBytes) return false;
    this.#used += bytes;
    return true;
  }

  /** Takes `bytes` once they fit, waiting for releases. */
  async take(bytes: number): Promise<void> {
    while (!this.tryTake(bytes)) await new Promise<void>((r) => this.whenFreed(r));
  }

  /** Gives back `bytes` taken, and wakes who waits for room. */
  release(bytes: number): void {
    this.#used = Math.max(0, this.#used - bytes);
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const wake of waiting) wake();
  }

  /** Calls `wake` once, at the next release. */
  whenFreed(wake: () => void): void {
    this.#waiting.push(wake);
  }
}
