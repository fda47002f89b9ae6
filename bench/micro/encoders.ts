/**
 * Micro-benchmark of the per-row cost on the publish path: validating and
 * encoding one 6-column trade row, against `JSON.stringify` of the same row.
 *
 * The rows cycle through a pool of 8,192 holding some 40,000 distinct
 * numbers, more than V8's number-string cache keeps (16,384): with a small
 * pool, `"" + number` is served from that cache (JSON.stringify does not use
 * it) and a concatenating encoder looks faster than it is on live data.
 *
 * The second group adds the next step a row always takes, writing it out as
 * UTF-8, because an encoder that returns a rope (a concatenated string) pays
 * for flattening it there. "concatenation" is the encoder the generator
 * would emit if it concatenated JSON text instead of stringifying a
 * key-ordered copy, written out by hand for comparison.
 *
 * Usage: `deno bench bench/micro/encoders.ts`
 *
 * @module
 */

import { compileSchema } from "../../schema/compile.ts";

type Trade = {
  event_ts: number;
  symbol: string;
  price: number;
  amount: number;
  side: number;
  trade_id: number;
};

const trades = compileSchema({
  type: "object",
  properties: {
    event_ts: { type: "integer", format: "int64" },
    symbol: { type: "string" },
    price: { type: "number", format: "double" },
    amount: { type: "number", format: "double" },
    side: { type: "integer", format: "int32" },
    trade_id: { type: "integer", format: "int64" },
  },
  required: ["event_ts", "symbol", "price", "amount", "side", "trade_id"],
  additionalProperties: false,
});

const POOL = 8_192;
const SYMBOLS = ["BTC-USD", "ETH-USD", "SOL-USD", "DOGE-USD"];
const rows: Trade[] = Array.from({ length: POOL }, (_, i) => ({
  event_ts: 1_717_000_000_000_000 + i * 137,
  symbol: SYMBOLS[i % SYMBOLS.length],
  price: 60_000 + (i % 9_973) * 0.25,
  amount: 0.001 * ((i * 7_919) % 100_000) + 0.0005,
  side: i % 2 === 0 ? 1 : -1,
  trade_id: 900_000_000 + i,
}));

function concatenation(r: Trade): string {
  return '{"event_ts":' + r.event_ts + ',"symbol":' + JSON.stringify(r.symbol) +
    ',"price":' + r.price + ',"amount":' + r.amount + ',"side":' + r.side +
    ',"trade_id":' + r.trade_id + "}";
}

for (const row of rows) {
  const problem = trades.validate(row);
  if (problem !== null) throw new Error(`bench row refused: ${problem}`);
  const expected = JSON.stringify(row);
  if (trades.encode(row) !== expected || concatenation(row) !== expected) {
    throw new Error(`encoders disagree on ${expected}`);
  }
}

const { encode, validate } = trades;
const utf8 = new TextEncoder();
const out = new Uint8Array(1 << 12);
let i = 0;
let sink = 0;

const ROW = "encode 6-column row";
Deno.bench({
  name: "JSON.stringify",
  group: ROW,
  baseline: true,
  fn() {
    sink += JSON.stringify(rows[i++ & (POOL - 1)]).length;
  },
});
Deno.bench({
  name: "encode",
  group: ROW,
  fn() {
    sink += encode(rows[i++ & (POOL - 1)]).length;
  },
});
Deno.bench({
  name: "concatenation",
  group: ROW,
  fn() {
    sink += concatenation(rows[i++ & (POOL - 1)]).length;
  },
});
Deno.bench({
  name: "validate",
  group: ROW,
  fn() {
    if (validate(rows[i++ & (POOL - 1)]) === null) sink++;
  },
});
Deno.bench({
  name: "validate + encode",
  group: ROW,
  fn() {
    const row = rows[i++ & (POOL - 1)];
    if (validate(row) === null) sink += encode(row).length;
  },
});

const UTF8 = "encode 6-column row, then write it as UTF-8";
Deno.bench({
  name: "JSON.stringify + encodeInto",
  group: UTF8,
  baseline: true,
  fn() {
    sink += utf8.encodeInto(JSON.stringify(rows[i++ & (POOL - 1)]), out).written;
  },
});
Deno.bench({
  name: "encode + encodeInto",
  group: UTF8,
  fn() {
    sink += utf8.encodeInto(encode(rows[i++ & (POOL - 1)]), out).written;
  },
});
Deno.bench({
  name: "concatenation + encodeInto",
  group: UTF8,
  fn() {
    sink += utf8.encodeInto(concatenation(rows[i++ & (POOL - 1)]), out).written;
  },
});

globalThis.addEventListener("unload", () => {
  // Keeps `sink` observable so no benchmark body is optimized away.
  if (sink < 0) console.log(sink);
});
