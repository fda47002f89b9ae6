/**
 * The bytes of publishing a server holds at once: every publish frame taken
 * from a socket (parsed, validated, committing) and every `POST` body being
 * read or committed counts here until it is answered. Past the bound a
 * socket takes no more frames (they wait, unread, as beyond its window) and
 * a `POST` body is not read further (TCP pushes back on its sender) until
 * answers free room. One publish always goes when nothing else is held,
 * whatever its size, so a body or frame up to `max_publish_bytes` is never
 * stuck.
 *
 * A `POST` body is read on only while the rest it declares fits, but it
 * holds only the bytes that arrived, not its declared length: a sender that
 * declares a large body and sends nothing holds nothing. Bodies read
 * part-way could then fill the bound together and each wait for the others;
 * so one body at a time may go past the bound (by at most
 * `max_publish_bytes`) and finish, and its answer frees room for the rest.
 *
 * @module
 */

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
  // The body being read past the bound, if any (see the module doc).
  #over: object | null = null;

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

  /**
   * Resolves once the body `owner` is reading may read on, `upTo` more bytes
   * of it to come at most, `holding` bytes of it held: when they fit (or
   * nothing is held), or — a body held part-way — when no other body is let
   * past the bound. The bytes read are counted with
   * {@linkcode PublishBudget.took} and given back with
   * {@linkcode PublishBudget.endBody}.
   */
  async beforeRead(upTo: number, holding: number, owner: object): Promise<void> {
    while (this.#used > 0 && this.#used + upTo > this.maxBytes) {
      if (holding > 0 && (this.#over === null || this.#over === owner)) {
        this.#over = owner;
        return;
      }
      await new Promise<void>((r) => this.whenFreed(r));
    }
  }

  /** Counts `bytes` of a body read. */
  took(bytes: number): void {
    this.#used += bytes;
  }

  /** The body `owner` read is answered: gives back its `bytes` (and its place past the bound). */
  endBody(bytes: number, owner: object): void {
    if (this.#over === owner) this.#over = null;
    this.release(bytes);
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
