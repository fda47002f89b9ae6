/**
 * The cost of keeping a keyed stream's index on ingest (server/stream/
 * key_index.ts), as a report section:
 *
 * - CPU per row of a stream's whole ingest path (`sendJson` of 1,000-row
 *   commits, fsync off so the disk does not hide the CPU), keyed against the
 *   same stream unkeyed, in the same run, runs interleaved, median of rounds;
 *   with 4 keys (the symbol) and with 100,000 keys (a trade id that repeats
 *   every 100,000 rows).
 * - The index update alone (the key scanned from the row's text, the map
 *   updated), per row, against `JSON.parse` of the same row (what reading
 *   the key by parsing would cost at least).
 *
 * Run alone: deno run -A bench/micro/key_index.ts [--quick]
 */
import process from "node:process";
import { Stream } from "../../server/stream/stream.ts";
import { compileSchema } from "../../schema/compile.ts";
import { KeyColumns } from "../../server/stream/key_columns.ts";
import { KeyIndex } from "../../server/stream/key_index.ts";
import { type BenchRow, type BenchSection, median, renderSection } from "../harness/report.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";

const COMMIT_ROWS = 1000;

/** Trade rows as stored (the schema's encoding), `trade_id` repeating every `ids` rows. */
function texts(n: number, ids: number): string[] {
  const make = tradeRows(11);
  const schema = compileSchema(SCHEMA);
  return Array.from({ length: n }, (_, i) => {
    const row = make(i);
    row.trade_id = 100_000_000 + (i % ids);
    return schema.encode(row);
  });
}

function cpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

/** CPU ns per row of ingesting `rows` into a fresh stream (keyed by `key`, or not). */
async function ingestNsPerRow(rows: string[], key: string[] | null): Promise<number> {
  const root = await Deno.makeTempDir({ prefix: "streamcast-bench-key-" });
  try {
    const stream = await Stream.open("t", {
      schema: SCHEMA,
      root,
      ...(key ? { key } : {}),
      logOptions: { fsync: false, chunks: false, timers: false },
    });
    const t0 = cpuMicros();
    for (let i = 0; i < rows.length; i += COMMIT_ROWS) {
      const { durable } = stream.sendJson(rows.slice(i, i + COMMIT_ROWS));
      await durable;
    }
    const ns = ((cpuMicros() - t0) * 1000) / rows.length;
    await stream.close();
    return ns;
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

function bestNsPerRow(fn: () => void, n: number, rounds: number): number {
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    fn();
    best = Math.min(best, ((performance.now() - t0) * 1e6) / n);
  }
  return best;
}

/** Runs the benchmark and returns its section. */
export async function run(quick = false): Promise<BenchSection> {
  const n = quick ? 100_000 : 400_000;
  const rounds = quick ? 3 : 7;
  const cases = [
    { name: "4 keys (symbol)", key: ["symbol"], ids: n },
    { name: "100,000 keys (trade_id)", key: ["trade_id"], ids: 100_000 },
  ];
  const rows: BenchRow[] = [];
  for (const c of cases) {
    const data = texts(n, c.ids);
    const keyed: number[] = [];
    const plain: number[] = [];
    await ingestNsPerRow(data.slice(0, 20_000), c.key); // warm-up
    for (let r = 0; r < rounds; r++) {
      plain.push(await ingestNsPerRow(data, null));
      keyed.push(await ingestNsPerRow(data, c.key));
    }
    const ours = median(keyed);
    const base = median(plain);
    rows.push({
      case: `ingest CPU per row, keyed by ${c.name}`,
      ours,
      baseline: base,
      unit: "ns",
      ratio: ours / base,
      target: "",
      met: null,
    });
  }
  for (const c of cases) {
    const data = texts(n, c.ids);
    const schema = compileSchema(SCHEMA);
    const columns = KeyColumns.of(schema, c.key);
    const index = () => new KeyIndex(columns, 1_000_000, 1);
    const apply = bestNsPerRow(
      () => {
        const ix = index();
        for (let i = 0; i < n; i += COMMIT_ROWS) ix.apply(i + 1, data.slice(i, i + COMMIT_ROWS));
      },
      n,
      rounds,
    );
    let sink = 0;
    const parse = bestNsPerRow(
      () => {
        for (let i = 0; i < n; i++) sink += (JSON.parse(data[i]) as { side: number }).side;
      },
      n,
      rounds,
    );
    if (sink === -1) console.log(sink);
    rows.push({
      case: `index update alone per row, ${c.name}`,
      ours: apply,
      baseline: parse,
      unit: "ns",
      ratio: apply / parse,
      target: "",
      met: null,
    });
  }
  return {
    title: "Keyed streams: the cost of keeping the index on ingest (server/stream/key_index.ts)",
    baseline: "the same stream unkeyed, same rows, same run (ingest rows); JSON.parse of " +
      "the same row (index update rows).",
    rows,
    notes: [
      `Ingest rows: CPU (user + system) of the process per row, ${n.toLocaleString("en")} ` +
      `trade rows in ${COMMIT_ROWS}-row commits through \`Stream.sendJson\` with fsync off, ` +
      `median of ${rounds} rounds, keyed and unkeyed interleaved. The index takes each ` +
      "commit's rows as they reach the fan-out: it reads the key columns' values out of the " +
      "row's text (a scan of the top level up to the last key column, no parse) and keeps " +
      "the row's text itself per key.",
    ],
  };
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
