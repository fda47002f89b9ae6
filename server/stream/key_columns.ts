/**
 * A keyed stream's key: the columns that name a row's key (`--key
 * NAME=COL[,COL…]`), checked against the schema, and the key of a stored row
 * read from its JSON text without parsing the rest of it.
 *
 * A row is stored as its schema's encoder writes it (columns in order, no
 * whitespace, values spelled as `JSON.stringify` spells them), so the text of
 * a key column's value is the same for equal values: the key of a row is the
 * texts of its key columns' values joined with `,` (the body of the JSON
 * array of those values), found by scanning the row's top level up to the
 * last key column, skipping the values of the others without building them.
 * A row of the current schema has every column, in order: the scan checks
 * each column's name where it must be (no name is cut out or looked up) and
 * skips its value by the column's type; a row that does not fit that (of
 * an older schema version) is scanned name by name.
 *
 * @module
 */

import type { Column, RowSchema } from "../../schema/row_schema.ts";
import { keyColumnsOf } from "../../schema/key_check.ts";

/**
 * The key columns of a stream, checked; reads the key of a stored row.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { compileSchema } from "../../schema/compile.ts";
 * import { KeyColumns } from "./key_columns.ts";
 * const schema = compileSchema({
 *   type: "object",
 *   properties: { venue: { type: "string" }, symbol: { type: "string" }, px: { type: "number" } },
 *   required: ["venue", "symbol", "px"],
 * });
 * const key = KeyColumns.of(schema, ["symbol", "venue"]);
 * equal(key.keyOf('{"venue":"X","symbol":"BTC","px":1.5}'), '"BTC","X"');
 * equal(key.keyOfValues(["BTC", "X"]), '"BTC","X"');
 * ```
 */
export class KeyColumns {
  /** The key columns' names, in the order given. */
  readonly names: readonly string[];
  readonly #columns: readonly Column[];
  // Each key column's name as JSON text (`"symbol"`), by name, and its place in `names`.
  readonly #quoted: Map<string, number>;
  // The schema's columns up to the last key column, in order: each one's
  // `"name":`, whether its value is a scalar (no nesting to skip), and its
  // place in `names` (-1: not a key column).
  readonly #plan: { prefix: string; scalar: boolean; slot: number }[];

