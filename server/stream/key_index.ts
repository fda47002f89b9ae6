/**
 * The latest row per key of a keyed stream: for each key, its latest
 * committed row (the row's JSON text itself, not a place in the log, so
 * that retention dropping the log's rows leaves it whole) and its offset.
 *
 * Invariants:
 * - `end` is the offset after the last row applied: every committed row
 *   below `end` was applied once, in offset order, and none at or above it;
 *   rows given again (below `end`) are skipped, so a row reaching the index
 *   twice changes nothing;
 * - a key's entry is updated in place (one lookup a row); a snapshot puts
 *   the entries in offset order when it is taken, and keeps that order for
 *   the next snapshots until a row is applied (subscribers arriving together
 *   sort once);
 * - past `maxKeys` keys, a row of a new key is not added and the index is
 *   `full` from then on (its snapshot is incomplete, and refused).
 *
 * @module
 */

import type { Filter } from "../../wire/filter.ts";
import type { KeyColumns } from "./key_columns.ts";

/** Default `maxKeys`: keys a keyed stream keeps at most. */
export const DEFAULT_MAX_KEYS = 1_000_000;

/** One key's latest row. */
export interface KeyEntry {
  /** The row's offset. */
  readonly offset: number;
  /** The row's JSON text, as stored. */
  readonly json: string;
}

// An entry of the map, updated in place.
interface Slot {
  offset: number;
  json: string;
}

/** The latest rows of an index below `end`, in offset order. */
export interface KeySnapshot {
  /** The offset after the last row the snapshot holds the state of. */
  end: number;
  /** One `[offset,row]` line per key (that the filter matched), in offset order. */
  lines: string[];
}

/**
 * The latest row per key (see the module doc).
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { compileSchema } from "../../schema/compile.ts";
 * import { KeyColumns } from "./key_columns.ts";
 * import { KeyIndex } from "./key_index.ts";
 * const schema = compileSchema({
 *   type: "object",
 *   properties: { s: { type: "string" }, px: { type: "number" } },
 *   required: ["s", "px"],
 * });
 * const index = new KeyIndex(KeyColumns.of(schema, ["s"]), 10, 1);
 * index.apply(1, ['{"s":"a","px":1}', '{"s":"b","px":2}', '{"s":"a","px":3}']);
 * equal(index.end, 4);
 * deepStrictEqual(index.snapshot(null).lines, ['[2,{"s":"b","px":2}]', '[3,{"s":"a","px":3}]']);
 * ```
 */
export class KeyIndex {
  /** The key columns. */
  readonly columns: KeyColumns;
  /** Keys kept at most. */
  readonly maxKeys: number;
  /** The offset after the last row applied. */
  end: number;
  #map = new Map<string, Slot>();
  #full = false;
  // The entries in offset order as of the last snapshot (null: rows applied since).
  #ordered: KeyEntry[] | null = null;
  #onRefused: (first: boolean) => void;

  /**
   * An empty index of `columns` whose first row is at `end`; `onRefused` is
   * called for each row of a new key refused past `maxKeys` (`first`: the
   * first such row).
   */
  constructor(
    columns: KeyColumns,
    maxKeys: number,
    end: number,
    onRefused: (first: boolean) => void = () => {},
  ) {
    this.columns = columns;
    this.maxKeys = maxKeys;
    this.end = end;
    this.#onRefused = onRefused;
  }

  /** Keys kept. */
  get size(): number {
    return this.#map.size;
  }

  /** Whether a new key was refused (past `maxKeys`): the snapshot is incomplete. */
  get full(): boolean {
    return this.#full;
  }

  /**
   * Applies committed rows at offsets `first`, `first + 1`, …: those below
   * `end` are skipped. Returns false, applying nothing, when `first` is past
   * `end` (rows between were never given: the caller reads them from the log).
   */
  apply(first: number, rows: readonly string[]): boolean {
    if (first > this.end) return false;
    if (first + rows.length > this.end) this.#ordered = null;
    const map = this.#map;
    const columns = this.columns;
    for (let i = this.end - first; i < rows.length; i++) {
      const json = rows[i];
      const key = columns.keyOf(json);
      if (key === null) continue;
      const slot = map.get(key);
      if (slot !== undefined) {
        slot.offset = first + i;
        slot.json = json;
      } else if (map.size < this.maxKeys) map.set(key, { offset: first + i, json });
      else this.#refuse();
    }
    this.end = Math.max(this.end, first + rows.length);
    return true;
  }

  /** The log holds nothing below `offset` that is not applied (a gap, or rows dropped). */
  skipTo(offset: number): void {
    if (offset > this.end) this.end = offset;
  }

  /**
   * The latest row of every key (that `filter` matches; null: every key),
   * in offset order, as of `end`.
   */
  snapshot(filter: Filter | null): KeySnapshot {
    const lines: string[] = [];
    for (const e of this.entries()) {
      if (filter !== null && !filter.test(JSON.parse(e.json))) continue;
      lines.push(`[${e.offset},${e.json}]`);
    }
    return { end: this.end, lines };
  }

  /** The latest row of `key` (as {@linkcode KeyColumns.keyOf} spells it), if any. */
  get(key: string): KeyEntry | undefined {
    const slot = this.#map.get(key);
    return slot === undefined ? undefined : { offset: slot.offset, json: slot.json };
  }

  /** Every entry, in offset order (copies: they do not change as the index does; do not change them). */
  entries(): readonly KeyEntry[] {
    if (this.#ordered !== null) return this.#ordered;
    const out: KeyEntry[] = new Array(this.#map.size);
    let k = 0;
    for (const slot of this.#map.values()) out[k++] = { offset: slot.offset, json: slot.json };
    return this.#ordered = out.sort((a, b) => a.offset - b.offset);
  }

  /**
   * Replaces the index with `entries` (in offset order) as of `end` (a key
   * file read back); entries whose row has no key are dropped.
   */
  load(end: number, entries: readonly KeyEntry[]): void {
    this.#map = new Map();
    this.#full = false;
    this.#ordered = null;
    this.end = end;
    for (const e of entries) {
      const key = this.columns.keyOf(e.json);
      if (key === null) continue;
      const slot = this.#map.get(key);
      if (slot !== undefined) {
        slot.offset = e.offset;
        slot.json = e.json;
      } else if (this.#map.size < this.maxKeys) {
        this.#map.set(key, { offset: e.offset, json: e.json });
      } else this.#refuse();
    }
  }

  #refuse(): void {
    const first = !this.#full;
    this.#full = true;
    this.#onRefused(first);
  }
}
