/**
 * The catch-up pacer: sharing the event loop between catching-up subscribers.
 *
 * Replaying history is the server's heaviest work: a subscriber that starts
 * at offset 1 in single-frame mode asks for one `send` per row. Left alone,
 * every catching-up subscriber would send as much as its socket takes, and a
 * hundred of them (a reconnect storm, or clients that subscribe from the start
 * and hang up) would hold the event loop for a long time between two turns,
 * delaying the live rows of everyone else.
 *
 * A {@linkcode CatchUpPacer} bounds that work per turn of the event loop: together,
 * the catching-up subscribers spend at most `budget` (bytes sent plus a cost
 * per frame) before the loop goes back to I/O — new rows, live fan-out, new
 * connections — and they take turns in arrival order.
 *
 * @module
 */

import { setImmediate } from "node:timers";

/**
 * What one frame costs beyond its bytes, in bytes: a `send` call costs about
 * what encoding and copying 4 KiB of text does.
 */
export const FRAME_COST = 4096;
/**
 * Default work per turn of the event loop, in bytes (each frame counts
 * {@linkcode FRAME_COST} more): about a millisecond or two of sending.
 */
export const DEFAULT_TURN_BUDGET = 512 * 1024;

/**
 * A per-turn budget shared by many async loops (one per process serves every
 * catching-up subscriber: see catch_up.ts). A loop calls
 * {@linkcode CatchUpPacer.turn} before a synchronous slice of work (no `await`
 * inside) and {@linkcode CatchUpPacer.spend} after it, always (with 0 when it did
 * nothing).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { CatchUpPacer } from "./catch_up_pacer.ts";
 * const pacer = new CatchUpPacer(1000);
 * const order: string[] = [];
 * async function worker(name: string, slices: number) {
 *   for (let i = 0; i < slices; i++) {
 *     await pacer.turn();
 *     order.push(name);
 *     pacer.spend(600); // over half the budget: two slices per turn
 *   }
 * }
 * await Promise.all([worker("a", 2), worker("b", 2)]);
 * equal(order.join(""), "abab");
 * ```
 */
export class CatchUpPacer {
  /** Work allowed per turn. */
  readonly budget: number;
  #spent = 0;
  #queue: (() => void)[] = [];
  #armed = false;
  #active = 0;

  /** A pacer allowing `budget` units of work per turn of the event loop. */
  constructor(budget: number = DEFAULT_TURN_BUDGET) {
    this.budget = budget;
  }

  /** Loops waiting for their turn. */
  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * Resolves when the caller may do a slice of work: at once when this turn
   * has budget left and nobody is waiting, else in arrival order.
   */
  turn(): Promise<void> {
    if (this.#queue.length === 0 && this.#active === 0 && this.#spent < this.budget) {
      this.#active++;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.#queue.push(() => {
        this.#active++;
        resolve();
      });
      this.#arm();
    });
  }

  /** Records a finished slice of `cost` units and lets the next loop go. */
  spend(cost: number): void {
    this.#active = Math.max(0, this.#active - 1);
    this.#spent += cost;
    this.#arm();
    if (this.#spent < this.budget) this.#next();
  }

  #next(): void {
    if (this.#active === 0) this.#queue.shift()?.();
  }

  #arm(): void {
    if (this.#armed) return;
    this.#armed = true;
    setImmediate(() => {
      this.#armed = false;
      this.#spent = 0;
      // Slices are synchronous: whoever was let go last turn is done by now
      // (had it forgotten to spend, nobody would wait behind it forever).
      this.#active = 0;
      this.#next();
      if (this.#queue.length > 0) this.#arm();
    });
  }
}
