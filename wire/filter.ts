/**
 * Row filters (`where=`): the one implementation the server uses on replay and
 * live rows and the client uses on rows it reads from chunks. Pure and
 * browser-safe.
 *
 * A filter is a JSON object whose keys are column names and whose values are
 * conditions, all of which must hold:
 *
 * | condition | meaning | columns |
 * |---|---|---|
 * | a scalar: `"BTC-USD"`, `5`, `true`, `null` | equal (`null` matches a null) | any flat column |
 * | an array of 1–1024 scalars | one of them | any flat column |
 * | `{"gt"|"gte"|"lt"|"lte": n, …}` | in the range | integer, number |
 * | `{"prefix": "BTC-"}` | starts with | string |
 *
 * A nullable column missing from a row (one stored before the column was
 * added, schema evolution) reads as null, so `null` matches it.
 *
 * A filter holds at most {@linkcode MAX_FILTER_VALUES} values in all. It is
 * compiled once into a generated predicate (like the row encoder); filters
 * with the same meaning have the same {@linkcode Filter.key}, so a server can
 * evaluate each distinct filter once per row and share the result.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { compileFilter } from "./filter.ts";
 * const schema = {
 *   type: "object",
 *   properties: { symbol: { type: "string" }, size: { type: "number" } },
 *   required: ["symbol", "size"],
 * };
 * const f = compileFilter('{"symbol":["BTC-USD","ETH-USD"],"size":{"gte":1}}', schema);
 * ok(f.test({ symbol: "BTC-USD", size: 2 }));
 * equal(f.test({ symbol: "BTC-USD", size: 0.5 }), false);
 * ```
 *
 * @module
 */

/** A value a condition compares with. */
export type FilterScalar = string | number | boolean | null;

/** Range and prefix operators of a condition object. */
export interface FilterRange {
  /** Greater than. */
  gt?: number;
  /** Greater than or equal. */
  gte?: number;
  /** Less than. */
  lt?: number;
  /** Less than or equal. */
  lte?: number;
  /** Starts with (string columns). */
  prefix?: string;
}

/** One column's condition. */
export type FilterCondition = FilterScalar | FilterScalar[] | FilterRange;

/** A parsed filter: column name → condition. */
export type Where = Record<string, FilterCondition>;

/** Most values (scalars, array members, operator operands) one filter may hold. */
export const MAX_FILTER_VALUES = 1024;

/**
 * A filter that does not fit the stream's columns, or is not a filter at all.
 * `detail` is what the server puts in its 4400 refusal (`where: …`).
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { compileFilter, FilterError } from "./filter.ts";
 * const schema = { type: "object", properties: { symbol: { type: "string" } } };
 * throws(() => compileFilter('{"sym":"x"}', schema), (err) => {
 *   return err instanceof FilterError && err.detail === "where: unknown column sym";
 * });
 * ```
 */
export class FilterError extends Error {
  /** The refusal's detail, starting with `where: `. */
  readonly detail: string;
  /** Makes the error from its detail's text (without the `where: ` prefix). */
  constructor(problem: string) {
    super(`where: ${problem}`);
    this.name = "FilterError";
    this.detail = `where: ${problem}`;
  }
}

/** A compiled filter. */
export interface Filter {
  /** The filter as parsed (what the greeting echoes). */
  readonly where: Where;
  /** The same for filters with the same meaning (key order and value order aside). */
  readonly key: string;
  /** Whether a row (the parsed JSON object) matches. */
  test(row: Record<string, unknown>): boolean;
}

type Kind = "boolean" | "integer" | "number" | "string" | "nested";

interface ColumnKind {
  kind: Kind;
  nullable: boolean;
}

