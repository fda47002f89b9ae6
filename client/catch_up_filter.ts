/**
 * `where=` on catch-up: the rows a subscription reads from chunks over HTTP
 * are filtered by the same predicate the server applies to replay and live
 * rows (`wire/filter.ts`), compiled against the stream's schema as the
 * head serves it, so a filtered client that catches up from chunks sees
 * exactly what the server would have sent.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { catchUpFilter } from "./catch_up_filter.ts";
 * const schema = { type: "object", properties: { a: { type: "integer" } } };
 * const f = catchUpFilter({ a: 2 }, schema, "ws://127.0.0.1:8765/t");
 * deepStrictEqual(f.where, { a: 2 });
 * deepStrictEqual(f.pick(['[1,{"a":1}]', '[2,{"a":2}]']), ['[2,{"a":2}]']);
 * ```
 *
 * @module
 */

import { ProtocolError } from "./errors.ts";
import { compileFilter, type Filter, FilterError, type Where } from "../wire/filter.ts";

/** A catch-up's filter: what the greeting echoes, and the lines it keeps. */
export interface CatchUpFilter {
  /** The filter as parsed, or `null` without one. */
  readonly where: Where | null;
  /** The `[offset,msg]` lines whose rows match (all of them without a filter). */
  pick(lines: string[]): string[];
}

/**
 * The `[offset,msg]` lines whose rows `filter` matches, in order; each line
 * is parsed once.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { filterLines } from "./catch_up_filter.ts";
 * import { compileFilter } from "../wire/filter.ts";
 * const f = compileFilter({ a: 2 }, { type: "object", properties: { a: { type: "integer" } } });
 * deepStrictEqual(filterLines(['[1,{"a":1}]', '[2,{"a":2}]'], f), ['[2,{"a":2}]']);
 * ```
 */
export function filterLines(lines: readonly string[], filter: Filter): string[] {
  const test = filter.test;
  const out: string[] = [];
  for (const line of lines) {
    if (test((JSON.parse(line) as [number, Record<string, unknown>])[1])) out.push(line);
  }
  return out;
}

const NO_FILTER: CatchUpFilter = Object.freeze({ where: null, pick: (lines: string[]) => lines });

/**
 * Compiles a subscription's `where` option (an object, its JSON text, or
 * `undefined`) against the stream's JSON Schema. A filter that does not fit
 * is a {@linkcode ProtocolError} with the detail the server would refuse it
 * with (`where: …`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { catchUpFilter } from "./catch_up_filter.ts";
 * equal(catchUpFilter(undefined, {}, "ws://127.0.0.1:8765/t").where, null);
 * ```
 */
export function catchUpFilter(
  where: Where | string | undefined,
  schema: Record<string, unknown>,
  url: string,
): CatchUpFilter {
  if (where === undefined) return NO_FILTER;
  let filter: Filter;
  try {
    filter = compileFilter(where, schema);
  } catch (err) {
    if (err instanceof FilterError) throw new ProtocolError(err.detail, url);
    throw err;
  }
  return { where: filter.where, pick: (lines) => filterLines(lines, filter) };
}
