/**
 * The leader's most recent commits as shipped to followers, held in one
 * buffer of a fixed size, so that what the ring holds is what it costs: a
 * ring of separate arrays pays an allocation and two objects for every
 * commit kept — at a few rows a commit, more than the bytes themselves.
 *
 * - The buffer (`capacity` bytes) is made at the first commit kept and let
 *   go by {@linkcode CommitRing.clear}; its pages are resident only once
 *   written, so memory grows to `capacity` as the ring first fills and not
 *   past it.
 * - Commits are written one after another, wrapping to the start when the
 *   next does not fit before the end; whatever a write covers is dropped,
 *   oldest first, so the ring always holds a run of consecutive commits.
 * - A commit larger than the whole buffer is kept by itself, by reference,
 *   until the next: the newest commit is always held.
 * - The index (first offset, end, where, how long) lives in typed arrays
 *   that double when full: no object per commit.
 *
 * @module
 */

const INDEX_START = 1024;

/**
 * A commit as held: its first offset, its end (one past its last row) and
 * its bytes as shipped — a view of the ring's buffer, valid until the next
 * {@linkcode CommitRing.push} (a socket's `send` copies it).
 */
export interface HeldCommit {
  first: number;
  end: number;
  bytes: Uint8Array;
}

/**
 * The most recent commits, consecutive, in at most `capacity` bytes.
 *
 * @example
 * ```ts
 * import { deepEqual, equal } from "node:assert/strict";
 * import { CommitRing } from "./commit_ring.ts";
 * const ring = new CommitRing(8);
 * ring.push(1, 3, new Uint8Array([1, 1, 1, 1]));
 * ring.push(3, 4, new Uint8Array([2, 2, 2]));
 * deepEqual([...ring.get(3)!.bytes], [2, 2, 2]);
 * ring.push(4, 6, new Uint8Array([3, 3, 3])); // wraps: the commit at 1 is dropped
 * equal(ring.get(1), null);
 * deepEqual([ring.start, ring.end, ring.bytes], [3, 6, 6]);
 * ```
 */
export class CommitRing {
  /** The buffer's size, bytes. */
  readonly capacity: number;
  #buf: Uint8Array | null = null;
  // The index: a circular queue of `#count` commits from `#head`.
  #first = new Float64Array(INDEX_START);
  #end = new Float64Array(INDEX_START);
  #pos = new Int32Array(INDEX_START);
  #len = new Int32Array(INDEX_START);
  #head = 0;
  #count = 0;
  // Where the next commit is written.
  #write = 0;
  #held = 0;
  // The newest commit when it is larger than the buffer (the queue is empty then).
  #big: HeldCommit | null = null;

  /** A ring of `capacity` bytes (made at the first commit kept). */
  constructor(capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1 || capacity > 2 ** 31 - 1) {
      throw new RangeError(
        `a commit ring's capacity must be 1 – 2147483647 bytes, got ${capacity}`,
      );
    }
    this.capacity = capacity;
  }

  /** Bytes of commits held. */
  get bytes(): number {
    return this.#big?.bytes.length ?? this.#held;
  }

  /** The first offset held (0 when empty). */
  get start(): number {
    if (this.#big) return this.#big.first;
    return this.#count === 0 ? 0 : this.#first[this.#head];
  }

  /** One past the last offset held (0 when empty). */
  get end(): number {
    if (this.#big) return this.#big.end;
    return this.#count === 0 ? 0 : this.#end[this.#at(this.#count - 1)];
  }

  /**
   * Keeps the commit of offsets `first` to `end` (exclusive) as `bytes`
   * (copied), dropping the oldest it needs room of.
   *
   * @throws {RangeError} If it does not follow the newest held.
   */
  push(first: number, end: number, bytes: Uint8Array): void {
    const newest = this.end;
    if ((this.#count > 0 || this.#big) && first !== newest) {
      throw new RangeError(`a commit from ${first} does not follow the ring's end ${newest}`);
    }
    const len = bytes.length;
    if (len > this.capacity) {
      this.#empty();
      this.#big = { first, end, bytes };
      return;
    }
    this.#big = null;
    const buf = (this.#buf ??= new Uint8Array(this.capacity));
    let p = this.#write;
    const wrapped = p + len > this.capacity;
    if (wrapped) p = 0;
    // Drop, oldest first, what the write covers — and on a wrap the end
    // of the buffer left unused, which holds the oldest of all.
    while (this.#count > 0) {
      const h = this.#head;
      const hp = this.#pos[h];
      const covered = hp < p + len && hp + this.#len[h] > p;
      if (!covered && !(wrapped && hp >= this.#write)) break;
      this.#held -= this.#len[h];
      this.#head = (h + 1) % this.#first.length;
      this.#count--;
    }
    buf.set(bytes, p);
    this.#write = p + len;
    if (this.#count === this.#first.length) this.#grow();
    const i = this.#at(this.#count);
    this.#first[i] = first;
    this.#end[i] = end;
    this.#pos[i] = p;
    this.#len[i] = len;
    this.#count++;
    this.#held += len;
  }

  /** The commit starting at `offset`, or null when none held starts there. */
  get(offset: number): HeldCommit | null {
    if (this.#big) return this.#big.first === offset ? this.#big : null;
    if (this.#count === 0 || offset < this.start || offset >= this.end) return null;
    let lo = 0;
    let hi = this.#count - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.#end[this.#at(mid)] <= offset) lo = mid + 1;
      else hi = mid;
    }
    const i = this.#at(lo);
    if (this.#first[i] !== offset) return null;
    const p = this.#pos[i];
    return { first: offset, end: this.#end[i], bytes: this.#buf!.subarray(p, p + this.#len[i]) };
  }

  /** Drops every commit and lets the buffer go. */
  clear(): void {
    this.#empty();
    this.#big = null;
    this.#buf = null;
  }

  #empty(): void {
    this.#head = 0;
    this.#count = 0;
    this.#write = 0;
    this.#held = 0;
  }

  #at(k: number): number {
    return (this.#head + k) % this.#first.length;
  }

  // Doubles the index, the queue laid out again from 0.
  #grow(): void {
    const n = this.#first.length * 2;
    const first = new Float64Array(n);
    const end = new Float64Array(n);
    const pos = new Int32Array(n);
    const len = new Int32Array(n);
    for (let k = 0; k < this.#count; k++) {
      const i = this.#at(k);
      first[k] = this.#first[i];
      end[k] = this.#end[i];
      pos[k] = this.#pos[i];
      len[k] = this.#len[i];
    }
    this.#first = first;
    this.#end = end;
    this.#pos = pos;
    this.#len = len;
    this.#head = 0;
  }
}