const RANGE_OPS = ["gt", "gte", "lt", "lte"] as const;
const OPERATORS: readonly string[] = [...RANGE_OPS, "prefix"];
const OP_CODE: Record<(typeof RANGE_OPS)[number], string> = {
  gt: ">",
  gte: ">=",
  lt: "<",
  lte: "<=",
};

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function show(v: unknown): string {
  let text: string;
  try {
    text = typeof v === "number" ? String(v) : JSON.stringify(v) ?? String(v);
  } catch {
    text = String(v);
  }
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

function showName(name: string): string {
  return name.length > 40 ? `${name.slice(0, 37)}...` : name;
}

/** The flat kind of each column of a JSON Schema (what the greeting carries). */
function columnKinds(schema: Record<string, unknown>): Map<string, ColumnKind> {
  const out = new Map<string, ColumnKind>();
  const props = isObject(schema.properties) ? schema.properties : {};
  for (const [name, def] of Object.entries(props)) {
    const types = isObject(def) ? (Array.isArray(def.type) ? def.type : [def.type]) : [];
    const nullable = types.includes("null");
    const base = types.find((t) => t !== "null");
    const kind: Kind = base === "boolean" || base === "integer" || base === "number" ||
        base === "string"
      ? base
      : "nested";
    out.set(name, { kind, nullable });
  }
  return out;
}

function fitsScalar(col: ColumnKind, v: unknown): boolean {
  if (v === null) return col.nullable;
  switch (col.kind) {
    case "boolean":
      return typeof v === "boolean";
    case "integer":
      return Number.isSafeInteger(v);
    case "number":
      return typeof v === "number" && Number.isFinite(v);
    case "string":
      return typeof v === "string";
    default:
      return false;
  }
}

function expected(col: ColumnKind): string {
  const base = col.kind === "integer"
    ? "an integer within ±2^53"
    : col.kind === "number"
    ? "a finite number"
    : `a ${col.kind}`;
  return col.nullable ? `${base} or null` : base;
}

/** Checks one condition and returns the JavaScript expression testing it on `v`. */
function conditionCode(
  name: string,
  col: ColumnKind,
  cond: unknown,
  sets: Set<FilterScalar>[],
  count: { values: number },
): string {
  const at = showName(name);
  if (Array.isArray(cond)) {
    if (cond.length === 0) throw new FilterError(`column ${at}: an empty list matches nothing`);
    count.values += cond.length;
    if (cond.length > MAX_FILTER_VALUES || count.values > MAX_FILTER_VALUES) {
      throw new FilterError(`more than ${MAX_FILTER_VALUES} values in all`);
    }
    for (const v of cond) {
      if (!fitsScalar(col, v)) {
        throw new FilterError(`column ${at}: ${show(v)} is not ${expected(col)}`);
      }
    }
    sets.push(new Set(cond as FilterScalar[]));
    return `s[${sets.length - 1}].has(v)`;
  }
  if (isObject(cond)) {
    const ops = Object.keys(cond);
    if (ops.length === 0) throw new FilterError(`column ${at}: an empty condition object`);
    const parts: string[] = [];
    for (const op of ops) {
      if (!OPERATORS.includes(op)) {
        throw new FilterError(
          `column ${at}: unknown operator ${showName(op)} (gt, gte, lt, lte or prefix)`,
        );
      }
      count.values += 1;
      const operand = cond[op];
      if (op === "prefix") {
        if (col.kind !== "string") {
          throw new FilterError(`column ${at}: prefix applies to string columns, not ${col.kind}`);
        }
        if (typeof operand !== "string") {
          throw new FilterError(`column ${at}: prefix takes a string, got ${show(operand)}`);
        }
        parts.push(`typeof v === "string" && v.startsWith(${JSON.stringify(operand)})`);
      } else {
        if (col.kind !== "integer" && col.kind !== "number") {
          throw new FilterError(`column ${at}: ${op} applies to number columns, not ${col.kind}`);
        }
        if (typeof operand !== "number" || !Number.isFinite(operand)) {
          throw new FilterError(`column ${at}: ${op} takes a finite number, got ${show(operand)}`);
        }
        const code = OP_CODE[op as (typeof RANGE_OPS)[number]];
        parts.push(`typeof v === "number" && v ${code} ${numberLiteral(operand)}`);
      }
    }
    if (count.values > MAX_FILTER_VALUES) {
      throw new FilterError(`more than ${MAX_FILTER_VALUES} values in all`);
    }
    return parts.map((p) => `(${p})`).join(" && ");
  }
  count.values += 1;
  if (count.values > MAX_FILTER_VALUES) {
    throw new FilterError(`more than ${MAX_FILTER_VALUES} values in all`);
  }
  if (!fitsScalar(col, cond)) {
    throw new FilterError(`column ${at}: ${show(cond)} is not ${expected(col)}`);
  }
  return cond === null
    ? "v === null"
    : `v === ${typeof cond === "number" ? numberLiteral(cond) : JSON.stringify(cond)}`;
}

function numberLiteral(n: number): string {
  return Object.is(n, -0) ? "0" : String(n);
}

/** A canonical text of a condition: operator keys sorted, list members sorted and unique. */
function canonical(cond: FilterCondition): unknown {
  if (Array.isArray(cond)) {
    return [...new Set(cond.map((v) => JSON.stringify(v)))].sort().map((t) => JSON.parse(t));
  }
  if (isObject(cond)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(cond).sort()) out[k] = (cond as Record<string, unknown>)[k];
    return out;
  }
  return cond;
}

