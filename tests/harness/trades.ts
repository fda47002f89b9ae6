// The benchmark's message: a 6-column trade row, with a random walk for prices.

/** The trade schema used by every benchmark. */
export const SCHEMA = {
  type: "object",
  properties: {
    event_ts: { type: "integer" },
    symbol: { type: "string" },
    price: { type: "number" },
    amount: { type: "number" },
    side: { type: "integer", format: "int32" },
    trade_id: { type: "integer" },
  },
  required: ["event_ts", "symbol", "price", "amount", "side", "trade_id"],
};

const SYMBOLS = ["BTC-USD", "ETH-USD", "SOL-USD", "XRP-USD"];

/** Makes rows like a market feed: several symbols, random-walk prices. */
export function tradeRows(seed = 1): (i: number) => Record<string, unknown> {
  let s = seed >>> 0;
  const rand = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
  const prices = [85565, 3120.5, 142.3, 0.61];
  const t0 = 1790038800000000;
  return (i) => {
    const k = Math.floor(rand() * SYMBOLS.length);
    prices[k] = Math.max(0.01, prices[k] * (1 + (rand() - 0.5) * 0.001));
    return {
      event_ts: t0 + i * 1000 + Math.floor(rand() * 1000),
      symbol: SYMBOLS[k],
      price: Math.round(prices[k] * 100) / 100,
      amount: Math.round(rand() * 2_000_000) / 1_000_000,
      side: rand() < 0.5 ? 0 : 1,
      trade_id: 100_000_000 + i,
    };
  };
}

/**
 * Rows for live benchmarks: `tradeRows`, with `event_ts` set to the wall
 * clock (µs) when the row is made, so a receiver in another process can tell
 * its latency. bench/harness/fanout_node.mjs makes the same rows (checked by
 * bench/e2e/fanout.ts before it runs).
 */
export function liveTradeRows(seed = 1): (i: number) => Record<string, unknown> {
  const make = tradeRows(seed);
  return (i) => {
    const row = make(i);
    row.event_ts = Math.round((performance.timeOrigin + performance.now()) * 1000);
    return row;
  };
}
