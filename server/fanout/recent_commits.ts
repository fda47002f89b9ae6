/**
 * The frames of a stream's last commits, kept so that a subscriber that
 * starts a few rows behind the end (a reconnect at its cursor) is sent them
 * from memory and goes live in the same synchronous step, as a bare
 * broadcaster's ring of recent frames would, instead of opening the log,
 * reading it and closing it through the replay gate. A reconnect storm of
 * thousands of subscribers otherwise makes thousands of file opens, seeks
 * and reads for rows every one of them had a moment ago.
 *
 * Invariants:
 * - the commits held are contiguous, in offset order, and end at `end`; a
 *   commit that does not start at `end` (the log's tail was cut, rows were
 *   adopted) replaces them all;
 * - at most {@linkcode RECENT_ROWS} rows and {@linkcode RECENT_CHARS}
 *   characters of frames are held (the oldest commits go first; a commit
 *   larger than that is not held), so the rows handed out at once fit one
 *   batched frame (at most 4096 rows and 1 MiB, docs/SPEC.md §2.2);
 * - `from` answers only for an offset where a held commit starts, and only
 *   while `end` is the log's durable end: anything else catches up from the
 *   log as before.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { RecentCommits } from "./recent_commits.ts";
 * const recent = new RecentCommits();
 * recent.add(10, ['[10,{"v":1}]', '[11,{"v":2}]']);
 * recent.add(12, ['[12,{"v":3}]']);
 * deepStrictEqual(recent.from(11, 13), null); // not where a commit starts
 * deepStrictEqual(recent.from(12, 13), ['[12,{"v":3}]']);
 * equal(recent.from(10, 14), null); // the log's end moved past what is held
 * ```
 *
 * @module
 */

/** Most rows held. */
export const RECENT_ROWS = 1024;
/** Most characters of frames held. */
export const RECENT_CHARS = 1 << 20;

interface Commit {
  readonly first: number;
  readonly frames: readonly string[];
  readonly chars: number;
}

/** The last commits' frames of one stream (see the module doc). */
export class RecentCommits {
  #commits: Commit[] = [];
  #head = 0;
  #rows = 0;
  #chars = 0;
  #end = -1;

  /** Holds a commit's frames (`[offset,msg]` each) from offset `first`. */
  add(first: number, frames: readonly string[]): void {
    if (first !== this.#end) this.clear();
    let chars = 0;
    for (let i = 0; i < frames.length; i++) chars += frames[i].length;
    if (frames.length > RECENT_ROWS || chars > RECENT_CHARS) {
      this.clear();
      return;
    }
    this.#commits.push({ first, frames, chars });
    this.#rows += frames.length;
    this.#chars += chars;
    this.#end = first + frames.length;
    while (this.#rows > RECENT_ROWS || this.#chars > RECENT_CHARS) {
      const old = this.#commits[this.#head++];
      this.#rows -= old.frames.length;
      this.#chars -= old.chars;
    }
    if (this.#head > 64 && this.#head * 2 > this.#commits.length) {
      this.#commits = this.#commits.slice(this.#head);
      this.#head = 0;
    }
  }

  /** Forgets every commit (the log's end moved without one). */
  clear(): void {
    this.#commits = [];
    this.#head = 0;
    this.#rows = 0;
    this.#chars = 0;
    this.#end = -1;
  }

  /**
   * The frames from `offset` to the end, when a held commit starts at
   * `offset` and the commits held end at `end` (the log's durable end); else null.
   */
  from(offset: number, end: number): string[] | null {
    if (this.#end !== end || offset >= end) return null;
    const cs = this.#commits;
    for (let k = this.#head; k < cs.length; k++) {
      if (cs[k].first > offset) return null;
      if (cs[k].first !== offset) continue;
      const out: string[] = [];
      for (let j = k; j < cs.length; j++) for (const f of cs[j].frames) out.push(f);
      return out;
    }
    return null;
  }
}
