/**
 * The commit gate of a replicated log: a row is *durable* once this node's
 * fsync covers it, and *committed* once the cluster says enough nodes hold it
 * (Kafka's high watermark). Only committed rows are visible — to readers,
 * to the fan-out, to the callers awaiting their append — so that no one is
 * told of a row a failover could take back.
 *
 * Invariants:
 * - the visible end is `min(durable end, commit index)` and only grows;
 * - a waiter for end `e` resolves once the visible end reaches `e`, in the
 *   order of `e`; `fail` rejects every waiter there is now, and leaves the
 *   rows as they are (they may still be committed later, or cut);
 * - `onVisible(first, end)` is told each stretch that became visible, in
 *   offset order, with no gap and no overlap.
 *
 * @module
 */

interface Waiter {
  end: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * Where a replicated log's rows become visible.
 *
 * @example
 * ```ts
 * import { deepEqual, equal } from "node:assert/strict";
 * import { CommitGate } from "./commit_gate.ts";
 * const gate = new CommitGate(1);
 * const seen: number[][] = [];
 * gate.onVisible = (first, end) => seen.push([first, end]);
 * let acked = false;
 * gate.until(4).then(() => (acked = true));
 * gate.durable(4); // this node's fsync covers 1..3
 * equal(gate.end, 1); // not committed yet
 * gate.commitThrough(4); // the cluster holds 1..3
 * await Promise.resolve();
 * equal(acked, true);
 * deepEqual(seen, [[1, 4]]);
 * ```
 */
export class CommitGate {
  /** Told each stretch `[first, end)` that became visible, in offset order. */
  onVisible: ((first: number, end: number) => void) | null = null;
  #durable: number;
  #target: number;
  #visible: number;
  // Waiters in order of their end; `#head` is the first one not yet settled.
  #waiters: Waiter[] = [];
  #head = 0;

  /**
   * A gate over a log durable below `durable`, of which every row below
   * `committed` is known to be committed (default: all of them).
   */
  constructor(durable: number, committed: number = durable) {
    this.#durable = durable;
    this.#target = committed;
    this.#visible = Math.min(durable, committed);
  }

  /** The visible end (exclusive): every row below it is durable here and committed. */
  get end(): number {
    return this.#visible;
  }

  /** The durable end this gate was told. */
  get durableEnd(): number {
    return this.#durable;
  }

  /** The commit index this gate was told (may be above the durable end). */
  get commitIndex(): number {
    return this.#target;
  }

  /** Waiters not yet settled. */
  get waiting(): number {
    return this.#waiters.length - this.#head;
  }

  /** This node's fsync now covers every row below `end`. */
  durable(end: number): void {
    if (end > this.#durable) {
      this.#durable = end;
      this.#advance();
    }
  }

  /**
   * The cluster holds every row below `index` (never taken back: a lower
   * index than one told before changes nothing).
   */
  commitThrough(index: number): void {
    if (index > this.#target) {
      this.#target = index;
      this.#advance();
    }
  }

  /**
   * The log's tail was cut: it now ends at `end`, which is not below the
   * visible end (committed rows are never cut).
   *
   * @throws {RangeError} when `end` is below the visible end.
   */
  cut(end: number): void {
    if (end < this.#visible) {
      throw new RangeError(`cannot cut at ${end}: rows up to ${this.#visible - 1} are committed`);
    }
    this.#durable = end;
    if (this.#target > end) this.#target = end;
  }

  /** Resolves once every row below `end` is visible. */
  until(end: number): Promise<void> {
    if (end <= this.#visible) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w = { end, resolve, reject };
      const list = this.#waiters;
      // Appends wait in offset order, so this is nearly always a push.
      let i = list.length;
      while (i > this.#head && list[i - 1].end > end) i--;
      list.splice(i, 0, w);
    });
  }

  /** Rejects every waiter there is now with `err` (the rows stay as they are). */
  fail(err: Error): void {
    const list = this.#waiters.slice(this.#head);
    this.#waiters = [];
    this.#head = 0;
    for (const w of list) w.reject(err);
  }

  #advance(): void {
    const to = Math.min(this.#durable, this.#target);
    if (to <= this.#visible) return;
    const from = this.#visible;
    this.#visible = to;
    this.onVisible?.(from, to);
    const list = this.#waiters;
    while (this.#head < list.length && list[this.#head].end <= to) list[this.#head++].resolve();
    if (this.#head === list.length) {
      this.#waiters = [];
      this.#head = 0;
    } else if (this.#head > 1024) {
      this.#waiters = list.slice(this.#head);
      this.#head = 0;
    }
  }
}
