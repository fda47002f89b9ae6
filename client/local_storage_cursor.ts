/**
 * A cursor kept in a browser's `localStorage` (or any `Storage`): the
 * browser's counterpart of the Deno `FileCursor`. Web APIs only.
 *
 * The item holds the same JSON as a cursor file,
 * `{"offset":N,"stream_id":"…","saved_at":"…"}`; one `setItem` replaces it
 * whole, so a save is atomic.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { LocalStorageCursor } from "./local_storage_cursor.ts";
 * const items = new Map<string, string>();
 * const storage = {
 *   getItem: (k: string) => items.get(k) ?? null,
 *   setItem: (k: string, v: string) => void items.set(k, v),
 * };
 * const cursor = new LocalStorageCursor("trades.cursor", { storage });
 * await cursor.save({ offset: 1862, streamId: null });
 * equal((await cursor.load())?.offset, 1862);
 * ```
 *
 * @module
 */

import { checkCursor, type Cursor, type CursorStore } from "./cursor.ts";

/**
 * The part of the Web Storage API a {@linkcode LocalStorageCursor} uses.
 */
export interface CursorStorage {
  /** The item's value, or `null`. */
  getItem(key: string): string | null;
  /** Replaces the item's value. */
  setItem(key: string, value: string): void;
}

/**
 * Options of {@linkcode LocalStorageCursor}.
 */
export interface LocalStorageCursorOptions {
  /** Where the item is kept (`sessionStorage`, say). @default globalThis.localStorage */
  storage?: CursorStorage;
}

/**
 * A {@linkcode CursorStore} in one item of `localStorage`: pass it as the
 * `cursor` option of `connect` in a browser.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { connect, LocalStorageCursor } from "./mod.ts";
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("trades", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * await stream.sendMany([{ v: 1 }, { v: 2 }]);
 * const items = new Map<string, string>(); // in a browser, leave `storage` out: localStorage
 * const storage = { getItem: (k: string) => items.get(k) ?? null, setItem: items.set.bind(items) };
 * const cursor = new LocalStorageCursor("trades.cursor", { storage });
 * const sub = await connect(`${server.url}/trades`, {
 *   offset: "earliest", // used only while nothing is saved
 *   cursor,
 * });
 * for await (const [offset] of sub) if (offset === 2) break; // row 1 handled, row 2 not yet
 * equal((await cursor.load())?.offset, 2);
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export class LocalStorageCursor implements CursorStore {
  /** The item's key. */
  readonly key: string;
  readonly #storage: CursorStorage | undefined;

  /** A store in the item `key` (it need not exist yet). */
  constructor(key: string, options: LocalStorageCursorOptions = {}) {
    if (typeof key !== "string" || key === "") {
      throw new TypeError(`LocalStorageCursor needs an item key, got ${JSON.stringify(key)}`);
    }
    const s = options.storage;
    if (
      s !== undefined &&
      (s === null || typeof s.getItem !== "function" || typeof s.setItem !== "function")
    ) {
      throw new TypeError("LocalStorageCursor storage must have getItem and setItem");
    }
    this.key = key;
    this.#storage = s;
  }

  #items(): CursorStorage {
    const s = this.#storage ?? (globalThis as { localStorage?: CursorStorage }).localStorage;
    if (!s) {
      throw new TypeError(
        `LocalStorageCursor ${
          JSON.stringify(this.key)
        }: no localStorage here; pass the storage option`,
      );
    }
    return s;
  }

  /** The saved cursor, or `null` when the item does not exist. */
  load(): Promise<Cursor | null> {
    try {
      const text = this.#items().getItem(this.key);
      if (text === null) return Promise.resolve(null);
      let v: Record<string, unknown>;
      try {
        v = JSON.parse(text);
      } catch {
        throw new TypeError(
          `cursor item ${JSON.stringify(this.key)} is not JSON: ` +
            `${JSON.stringify(text.slice(0, 80))}; fix or remove it`,
        );
      }
      return Promise.resolve(checkCursor(
        { offset: v?.offset, streamId: v?.stream_id ?? null },
        `cursor item ${JSON.stringify(this.key)}`,
      ));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Saves `cursor` (one `setItem`: atomic). */
  save(cursor: Cursor): Promise<void> {
    try {
      const c = checkCursor(cursor, `LocalStorageCursor.save(${JSON.stringify(this.key)})`);
      const line = JSON.stringify({
        offset: c.offset,
        stream_id: c.streamId,
        saved_at: new Date().toISOString(),
      });
      this.#items().setItem(this.key, line);
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err);
    }
  }
}
