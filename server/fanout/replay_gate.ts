/**
 * How catching-up subscribers take turns reading the log: every read of a
 * replay holds one of a server's `maxReplayReaders` permits, handed out in
 * arrival order, so a reconnect storm queues its reads instead of opening
 * them all at once.
 *
 * @module
 */

import { checkLimit } from "../limits.ts";

/**
 * A counting semaphore that hands its permits out in arrival order: at most
 * `max` holders at once, the others wait their turn.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Gate } from "./replay_gate.ts";
 * const gate = new Gate(1);
 * await gate.acquire();
 * const second = gate.acquire(); // waits
 * equal(gate.active, 1);
 * equal(gate.waiting, 1);
 * gate.release(); // hands the permit to the waiter
 * await second;
 * gate.release();
 * equal(gate.active, 0);
 * ```
 */
export class Gate {
  /** Permits in all. */
  readonly max: number;
  #active = 0;
  #waiters: (() => void)[] = [];
  #head = 0;

  /** A gate of `max` permits (an integer ≥ 1). */
  constructor(max: number) {
    this.max = checkLimit("Gate max", max, 1);
  }

  /** Permits held now. */
  get active(): number {
    return this.#active;
  }

  /** Callers waiting for a permit. */
  get waiting(): number {
    return this.#waiters.length - this.#head;
  }

  /** Resolves once the caller holds a permit; pair with {@linkcode Gate.release}. */
  acquire(): Promise<void> {
    if (this.#active < this.max && this.waiting === 0) {
      this.#active++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Gives a permit back: to the longest waiter if there is one. */
  release(): void {
    if (this.waiting > 0) {
      // The permit passes straight on: `active` stays as it is.
      const next = this.#waiters[this.#head++];
      if (this.#head > 1024 && this.#head * 2 > this.#waiters.length) {
        this.#waiters = this.#waiters.slice(this.#head);
        this.#head = 0;
      }
      next();
      return;
    }
    if (this.#active === 0) throw new RangeError("Gate released more often than acquired");
    this.#active--;
  }

  /** Runs `fn` holding a permit. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await fn();
    } finally {
      this.release();
    }
  }
}

/**
 * The reads of a catching-up subscriber: a `LogReader`, or a
 * {@linkcode GatedReader} around one.
 */
export interface ReplayReader<B> {
  /** The next offset the reader will return (or the first after it). */
  readonly offset: number;
  /** Reads the next rows, about `maxBytes` of them. */
  read(maxBytes: number): Promise<B>;
  /** Lets the reader go. */
  close(): void;
}

/**
 * A log reader whose reads each hold one of a {@linkcode Gate}'s permits.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Gate, GatedReader } from "./replay_gate.ts";
 * const gate = new Gate(1);
 * const inner = { offset: 1, read: () => Promise.resolve(gate.active), close: () => {} };
 * const reader = new GatedReader(inner, gate);
 * equal(await reader.read(1024), 1); // the read held the permit
 * equal(gate.active, 0);
 * ```
 */
export class GatedReader<B> implements ReplayReader<B> {
  readonly #reader: ReplayReader<B>;
  readonly #gate: Gate;

  /** Wraps `reader`: each read waits for a permit of `gate`. */
  constructor(reader: ReplayReader<B>, gate: Gate) {
    this.#reader = reader;
    this.#gate = gate;
  }

  /** The next offset the reader will return. */
  get offset(): number {
    return this.#reader.offset;
  }

  /** Reads through the gate. */
  read(maxBytes: number): Promise<B> {
    return this.#gate.run(() => this.#reader.read(maxBytes));
  }

  /** Closes the reader. */
  close(): void {
    this.#reader.close();
  }
}
