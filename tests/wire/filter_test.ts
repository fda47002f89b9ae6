// The where= filter: what it accepts, what it refuses (naming the column and
// the problem), and, on random rows and filters, that the generated predicate
// agrees with a plain interpreter of the rules. Seeded: STREAMCAST_FILTER_SEED
// (a fresh one each run, printed) plus fixed regression seeds.
import { assert, assertEquals, assertThrows } from "../harness/assert.ts";
import {
  compileFilter,
  FilterError,
  type FilterScalar,
  MAX_FILTER_VALUES,
  type Where,
} from "../../wire/filter.ts";

const SCHEMA = {
  type: "object",
  properties: {
    symbol: { type: "string" },
    price: { type: "number" },
    size: { type: "integer", format: "int64" },
    side: { type: ["integer", "null"] },
    live: { type: "boolean" },
    note: { type: ["string", "null"] },
    book: { type: "object" },
  },
  required: ["symbol", "price", "size", "side", "live", "note", "book"],
};

function refuses(where: unknown, detail: string): void {
  const err = assertThrows(() => compileFilter(where, SCHEMA), FilterError);
  assert(err.detail.startsWith("where: "), err.detail);
  assert(err.detail.includes(detail), `${err.detail} should say ${detail}`);
}

Deno.test("filter matches equality, membership, ranges, prefix and null", () => {
  const row = {
    symbol: "BTC-USD",
    price: 101.5,
    size: 3,
    side: null,
    live: true,
    note: "x",
    book: {},
  };
  const yes: Where[] = [
    { symbol: "BTC-USD" },
    { symbol: ["ETH-USD", "BTC-USD"] },
    { price: { gt: 100, lte: 101.5 } },
    { size: { gte: 3, lt: 4 } },
    { symbol: { prefix: "BTC-" } },
    { side: null },
    { side: [1, null] },
    { live: true, symbol: "BTC-USD", size: 3 },
  ];
  for (const w of yes) assert(compileFilter(w, SCHEMA).test(row), JSON.stringify(w));
  const no: Where[] = [
    { symbol: "ETH-USD" },
    { price: { gt: 101.5 } },
    { side: 1 },
    { note: null },
    { symbol: { prefix: "ETH" } },
    { live: false },
    { symbol: "BTC-USD", size: 4 },
  ];
  for (const w of no) assert(!compileFilter(w, SCHEMA).test(row), JSON.stringify(w));
});

Deno.test("filter reads a nullable column missing from a row (stored before it was added) as null", () => {
  const evolved = { symbol: "BTC-USD", price: 1, size: 3, side: 2, live: true, book: {} };
  const yes: Where[] = [{ note: null }, { note: ["a", null] }, { note: null, symbol: "BTC-USD" }];
  for (const w of yes) assert(compileFilter(w, SCHEMA).test(evolved), JSON.stringify(w));
  const no: Where[] = [{ note: "a" }, { note: ["a", "b"] }, { note: { prefix: "" } }];
  for (const w of no) assert(!compileFilter(w, SCHEMA).test(evolved), JSON.stringify(w));
  const noSide = { ...evolved, side: undefined };
  delete noSide.side;
  assert(compileFilter({ side: null }, SCHEMA).test(noSide));
  assert(!compileFilter({ side: { gte: 0 } }, SCHEMA).test(noSide));
});

Deno.test("filter refuses what does not fit, naming the column and the problem", () => {
  refuses("{", "not JSON");
  refuses("[1]", "must be a JSON object");
  refuses("{}", "an empty filter");
  refuses({ sym: "x" }, "unknown column sym");
  refuses({ symbol: 5 }, "column symbol: 5 is not a string");
  refuses({ size: 1.5 }, "column size: 1.5 is not an integer");
  refuses({ size: 2 ** 60 }, "column size");
  refuses({ price: null }, "column price: null is not a finite number");
  refuses({ symbol: [] }, "column symbol: an empty list");
  refuses({ symbol: { gt: 1 } }, "column symbol: gt applies to number columns");
  refuses({ price: { prefix: "1" } }, "column price: prefix applies to string columns");
  refuses({ price: { gt: "1" } }, "column price: gt takes a finite number");
  refuses({ price: { near: 1 } }, "column price: unknown operator near");
  refuses({ price: {} }, "column price: an empty condition object");
  refuses({ symbol: [["a"]] }, "column symbol");
  refuses({ book: {} }, "column book is nested");
  refuses('{"price":1e400}', "column price: Infinity is not a finite number");
  const many = Array.from({ length: MAX_FILTER_VALUES + 1 }, (_, i) => `s${i}`);
  refuses({ symbol: many }, `more than ${MAX_FILTER_VALUES} values`);
  const half = many.slice(0, 600);
  refuses({ symbol: half, note: half }, `more than ${MAX_FILTER_VALUES} values`);
  assert(
    compileFilter({ symbol: many.slice(0, MAX_FILTER_VALUES) }, SCHEMA).test({ symbol: "s3" }),
  );
});

