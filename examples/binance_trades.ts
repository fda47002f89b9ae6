/**
 * A `--handler` for Binance's public trade stream: each WebSocket frame
 * becomes one row of `examples/trades.json`, or `null` for anything that is
 * not a trade.
 *
 * ```sh
 * deno run -A cli.ts serve --stream trades=examples/trades.json \
 *   --upstream 'trades=wss://stream.binance.com:9443/ws/btcusdt@trade' \
 *   --handler examples/binance_trades.ts
 * ```
 *
 * A frame looks like
 * `{"e":"trade","E":1672515782136,"s":"BTCUSDT","t":12345,"p":"85565.01","q":"0.015","T":1672515782136,"m":true}`:
 * prices and quantities come as strings, times in ms, and `m` says whether the
 * buyer was the maker (then the taker sold).
 *
 * @module
 */

/** One row of examples/trades.json. */
export interface TradeRow {
  /** Trade time, µs since the epoch. */
  event_ts: number;
  /** The market, e.g. "BTCUSDT". */
  symbol: string;
  /** The price. */
  price: number;
  /** The quantity. */
  amount: number;
  /** The taker's side: 1 buy, 0 sell. */
  side: number;
  /** The exchange's trade id. */
  trade_id: number;
}

/**
 * Turns one upstream frame into a row, or `null` to skip it. A frame that is
 * not JSON throws, and the server records it as a reject.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import handler from "./binance_trades.ts";
 * const row = handler('{"e":"trade","s":"BTCUSDT","t":7,"p":"85565.01","q":"0.015","T":1672515782136,"m":true}');
 * deepStrictEqual(row, {
 *   event_ts: 1672515782136000, // ms to µs
 *   symbol: "BTCUSDT",
 *   price: 85565.01,
 *   amount: 0.015,
 *   side: 0, // the buyer was the maker: a sell
 *   trade_id: 7,
 * });
 * equal(handler('{"result":null,"id":1}'), null); // the subscription's ack
 * ```
 */
export default function handler(frame: string): TradeRow | null {
  const m = JSON.parse(frame);
  if (m?.e !== "trade") return null; // subscription acks and other events
  return {
    event_ts: Number(m.T) * 1000,
    symbol: String(m.s),
    price: Number(m.p),
    amount: Number(m.q),
    side: m.m ? 0 : 1,
    trade_id: Number(m.t),
  };
}
