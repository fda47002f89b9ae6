/**
 * Nested values: the cost of `validate` + `encode` of an order-book row (10
 * bid and 10 ask levels as `{price, qty}` structs, `examples/orderbook.json`)
 * against `JSON.stringify` of the same row (the floor: no check at all); the
 * same for the flat trade row, for scale; and the export rate to Parquet of
 * a log of order-book rows (a List<Struct> column a side) against the flat
 * trade log's export, in the same run.
 *
 * Run alone: deno run --config deno.dev.json -A bench/run.ts --only nested [--quick]
 *
 * @module
 */
import { Log } from "../../log/mod.ts";
import { exportLog } from "../../arrow/export.ts";
import { compileSchema } from "../../schema/compile.ts";
import { type BenchRow, type BenchSection, median } from "../harness/report.ts";
import { SCHEMA as TRADES, tradeRows } from "../../tests/harness/trades.ts";

const BOOK = JSON.parse(
  await Deno.readTextFile(new URL("../../examples/orderbook.json", import.meta.url)),
);

function bookRows(seed: number): (i: number) => Record<string, unknown> {
  let s = seed >>> 0;
  const r = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  return (i) => {
    const mid = 85000 + Math.round(r() * 100000) / 100;
    const side = (dir: number) =>
      Array.from({ length: 10 }, (_, k) => ({
        price: Math.round((mid + dir * (k + 1) * 0.01) * 100) / 100,
        qty: Math.round(r() * 4000) / 1000,
      }));
    return {
      event_ts: 1764582000123000 + i * 100_000,
      symbol: "BTCUSDT",
      kind: "update",
      first_update_id: 1027032 + 3 * i,
      last_update_id: 1027034 + 3 * i,
      bids: side(-1),
      asks: side(1),
    };
  };
}

/**
 * Rows per second of `ours` and of `base` over `rows`: the two alternate
 * round by round (so a shared machine's load hits both alike), median of
 * `rounds` rounds each, after a warm-up round.
 */
function pair(
  rows: readonly Record<string, unknown>[],
  ours: (r: Record<string, unknown>) => unknown,
  base: (r: Record<string, unknown>) => unknown,
  rounds: number,
): [number, number] {
  const a: number[] = [];
  const b: number[] = [];
  let sink = 0;
  const time = (fn: (r: Record<string, unknown>) => unknown): number => {
    const t0 = performance.now();
    for (const row of rows) sink += (fn(row) as string | null)?.length ?? 0;
    return rows.length / ((performance.now() - t0) / 1000);
  };
  for (let round = 0; round <= rounds; round++) {
    const x = time(ours);
    const y = time(base);
    if (round > 0) {
      a.push(x);
      b.push(y);
    }
  }
  if (sink < 0) console.log(sink);
  return [median(a), median(b)];
}

async function fill(
  dir: string,
  schema: Record<string, unknown>,
  make: (i: number) => Record<string, unknown>,
  rows: number,
): Promise<void> {
  const compiled = compileSchema(schema);
  const log = await Log.open(dir, { timers: false, fsync: false, segmentBytes: 1 << 30 });
  const enc = new TextEncoder();
  for (let i = 0; i < rows; i += 10_000) {
    const n = Math.min(10_000, rows - i);
    await log.appendMany(
      Array.from({ length: n }, (_, k) => enc.encode(compiled.encode(make(i + k)))),
    );
  }
  await log.close();
}

async function exportRate(
  dir: string,
  schema: Record<string, unknown>,
  rows: number,
): Promise<number> {
  const out = `${dir}.parquet`;
  try {
    const t0 = performance.now();
    const report = await exportLog(dir, schema, { format: "parquet", out });
    if (report.rows !== rows) throw new Error(`exported ${report.rows} rows, not ${rows}`);
    return rows / ((performance.now() - t0) / 1000);
  } finally {
    await Deno.remove(out).catch(() => {});
  }
}

/** Runs the benchmark; `quick` uses fewer rows and rounds. */
export async function run(quick: boolean): Promise<BenchSection> {
  const n = quick ? 20_000 : 100_000;
  const rounds = quick ? 3 : 7;
  const book = compileSchema(BOOK);
  const trades = compileSchema(TRADES);
  const makeBook = bookRows(11);
  const makeTrade = tradeRows(7);
  // Rows as a feed delivers them: parsed from JSON text.
  const books = Array.from({ length: n }, (_, i) => JSON.parse(JSON.stringify(makeBook(i))));
  const flat = Array.from({ length: n }, (_, i) => JSON.parse(JSON.stringify(makeTrade(i))));
  for (const r of books) if (book.validate(r) !== null) throw new Error(book.validate(r)!);

  const [bookOurs, bookFloor] = pair(
    books,
    (r) => book.validate(r) ?? book.encode(r),
    (r) => JSON.stringify(r),
    rounds,
  );
  const [flatOurs, flatFloor] = pair(
    flat,
    (r) => trades.validate(r) ?? trades.encode(r),
    (r) => JSON.stringify(r),
    rounds,
  );

  const root = await Deno.makeTempDir({ prefix: "streamcast-nested-bench-" });
  const exportRows = quick ? 50_000 : 200_000;
  let bookExport = NaN;
  let flatExport = NaN;
  try {
    await fill(`${root}/book`, BOOK, makeBook, exportRows);
    await fill(`${root}/trades`, TRADES, makeTrade, exportRows);
    const b: number[] = [];
    const f: number[] = [];
    for (let i = 0; i < (quick ? 1 : 3); i++) {
      f.push(await exportRate(`${root}/trades`, TRADES, exportRows));
      b.push(await exportRate(`${root}/book`, BOOK, exportRows));
    }
    bookExport = median(b);
    flatExport = median(f);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
  const bytes = book.encode(books[0]).length;
  const rows: BenchRow[] = [
    {
      case: `validate + encode, order-book row (10 levels a side, ${bytes} bytes)`,
      ours: bookOurs,
      baseline: bookFloor,
      unit: "rows/s",
      ratio: bookOurs / bookFloor,
      target: "",
      met: null,
      note: "baseline: JSON.stringify of the same row",
    },
    {
      case: "validate + encode, flat trade row",
      ours: flatOurs,
      baseline: flatFloor,
      unit: "rows/s",
      ratio: flatOurs / flatFloor,
      target: "",
      met: null,
      note: "baseline: JSON.stringify of the same row",
    },
    {
      case: "export to Parquet, order-book rows (List<Struct> a side)",
      ours: bookExport,
      baseline: flatExport,
      unit: "rows/s",
      ratio: bookExport / flatExport,
      target: "",
      met: null,
      note: "baseline: the flat trade log's Parquet export, same run",
    },
  ];
  return {
    title: "Nested values: validate + encode, and Parquet export",
    baseline:
      "JSON.stringify of the same row (encode); the flat trade row's Parquet export (export)",
    rows,
    notes: [
      `${n} rows per encode round, ours and the baseline alternating, median of ${rounds}; ` +
      `${exportRows} rows per export, the two logs alternating, median of ${quick ? 1 : 3}.`,
    ],
  };
}
