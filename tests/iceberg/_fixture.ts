// A log with chunks and a schema history, fed in commits at chosen times,
// and the rows it was given, for the table writer's tests.
import { Log } from "../../log/mod.ts";
import { type SchemaVersion, writeSchemaHistory } from "../../log/schema_history.ts";
import { rmrf } from "../harness/util.ts";

export const SCHEMA = {
  type: "object",
  properties: {
    symbol: { type: "string" },
    price: { type: "number" },
    qty: { type: "number", format: "float" },
    side: { type: "integer", format: "int32" },
    trade_id: { type: "integer" },
    venue: { type: ["string", "null"] },
    taker: { type: "boolean" },
    fill: {
      type: "object",
      properties: { px: { type: "number" }, n: { type: "integer" } },
      required: ["px", "n"],
      additionalProperties: false,
    },
    levels: { type: "array", items: { type: "array", items: { type: "number" } } },
    meta: { type: ["object", "null"] },
  },
  required: [
    "symbol",
    "price",
    "qty",
    "side",
    "trade_id",
    "venue",
    "taker",
    "fill",
    "levels",
    "meta",
  ],
} as const;

/** Row `i` of the fixture's feed (every column type, nulls and nested values). */
export function row(i: number): Record<string, unknown> {
  return {
    symbol: ["BTC-USD", "ETH-USD", "SOL-USD"][i % 3],
    price: 100 + i / 8,
    qty: 0.5 + (i % 7),
    side: i % 2 === 0 ? 1 : -1,
    trade_id: 9_000_000_000_000 + i,
    venue: i % 5 === 0 ? null : `v${i % 4}`,
    taker: i % 3 === 0,
    fill: { px: i * 1.25, n: i },
    levels: [[i, 1], [i + 0.5, 2]],
    meta: i % 4 === 0 ? null : { tag: `t${i}`, list: [i] },
  };
}

/** Its log closed and its folder removed when disposed (`await using`). */
export interface FedLog extends AsyncDisposable {
  dir: string;
  log: Log;
  /** The rows given, by offset (JSON as stored), with their append times (µs). */
  rows: Map<number, { json: string; timeUs: number }>;
  /** Appends `n` rows as one commit at `ms` and seals them into a chunk. */
  feed(n: number, ms: number, make?: (i: number) => Record<string, unknown>): Promise<void>;
}

/**
 * A log (chunks on, timers off) in a temp dir with `versions` as its schema
 * history; `await using` it, so that the folder is removed.
 */
export async function fedLog(
  versions: SchemaVersion[] = [{ from: 1, schema: SCHEMA as unknown as Record<string, unknown> }],
): Promise<FedLog> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-iceberg-" });
  let now = Date.UTC(2026, 0, 1);
  const log = await Log.open(dir, {
    name: "trades",
    chunks: true,
    timers: false,
    clock: () => now,
  });
  await writeSchemaHistory(dir, versions);
  const rows = new Map<number, { json: string; timeUs: number }>();
  let next = 0;
  return {
    dir,
    log,
    rows,
    async feed(n, ms, make = row) {
      now = ms;
      const jsons = Array.from({ length: n }, () => JSON.stringify(make(next++)));
      const first = await log.appendMany(jsons);
      jsons.forEach((json, k) => rows.set(first + k, { json, timeUs: ms * 1000 }));
      await log.roll();
      await log.chunks.settled();
    },
    async [Symbol.asyncDispose]() {
      await log.close().catch(() => {});
      await rmrf(dir);
    },
  };
}
