/**
 * A row-level grant's filter per subscribe, `/latest` request or publish
 * (server/access/row_grant.ts, `rowGrant`), as a report section: the shared
 * compiled filter against compiling it afresh on every call (what each call
 * cost before compiled filters were cached), in the same run. Every call
 * gets its own grant object, as every holder's token is parsed on its own;
 * the misses case cycles through more distinct filters than the cache holds,
 * so every call compiles and pays the cache's bookkeeping on top.
 *
 * Run alone: deno run -A bench/micro/row_grant.ts [--quick]
 */
import { compileFilter } from "../../wire/filter.ts";
import { compileSchema } from "../../schema/compile.ts";
import { claimGrant } from "../../server/access/claim_grant.ts";
import { rowGrant } from "../../server/access/row_grant.ts";
import { WHERE_CACHE_ENTRIES } from "../../server/access/where_cache.ts";
import type { Grant } from "../../server/auth.ts";
import { type BenchRow, type BenchSection, renderSection } from "../harness/report.ts";
import { SCHEMA } from "../../tests/harness/trades.ts";

const WHERE = { symbol: ["BTC-USD", "ETH-USD"], price: { gt: 100 } };

function grantsFor(wheres: Record<string, unknown>[]): Grant[] {
  return wheres.map((where, i) =>
    claimGrant({ sub: `h${i}`, exp: 2e9, streamcast: { read: ["t"], where: { t: where } } })
  );
}

function bestNsPerCall(call: (i: number) => unknown, n: number, rounds: number): number {
  let best = Infinity;
  let sink = 0;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) if (call(i) !== null) sink++;
    best = Math.min(best, ((performance.now() - t0) * 1e6) / n);
  }
  if (sink === -1) console.log(sink);
  return best;
}

/** Runs the benchmark and returns its section. */
export function run(quick = false): Promise<BenchSection> {
  const schema = compileSchema(SCHEMA).json;
  const n = quick ? 2_000 : 20_000;
  const rounds = quick ? 3 : 7;
  const same = grantsFor(Array.from({ length: 1024 }, () => structuredClone(WHERE)));
  const distinct = grantsFor(
    Array.from({ length: WHERE_CACHE_ENTRIES * 2 }, (_, i) => ({ ...WHERE, amount: { gte: i } })),
  );
  const fresh = (g: Grant) => compileFilter(g.whereFor("t"), schema);
  const rows: BenchRow[] = [];
  const pair = (name: string, grants: Grant[], note?: string) => {
    const m = grants.length;
    const base = bestNsPerCall((i) => fresh(grants[i % m]), n, rounds);
    const ours = bestNsPerCall((i) => rowGrant(grants[i % m], "t", schema), n, rounds);
    rows.push({
      case: name,
      ours,
      baseline: base,
      unit: "ns",
      ratio: ours / base,
      target: "",
      met: null,
      ...(note ? { note } : {}),
    });
  };
  pair("the same grant, each holder's own token", same);
  pair(
    `${distinct.length} distinct grants in turn (every call a miss)`,
    distinct,
    `${WHERE_CACHE_ENTRIES} entries kept, least recently used first out.`,
  );
  return Promise.resolve({
    title: "Row-level grants: the compiled filter, shared (server/access/row_grant.ts)",
    baseline: "compiling the grant's filter afresh on every call, in the same run.",
    rows,
    notes: [
      `Per call of rowGrant with a two-column grant (membership and a range) on the trade schema: best of ${rounds} timed loops of ${n} calls. A hit costs the filter's canonical text and a map look-up; a miss adds that to the compile.`,
    ],
  });
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