/**
 * Parses a filter (the `where` query's text, or an object) and compiles it
 * against the stream's JSON Schema. Throws {@linkcode FilterError} naming the
 * column and the problem when it does not fit.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { compileFilter } from "./filter.ts";
 * const schema = { type: "object", properties: { symbol: { type: "string" } } };
 * const f = compileFilter({ symbol: { prefix: "BTC-" } }, schema);
 * equal(f.key, '{"symbol":{"prefix":"BTC-"}}');
 * ok(f.test({ symbol: "BTC-USD" }));
 * ```
 */
export function compileFilter(where: unknown, schema: Record<string, unknown>): Filter {
  let parsed = where;
  if (typeof where === "string") {
    try {
      parsed = JSON.parse(where);
    } catch {
      throw new FilterError("not JSON");
    }
  }
  if (!isObject(parsed)) throw new FilterError(`must be a JSON object, got ${show(parsed)}`);
  const names = Object.keys(parsed);
  if (names.length === 0) throw new FilterError("an empty filter (leave where out for every row)");
  const columns = columnKinds(schema);
  const sets: Set<FilterScalar>[] = [];
  const count = { values: 0 };
  const tests: string[] = [];
  const key: Record<string, unknown> = {};
  for (const name of names) {
    const col = columns.get(name);
    if (!col) throw new FilterError(`unknown column ${showName(name)}`);
    if (col.kind === "nested") {
      throw new FilterError(
        `column ${showName(name)} is nested (objects and arrays are not filtered)`,
      );
    }
    const code = conditionCode(name, col, parsed[name], sets, count);
    // A row stored before a nullable column was added lacks its key and reads
    // as null in it (as export and Arrow read it); other columns are never missing.
    const read = `r[${JSON.stringify(name)}]${col.nullable ? " ?? null" : ""}`;
    tests.push(`v = ${read};\n  if (!(${code})) return false;`);
  }
  for (const name of [...names].sort()) key[name] = canonical(parsed[name] as FilterCondition);
  const body = `"use strict";\nreturn (r) => {\n  let v;\n  ${
    tests.join("\n  ")
  }\n  return true;\n};`;
  const make = new Function("s", body) as (
    s: Set<FilterScalar>[],
  ) => (row: Record<string, unknown>) => boolean;
  const test = make(sets);
  return Object.freeze({ where: parsed as Where, key: JSON.stringify(key), test });
}

/**
 * The filter that holds where both `grant` and `own` hold: a row-level
 * grant's filter ANDed with the subscriber's own `where=`. Its
 * {@linkcode Filter.key} is the same for the same pair, so subscribers with
 * the same grant and the same `where=` share one evaluation per row; its
 * `where` is `own`'s (what the greeting echoes: what the subscriber asked).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { bothFilters, compileFilter } from "./filter.ts";
 * const schema = { type: "object", properties: { s: { type: "string" }, n: { type: "number" } } };
 * const f = bothFilters(compileFilter({ s: "a" }, schema), compileFilter({ n: { gt: 1 } }, schema));
 * equal(f.test({ s: "a", n: 2 }), true);
 * equal(f.test({ s: "b", n: 2 }), false);
 * equal(f.test({ s: "a", n: 1 }), false);
 * equal(f.key, '[{"s":"a"},{"n":{"gt":1}}]');
 * ```
 */
export function bothFilters(grant: Filter, own: Filter): Filter {
  const a = grant.test;
  const b = own.test;
  return Object.freeze({
    where: own.where,
    // An array: never the key of a single filter, which is an object.
    key: `[${grant.key},${own.key}]`,
    test: (row: Record<string, unknown>) => a(row) && b(row),
  });
}
