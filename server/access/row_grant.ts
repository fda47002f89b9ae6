/**
 * A row-level grant's filter on one stream, compiled against the stream's
 * schema, and the check of a publisher's rows against it: a holder whose
 * grant has a `where` for a stream may publish only rows that match it, and
 * one row outside refuses the whole body or frame (nothing stored).
 *
 * Every subscribe, `/latest` request and publish with a grant asks for its
 * filter, so compiled filters are shared through a bounded cache
 * (`where_cache.ts`, keyed by the schema object and the filter's text):
 * thousands of holders of one grant cost one compile. Measured by
 * bench/micro/row_grant.ts (docs/PERFORMANCE.md, "Row-level grants: the
 * compiled filter, shared").
 *
 * @module
 */

import { compileFilter, type Filter, FilterError } from "../../wire/filter.ts";
import type { Grant } from "../auth.ts";
import { WhereCache } from "./where_cache.ts";

/** What compiling a grant's filter for a stream gave. */
export type RowGrant =
  | { ok: true; filter: Filter | null }
  | { ok: false; detail: string };

const compiled = new WhereCache<RowGrant>();

function compileGrant(where: unknown, schema: Record<string, unknown>): RowGrant {
  try {
    return Object.freeze({ ok: true, filter: compileFilter(where, schema) });
  } catch (err) {
    if (!(err instanceof FilterError)) throw err;
    return Object.freeze({ ok: false, detail: `row-level grant: ${err.detail}` });
  }
}

/**
 * The filter `grant` puts on the rows of stream `name` (schema `schema`),
 * null for none (no grant, or one without a `where` for it); or why it does
 * not fit the stream (its holder may then use none of it). The same filter
 * against the same (frozen) schema object gives the same shared result.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { rowGrant } from "./row_grant.ts";
 * import { claimGrant } from "./claim_grant.ts";
 * const schema = { type: "object", properties: { s: { type: "string" } } };
 * const g = claimGrant({ sub: "a", exp: 2e9, streamcast: { where: { t: { s: "x" } } } });
 * const r = rowGrant(g, "t", schema);
 * equal(r.ok && r.filter?.test({ s: "x" }), true);
 * equal(rowGrant(g, "other", schema).ok, true);
 * const bad = rowGrant(claimGrant({ sub: "a", exp: 2e9, streamcast: { where: { t: { q: 1 } } } }), "t", schema);
 * equal(!bad.ok && bad.detail, "row-level grant: where: unknown column q");
 * ```
 */
export function rowGrant(
  grant: Grant | null,
  name: string,
  schema: Record<string, unknown>,
): RowGrant {
  const where = grant?.whereFor(name) ?? null;
  if (where === null) return { ok: true, filter: null };
  return compiled.get(schema, where, () => compileGrant(where, schema));
}

/**
 * The 0-based index of the first of `rows` that `filter` does not match, or
 * -1 when every one does. A row that is not an object matches nothing.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { compileFilter } from "../../wire/filter.ts";
 * import { firstOutside } from "./row_grant.ts";
 * const f = compileFilter({ s: "x" }, { type: "object", properties: { s: { type: "string" } } });
 * equal(firstOutside(f, [{ s: "x" }, { s: "y" }]), 1);
 * equal(firstOutside(f, [{ s: "x" }]), -1);
 * ```
 */
export function firstOutside(filter: Filter, rows: readonly unknown[]): number {
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    if (typeof row !== "object" || row === null || Array.isArray(row)) return i;
    if (!filter.test(row as Record<string, unknown>)) return i;
  }
  return -1;
}

/** The `detail` of a refusal of a row outside the publisher's grant. */
export const OUTSIDE_GRANT_DETAIL = "row-level grant: the row does not match the grant's where";