  private constructor(schema: RowSchema, columns: Column[]) {
    this.#columns = columns;
    this.names = Object.freeze(columns.map((c) => c.name));
    this.#quoted = new Map(columns.map((c, i) => [JSON.stringify(c.name), i]));
    const last = Math.max(...columns.map((c) => schema.columns.indexOf(c)));
    this.#plan = schema.columns.slice(0, last + 1).map((c) => ({
      prefix: `${JSON.stringify(c.name)}:`,
      scalar: c.type !== "object" && c.type !== "array",
      slot: columns.indexOf(c),
    }));
  }

  /**
   * The key `names` of `schema`: `RangeError` naming the column unless each
   * is a column of the schema, not nullable, and a string, an integer or a
   * boolean; none twice; at least one.
   */
  static of(schema: RowSchema, names: readonly string[]): KeyColumns {
    const columns = keyColumnsOf(schema, names);
    return new KeyColumns(schema, columns);
  }

  /**
   * The key of a stored row (its JSON text), or null when it lacks a key
   * column (a row of an older schema version) or is not an object.
   */
  keyOf(json: string): string | null {
    const plan = this.#plan;
    if (plan.length === 1 || (plan.length === 2 && this.#columns.length === 1)) {
      // One key column, first or second: no array for the values.
      let i = 1;
      for (let k = 0; k < plan.length; k++) {
        const p = plan[k];
        if (!json.startsWith(p.prefix, i)) return this.#scan(json);
        i += p.prefix.length;
        const to = p.scalar ? skipScalar(json, i) : skipValue(json, i);
        if (p.slot === 0 && plan.length === k + 1) return json.slice(i, to);
        i = to + 1;
      }
    }
    const found: string[] = new Array(this.#columns.length);
    let i = 1;
    for (let k = 0; k < plan.length; k++) {
      const p = plan[k];
      if (!json.startsWith(p.prefix, i)) return this.#scan(json);
      i += p.prefix.length;
      const to = p.scalar ? skipScalar(json, i) : skipValue(json, i);
      if (p.slot >= 0) found[p.slot] = json.slice(i, to);
      i = to + 1;
    }
    return found.length === 1 ? found[0] : found.join(",");
  }

  // The key of a row whose columns are not the schema's in order: name by name.
  #scan(json: string): string | null {
    const want = this.#columns.length;
    const found: string[] = new Array(want);
    let got = 0;
    const n = json.length;
    if (json.charCodeAt(0) !== 0x7b) return null; // {
    let i = 1;
    while (i < n) {
      if (json.charCodeAt(i) === 0x7d) return null; // } before every key column
      const nameEnd = skipString(json, i);
      const slot = this.#quoted.get(json.slice(i, nameEnd));
      const from = nameEnd + 1; // past ':'
      const to = skipValue(json, from);
      if (slot !== undefined && found[slot] === undefined) {
        found[slot] = json.slice(from, to);
        if (++got === want) return want === 1 ? found[0] : found.join(",");
      }
      i = to + 1; // past ',' (or '}')
    }
    return null;
  }

  /**
   * The key of the values given, one per key column in order, as text (a
   * query's `key=`): null when one does not fit its column's type
   * ({@linkcode KeyColumns.problemWith} says which and why). An integer is
   * read as the number its decimal digits spell, so `-0` names the key 0 (a
   * row's `-0` is stored as `0`) and `007` names 7.
   */
  keyOfValues(values: readonly string[]): string | null {
    if (this.problemWith(values) !== null) return null;
    const out: string[] = [];
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      const type = this.#columns[i].type;
      out.push(type === "string" ? JSON.stringify(v) : type === "boolean" ? v : String(Number(v)));
    }
    return out.join(",");
  }

  /**
   * Why `values` (one per key column, in order, as text) name no key of
   * this stream — too many or too few, or which one does not fit its
   * column's type — or null when they fit.
   *
   * @example
   * ```ts
   * import { equal } from "node:assert/strict";
   * import { compileSchema } from "../../schema/compile.ts";
   * import { KeyColumns } from "./key_columns.ts";
   * const schema = compileSchema({
   *   type: "object",
   *   properties: { sym: { type: "string" }, n: { type: "integer" } },
   *   required: ["sym", "n"],
   * });
   * const key = KeyColumns.of(schema, ["sym", "n"]);
   * equal(key.problemWith(["a", "x"]), 'key value 2 of 2 ("x") for column n (integer): not an integer (decimal digits, at most ±9007199254740991)');
   * equal(key.problemWith(["a", "1"]), null);
   * ```
   */
  problemWith(values: readonly string[]): string | null {
    const n = this.#columns.length;
    if (values.length !== n) {
      return `key wants ${n} value(s), one per key column: ${this.describe()}; got ${values.length}`;
    }
    for (let i = 0; i < n; i++) {
      const v = values[i];
      const c = this.#columns[i];
      let why: string | null = null;
      if (c.type === "boolean") {
        if (v !== "true" && v !== "false") why = "not true or false";
      } else if (c.type !== "string") {
        if (!/^-?\d{1,16}$/.test(v) || !Number.isSafeInteger(Number(v))) {
          why = `not an integer (decimal digits, at most ±${Number.MAX_SAFE_INTEGER})`;
        }
      }
      if (why !== null) {
        return `key value ${i + 1} of ${n} (${showValue(v)}) for column ${c.name} (${
          kindOf(c)
        }): ${why}`;
      }
    }
    return null;
  }

  /** What `key=` values a key takes, for a message: `symbol (string), venue (string)`. */
  describe(): string {
    return this.#columns.map((c) => `${c.name} (${kindOf(c)})`).join(", ");
  }
}

// What a key column's `key=` value is, in the schema's words: a string, a
// boolean, or an integer (of any width).
function kindOf(c: Column): string {
  return c.type === "string" || c.type === "boolean" ? c.type : "integer";
}

// A query value for a message: as JSON text, cut to 40 characters.
function showValue(v: string): string {
  const text = JSON.stringify(v);
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

// The index just past the JSON string starting at `i` (its opening quote).
function skipString(s: string, i: number): number {
  i++;
  for (;;) {
    const at = s.indexOf('"', i);
    if (at === -1) return s.length;
    // The quote is escaped when an odd number of backslashes precede it.
    let k = at - 1;
    while (k >= i && s.charCodeAt(k) === 0x5c) k--;
    if ((at - 1 - k) % 2 === 0) return at + 1;
    i = at + 1;
  }
}

// The index just past the scalar JSON value (a string, number, boolean or null) at `i`.
function skipScalar(s: string, i: number): number {
  if (s.charCodeAt(i) === 0x22) return skipString(s, i);
  // A number or a literal holds no comma: it ends at the next one, or at the
  // row's closing brace when it is the last column's.
  const comma = s.indexOf(",", i);
  return comma === -1 ? s.length - 1 : comma;
}

// The index just past the JSON value starting at `i`.
function skipValue(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === 0x22) return skipString(s, i);
  if (c === 0x7b || c === 0x5b) {
    let depth = 0;
    const n = s.length;
    while (i < n) {
      const d = s.charCodeAt(i);
      if (d === 0x22) {
        i = skipString(s, i);
        continue;
      }
      if (d === 0x7b || d === 0x5b) depth++;
      else if (d === 0x7d || d === 0x5d) {
        if (--depth === 0) return i + 1;
      }
      i++;
    }
    return n;
  }
  // A number or a literal: up to the next ',' or '}' of this level.
  const n = s.length;
  while (i < n) {
    const d = s.charCodeAt(i);
    if (d === 0x2c || d === 0x7d) return i;
    i++;
  }
  return n;
}