Deno.test("filter code is data-safe: quotes, unicode and code-like names stay values", () => {
  const schema = {
    type: "object",
    properties: { 'a"]; throw 1; //': { type: "string" }, "\u2028": { type: "string" } },
  };
  const f = compileFilter({ 'a"]; throw 1; //': '"); throw 2; ("', "\u2028": "é\u2029" }, schema);
  assert(f.test({ 'a"]; throw 1; //': '"); throw 2; ("', "\u2028": "é\u2029" }));
  assert(!f.test({ 'a"]; throw 1; //': "x", "\u2028": "é\u2029" }));
});

Deno.test("filter keys are equal for filters of the same meaning", () => {
  const a = compileFilter({ symbol: ["B", "A"], price: { lt: 2, gt: 1 } }, SCHEMA);
  const b = compileFilter('{"price":{"gt":1,"lt":2},"symbol":["A","B","A"]}', SCHEMA);
  assertEquals(a.key, b.key);
  assert(a.key !== compileFilter({ symbol: ["A"] }, SCHEMA).key);
  assertEquals(a.where, { symbol: ["B", "A"], price: { lt: 2, gt: 1 } });
});

// --- random rows and filters against a plain interpreter -----------------

function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}

const SYMBOLS = ["BTC-USD", "BTC-EUR", "ETH-USD", "", "é", "B"];

function randomRow(r: () => number): Record<string, unknown> {
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)];
  const row: Record<string, unknown> = {
    symbol: pick(SYMBOLS),
    price: pick([0, -1.5, 1, 2.25, 100, 1e-9]),
    size: pick([0, 1, 2, 3, -7]),
    side: pick([null, 1, 2]),
    live: r() < 0.5,
    note: pick([null, "a", "ab", "b"]),
    book: {},
  };
  // A row stored before a nullable column was added lacks its key.
  if (r() < 0.2) delete row.note;
  if (r() < 0.1) delete row.side;
  return row;
}

function randomFilter(r: () => number): Where {
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)];
  const w: Where = {};
  const n = 1 + Math.floor(r() * 3);
  for (let i = 0; i < n; i++) {
    const col = pick(["symbol", "price", "size", "side", "live", "note"]);
    const values: Record<string, FilterScalar[]> = {
      symbol: SYMBOLS,
      price: [0, -1.5, 1, 2.25, 100],
      size: [0, 1, 2, 3],
      side: [null, 1, 2],
      live: [true, false],
      note: [null, "a", "b"],
    };
    const shape = r();
    if (shape < 0.4) w[col] = pick(values[col]);
    else if (shape < 0.7) w[col] = values[col].filter(() => r() < 0.5).concat(pick(values[col]));
    else if (col === "symbol" || col === "note") w[col] = { prefix: pick(["B", "BTC-", "", "a"]) };
    else if (col === "price" || col === "size" || col === "side") {
      const ops = ["gt", "gte", "lt", "lte"].filter(() => r() < 0.5);
      if (ops.length === 0) ops.push("gte");
      w[col] = Object.fromEntries(ops.map((op) => [op, pick([-1, 0, 1, 2, 2.5])]));
    } else w[col] = pick(values[col]);
  }
  return w;
}

function interpret(w: Where, row: Record<string, unknown>): boolean {
  return Object.entries(w).every(([col, cond]) => {
    const v = col in row ? row[col] : null;
    if (Array.isArray(cond)) return cond.some((c) => c === v);
    if (cond !== null && typeof cond === "object") {
      return Object.entries(cond).every(([op, x]) => {
        if (op === "prefix") return typeof v === "string" && v.startsWith(x as string);
        if (typeof v !== "number") return false;
        const n = x as number;
        return op === "gt" ? v > n : op === "gte" ? v >= n : op === "lt" ? v < n : v <= n;
      });
    }
    return v === cond;
  });
}

const REGRESSION_SEEDS: readonly number[] = [1, 2, 3];

Deno.test("filter agrees with the rules on random rows and filters (fresh seed + regression seeds)", () => {
  const fresh = Number(Deno.env.get("STREAMCAST_FILTER_SEED") ?? (Math.random() * 2 ** 31) >>> 0);
  console.log(`filter fuzz: seed ${fresh} (replay with STREAMCAST_FILTER_SEED=${fresh})`);
  for (const seed of [fresh, ...REGRESSION_SEEDS]) {
    const r = rng(seed);
    for (let c = 0; c < 300; c++) {
      const w = randomFilter(r);
      let f;
      try {
        f = compileFilter(w, SCHEMA);
      } catch (err) {
        // Only a filter that breaks the type rules may be refused (e.g. null on a non-null column).
        assert(err instanceof FilterError, `seed ${seed} case ${c}: ${err}`);
        assert(/is not|applies to/.test(err.detail), `seed ${seed} case ${c}: ${err.detail}`);
        continue;
      }
      for (let k = 0; k < 20; k++) {
        const row = randomRow(r);
        assertEquals(
          f.test(row),
          interpret(w, row),
          `seed ${seed} case ${c}: ${JSON.stringify(w)} on ${JSON.stringify(row)}`,
        );
      }
    }
  }
});
