/**
 * A bounded, least-recently-used cache of what compiling a `where` filter
 * against a schema gave, so that thousands of subscribers and publishers
 * holding the same row-level grant share one compiled filter instead of
 * generating code each.
 *
 * An entry is keyed by the schema's identity (the frozen object a stream's
 * compiled schema holds; a schema that grows is compiled into a new object,
 * so a stream reopened with it compiles its filters afresh and never gets
 * one compiled against another schema) and the filter's canonical text
 * (object keys sorted, so the same filter written in another key order
 * shares the entry). A schema object that is not frozen may still change,
 * so nothing compiled against one is kept.
 *
 * @module
 */

/** How many compiled filters the cache keeps; the least recently used goes first. */
export const WHERE_CACHE_ENTRIES = 512;

/**
 * The filter's text with every object's keys sorted, or null when it cannot
 * be written as JSON (then it is not cached).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { canonicalWhere } from "./where_cache.ts";
 * equal(canonicalWhere({ b: 1, a: { lt: 2, gt: 0 } }), canonicalWhere({ a: { gt: 0, lt: 2 }, b: 1 }));
 * ```
 */
export function canonicalWhere(where: unknown): string | null {
  try {
    return sortedJson(where, 2);
  } catch {
    // A value JSON cannot write (a cycle, a BigInt, nesting too deep): compile it uncached.
    return null;
  }
}

// JSON text of `v` with the keys of its objects sorted down to `depth` levels
// (a filter's columns, then a condition's operators); deeper values keep their
// order. Valid JSON either way, so two different filters never share a text.
function sortedJson(v: unknown, depth: number): string | null {
  if (depth === 0 || typeof v !== "object" || v === null || Array.isArray(v)) {
    return JSON.stringify(v) ?? null;
  }
  const o = v as Record<string, unknown>;
  const parts: string[] = [];
  for (const k of Object.keys(o).sort()) {
    const text = sortedJson(o[k], depth - 1);
    if (text !== null) parts.push(`${JSON.stringify(k)}:${text}`);
  }
  return `{${parts.join(",")}}`;
}

/**
 * Compiled filters by (schema identity, canonical filter text), at most
 * {@linkcode WHERE_CACHE_ENTRIES} of them.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { WhereCache } from "./where_cache.ts";
 * const cache = new WhereCache<number>(2);
 * const schema = Object.freeze({ type: "object" });
 * let compiles = 0;
 * const make = () => ++compiles;
 * cache.get(schema, { a: 1 }, make);
 * cache.get(schema, { a: 1 }, make);
 * equal(compiles, 1);
 * cache.get(Object.freeze({ type: "object" }), { a: 1 }, make);
 * equal(compiles, 2);
 * ```
 */
export class WhereCache<T> {
  #entries = new Map<string, T>();
  #schemaIds = new WeakMap<object, number>();
  #nextSchemaId = 0;
  #capacity: number;

  /** A cache of at most `capacity` entries. */
  constructor(capacity: number = WHERE_CACHE_ENTRIES) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`WhereCache capacity must be a positive integer, got ${capacity}`);
    }
    this.#capacity = capacity;
  }

  /** How many entries it holds. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * What `compile()` gives for `where` against `schema`: the kept result when
   * one was made for the same filter text and the same schema object, else a
   * fresh one (kept when the schema is frozen).
   */
  get(schema: Record<string, unknown>, where: unknown, compile: () => T): T {
    if (!Object.isFrozen(schema)) return compile();
    const text = canonicalWhere(where);
    if (text === null) return compile();
    let id = this.#schemaIds.get(schema);
    if (id === undefined) {
      id = this.#nextSchemaId++;
      this.#schemaIds.set(schema, id);
    }
    const key = `${id}\n${text}`;
    const hit = this.#entries.get(key);
    if (hit !== undefined) {
      // Moved to the end: a Map iterates in insertion order, so the first is the least recent.
      this.#entries.delete(key);
      this.#entries.set(key, hit);
      return hit;
    }
    const made = compile();
    if (this.#entries.size >= this.#capacity) {
      this.#entries.delete(this.#entries.keys().next().value as string);
    }
    this.#entries.set(key, made);
    return made;
  }
}
