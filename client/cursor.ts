/**
 * Cursors: where a consumer resumes. A cursor is the NEXT offset to read and
 * the `stream_id` that offset belongs to. {@linkcode connect} loads it at
 * connect (a saved cursor wins over the `offset` option) and saves it as the
 * loop runs; see docs/API.md for when a row counts as handled.
 *
 * This module is portable (web APIs only). The Deno file store is
 * `FileCursor` in `file_cursor.ts`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { MemoryCursor } from "./cursor.ts";
 * const cursor = new MemoryCursor();
 * await cursor.save({ offset: 42, streamId: null });
 * equal((await cursor.load())?.offset, 42);
 * ```
 *
 * @module
 */

/**
 * A resume position.
 */
export interface Cursor {
  /** The next offset to read (the first row not yet handled). */
  offset: number;
  /** The stream id the offset belongs to (`null` when not known). */
  streamId: string | null;
}

/**
 * Where a subscription keeps its cursor. `load` resolves `null` when nothing
 * was saved yet; `save` must be atomic (a crash leaves the old or the new
 * cursor, never a torn one).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { Cursor, CursorStore } from "./cursor.ts";
 * // A store in localStorage, for a browser page.
 * class LocalStorageCursor implements CursorStore {
 *   constructor(readonly key: string) {}
 *   load(): Promise<Cursor | null> {
 *     const v = globalThis.localStorage?.getItem(this.key);
 *     return Promise.resolve(v ? JSON.parse(v) : null);
 *   }
 *   save(c: Cursor): Promise<void> {
 *     globalThis.localStorage?.setItem(this.key, JSON.stringify(c));
 *     return Promise.resolve();
 *   }
 * }
 * equal(await new LocalStorageCursor("trades.example").load(), null); // nothing saved yet
 * ```
 */
export interface CursorStore {
  /** The saved cursor, or `null` when none was saved. */
  load(): Promise<Cursor | null>;
  /** Saves `cursor`, atomically. */
  save(cursor: Cursor): Promise<void>;
}

/**
 * Checks that `value` is a {@linkcode Cursor}; throws a `TypeError` naming
 * `where` otherwise.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { checkCursor } from "./cursor.ts";
 * equal(checkCursor({ offset: 3, streamId: null }, "test").offset, 3);
 * ```
 */
export function checkCursor(value: unknown, where: string): Cursor {
  const v = value as Record<string, unknown> | null;
  if (
    !v || typeof v !== "object" || !Number.isSafeInteger(v.offset) || (v.offset as number) < 0 ||
    !(v.streamId === null || (typeof v.streamId === "string" && /^[0-9a-f]{32}$/.test(v.streamId)))
  ) {
    throw new TypeError(
      `${where}: a cursor must be {offset: integer >= 0, streamId: 32 hex characters or null}, ` +
        `got ${JSON.stringify(value)}`,
    );
  }
  return { offset: v.offset as number, streamId: v.streamId as string | null };
}

/**
 * Checks that `value` is a {@linkcode CursorStore} (an object with `load`
 * and `save` methods); throws a `TypeError` naming `where` and what was seen
 * otherwise.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { checkCursorStore, MemoryCursor } from "./cursor.ts";
 * checkCursorStore(new MemoryCursor(), "cursor");
 * throws(() => checkCursorStore({ offset: 5 }, "cursor"), {
 *   name: "TypeError",
 *   message:
 *     "cursor must be a CursorStore (load and save methods), got an object without load and save",
 * });
 * ```
 */
export function checkCursorStore(value: unknown, where: string): CursorStore {
  const v = value as Partial<CursorStore> | null;
  if (v === null || (typeof v !== "object" && typeof v !== "function")) {
    throw new TypeError(
      `${where} must be a CursorStore (load and save methods), got ${
        v === null ? "null" : typeof v
      }`,
    );
  }
  const missing = (["load", "save"] as const).filter((m) => typeof v[m] !== "function");
  if (missing.length > 0) {
    throw new TypeError(
      `${where} must be a CursorStore (load and save methods), got an object without ` +
        missing.join(" and "),
    );
  }
  return v as CursorStore;
}

/**
 * A cursor kept in memory: for tests, and for a consumer that reconnects
 * within one process (a browser page, say).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { MemoryCursor } from "./cursor.ts";
 * const c = new MemoryCursor({ offset: 10, streamId: null });
 * equal(c.value?.offset, 10);
 * equal(c.saves, 0);
 * ```
 */
export class MemoryCursor implements CursorStore {
  #value: Cursor | null;
  #saves = 0;

  /** A store holding `initial` (nothing by default). */
  constructor(initial: Cursor | null = null) {
    this.#value = initial === null ? null : checkCursor(initial, "MemoryCursor");
  }

  /** The cursor held now. */
  get value(): Cursor | null {
    return this.#value;
  }

  /** How many times `save` was called. */
  get saves(): number {
    return this.#saves;
  }

  /** The cursor held, or `null`. */
  load(): Promise<Cursor | null> {
    return Promise.resolve(this.#value && { ...this.#value });
  }

  /** Replaces the cursor held. */
  save(cursor: Cursor): Promise<void> {
    this.#value = checkCursor(cursor, "MemoryCursor.save");
    this.#saves++;
    return Promise.resolve();
  }
}
