/**
 * A subscription's resume position and its saving: which offset is the
 * first not yet handled, and when the cursor is saved — after every
 * `saveEveryRows` rows handled (awaited by the loop, so a crash re-delivers
 * at most that many), and `saveEveryMs` after a row handled since the last
 * save — one save at a time, in order. Private to `client/`.
 *
 * Invariant: the position saved never passes a row the loop has not
 * finished (a row counts as handled only once the loop asks for the next
 * one, or commits it).
 *
 * @module
 */

import type { CursorStore } from "./cursor.ts";

/** How often a {@linkcode CursorSaver} saves, and what runs before each save. */
export interface SaveOptions {
  /** Save after this many rows handled. */
  everyRows: number;
  /** Save this long after a row handled, at the latest. */
  everyMs: number;
  /** Awaited before each save (the caller's own flush). */
  beforeSave?: () => unknown;
}

/**
 * The resume position of one subscription, saved to its cursor.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { MemoryCursor } from "./cursor.ts";
 * import { CursorSaver } from "./_cursor_saver.ts";
 * const cursor = new MemoryCursor();
 * const saver = new CursorSaver(cursor, { everyRows: 2, everyMs: 60_000 }, () => {});
 * const id = "0".repeat(32);
 * await saver.begin(5, id, true);
 * saver.handled(5);
 * equal(saver.due, false);
 * saver.handled(6);
 * equal(saver.due, true); // two rows since the last save
 * await saver.save();
 * deepStrictEqual(cursor.value, { offset: 7, streamId: id });
 * await saver.stop(false);
 * ```
 */
export class CursorSaver {
  /** The stream id saved with the position (the subscription's). */
  streamId: string | null = null;
  readonly #cursor: CursorStore | null;
  readonly #options: SaveOptions;
  readonly #failed: () => void;
  #handled: number | null = null;
  #saved: number | null = null;
  #handledCount = 0;
  #savedCount = 0;
  #chain: Promise<void> = Promise.resolve();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #error: unknown = undefined;
  #stopped = false;

  /**
   * Saves to `cursor` (null: keeps the position only); `failed` is told when
   * a timed save fails (see {@linkcode CursorSaver.takeError}).
   */
  constructor(cursor: CursorStore | null, options: SaveOptions, failed: () => void) {
    this.#cursor = cursor;
    this.#options = options;
    this.#failed = failed;
  }

  /** The first offset not yet handled: what the cursor saves (null on an ephemeral stream). */
  get position(): number | null {
    return this.#handled;
  }

  /** Whether a save is due now (enough rows handled since the last). */
  get due(): boolean {
    return this.#cursor !== null && !this.#stopped &&
      this.#handledCount - this.#savedCount >= this.#options.everyRows;
  }

  /** Takes a timed save's failure (undefined when none is waiting). */
  takeError(): unknown {
    const e = this.#error;
    this.#error = undefined;
    return e;
  }

  /** Whether a timed save failed and its error was not taken yet. */
  get failed(): boolean {
    return this.#error !== undefined;
  }

  /**
   * Starts at `position` of stream `streamId`: saved now when `fresh` (no
   * cursor was loaded), else taken as what the cursor holds.
   */
  async begin(position: number | null, streamId: string | null, fresh: boolean): Promise<void> {
    this.#handled = position;
    this.streamId = streamId;
    if (this.#cursor && fresh) await this.save();
    else this.#saved = position;
  }

  /** The row at `offset` (null: ephemeral) is handled: the loop asked for the next one. */
  handled(offset: number | null): void {
    if (offset !== null && offset + 1 > (this.#handled ?? 0)) this.#handled = offset + 1;
    this.#handledCount++;
    if (this.#cursor && !this.#stopped && !this.due) this.#arm();
  }

  /** The row at `offset` is handled, by a `commit()` (counted when the loop moves on). */
  commit(offset: number): void {
    if (offset + 1 > (this.#handled ?? 0)) this.#handled = offset + 1;
  }

  /** Saves the position now (after the saves before it). */
  save(): Promise<void> {
    const run = async (): Promise<void> => {
      const pos = this.#handled;
      const count = this.#handledCount;
      if (pos === null || !this.#cursor) return;
      if (pos === this.#saved) {
        this.#savedCount = count;
        return;
      }
      if (this.#options.beforeSave) await this.#options.beforeSave();
      await this.#cursor.save({ offset: pos, streamId: this.streamId });
      this.#saved = pos;
      this.#savedCount = count;
    };
    const p = this.#chain.then(run);
    this.#chain = p.catch(() => {});
    return p;
  }

  /** Stops saving on its own: no timer, and no save is due from now on. */
  halt(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /**
   * Halts; with `save`, saves the position if it moved since the last save,
   * else waits for the saves under way.
   */
  async stop(save: boolean): Promise<void> {
    this.halt();
    if (save && this.#cursor && this.#handled !== this.#saved) await this.save();
    else await this.#chain;
  }

  #arm(): void {
    if (this.#timer !== undefined || this.#handled === this.#saved) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.save().catch((err) => {
        this.#error ??= err;
        this.#failed();
      });
    }, this.#options.everyMs);
  }
}
