/**
 * A live subscriber's queue: the runs of commits handed to it while its
 * socket held its share of the send buffer (see live_pieces.ts), kept as
 * references to the commits' shared frames, never as copies, in offset
 * order. Frames are taken from the front as the socket drains: a whole run
 * (its shared text, Arrow or zstd frame), or frame by frame across runs.
 *
 * Invariants: `rows` is the number of frames queued and not yet taken; the
 * next frame taken is `head.frames[at]`; `end` is the offset after the last
 * commit queued (durable streams), where a subscriber that takes the last
 * frame continues.
 *
 * @module
 */

import type { LivePiece } from "./live_pieces.ts";

/**
 * The queue of one live subscriber.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { LiveQueue } from "./live_queue.ts";
 * import { wholeCommit } from "./live_pieces.ts";
 * const frames = ["[1,1]", "[2,2]", "[3,3]"];
 * const shared = { joined: () => frames.join("\n"), arrow: () => new Uint8Array(0) };
 * const q = new LiveQueue();
 * q.add(wholeCommit(frames, 4, shared));
 * q.end = 4;
 * deepStrictEqual(q.takeFrames(2, Infinity, true), ["[1,1]", "[2,2]"]);
 * equal(q.rows, 1);
 * deepStrictEqual(q.takeFrames(2, 3, false), []); // over the room
 * deepStrictEqual(q.takeFrames(2, 3, true), ["[3,3]"]); // but one frame goes anyway
 * equal(q.rows, 0);
 * ```
 */
export class LiveQueue {
  #runs: (LivePiece | undefined)[] = [];
  #head = 0;
  #at = 0;
  #rows = 0;
  /** The offset after the last commit queued (durable streams). */
  end = 0;

  /** Frames queued and not yet taken. */
  get rows(): number {
    return this.#rows;
  }

  /** The run the next frame is in (undefined when empty). */
  get head(): LivePiece | undefined {
    return this.#runs[this.#head];
  }

  /** The run after the head (undefined when none). */
  get second(): LivePiece | undefined {
    return this.#runs[this.#head + 1];
  }

  /** The index in `head.frames` of the next frame; `head.from` when the head is untouched. */
  get at(): number {
    return this.#at;
  }

  /** Queues `run` behind what is queued. */
  add(run: LivePiece): void {
    if (this.#head === this.#runs.length) this.#at = run.from;
    this.#runs.push(run);
    this.#rows += run.to - run.from;
  }

  /** Takes the head run whole (the caller checked that `at` is its first frame). */
  takeRun(): LivePiece {
    const run = this.#runs[this.#head]!;
    this.#rows -= run.to - this.#at;
    this.#advance();
    return run;
  }

  /**
   * Takes up to `maxRows` frames from the front, across runs, while they
   * (joined with `\n`) fit `room` characters; `first`: the first frame is
   * taken even when it alone is over `room`.
   */
  takeFrames(maxRows: number, room: number, first: boolean): string[] {
    const out: string[] = [];
    let chars = -1;
    while (this.#head < this.#runs.length && out.length < maxRows) {
      const run = this.#runs[this.#head]!;
      const f = run.frames[this.#at];
      if (chars + f.length + 1 > room && !(out.length === 0 && first)) break;
      out.push(f);
      chars += f.length + 1;
      this.#rows--;
      if (++this.#at === run.to) this.#advance();
    }
    return out;
  }

  /** Drops everything queued (the subscriber goes back to the log, or is closed). */
  clear(): void {
    this.#runs = [];
    this.#head = 0;
    this.#at = 0;
    this.#rows = 0;
  }

  // On to the next run, at its first frame; the runs taken are let go.
  #advance(): void {
    this.#runs[this.#head++] = undefined;
    const next = this.#runs[this.#head];
    if (next === undefined) this.clear();
    else {
      this.#at = next.from;
      if (this.#head > 1024 && this.#head * 2 > this.#runs.length) {
        this.#runs = this.#runs.slice(this.#head);
        this.#head = 0;
      }
    }
  }
}
