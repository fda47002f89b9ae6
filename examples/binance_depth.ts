/**
 * A `--handler` for Binance's public depth streams: each WebSocket frame
 * becomes one row of `examples/orderbook.json` — bid and ask levels as
 * arrays of `{price, qty}` — or `null` for anything else.
 *
 * ```sh
 * # Diff depth (every change, 100 ms):
 * deno run -A cli.ts serve --stream book=examples/orderbook.json \
 *   --upstream 'book=wss://stream.binance.com:9443/ws/btcusdt@depth@100ms' \
 *   --handler examples/binance_depth.ts
 * # Top 10 levels a side, through the combined endpoint (which names the symbol):
 * deno run -A cli.ts serve --stream book=examples/orderbook.json \
 *   --upstream 'book=wss://stream.binance.com:9443/stream?streams=btcusdt@depth10@100ms' \
 *   --handler examples/binance_depth.ts
 * ```
 *
 * Frames look like
 * `{"e":"depthUpdate","E":1672515782136,"s":"BTCUSDT","U":157,"u":160,"b":[["85565.01","0.5"]],"a":[["85566.00","0"]]}`
 * (an update: a quantity of 0 removes the level) or, for the partial book,
 * `{"stream":"btcusdt@depth10@100ms","data":{"lastUpdateId":160,"bids":[["85565.01","0.5"],…],"asks":[…]}}`
 * (a snapshot of the top levels, with no event time). Prices and quantities
 * come as strings, times in ms.
 *
 * @module
 */

/** One price level. */
export interface Level {
  /** The price. */
  price: number;
  /** The quantity at that price (0: the level is gone, in an update). */
  qty: number;
}

/** One row of examples/orderbook.json. */
export interface BookRow {
  /** Exchange event time, µs since the epoch, or null when the message has none. */
  event_ts: number | null;
  /** The market, e.g. "BTCUSDT". */
  symbol: string;
  /** `snapshot` (top levels) or `update` (changed levels). */
  kind: "snapshot" | "update";
  /** The first update id an update covers (null for a snapshot). */
  first_update_id: number | null;
  /** The last update id the row includes. */
  last_update_id: number;
  /** Bid levels, best first. */
  bids: Level[];
  /** Ask levels, best first. */
  asks: Level[];
}

function levels(raw: unknown, what: string): Level[] {
  if (!Array.isArray(raw)) throw new TypeError(`${what} is not a list of levels`);
  return raw.map((l, i) => {
    const price = Number(l?.[0]);
    const qty = Number(l?.[1]);
    if (!Number.isFinite(price) || !Number.isFinite(qty)) {
      throw new TypeError(`${what}[${i}] is not a [price, qty] pair: ${JSON.stringify(l)}`);
    }
    return { price, qty };
  });
}

/**
 * Turns one upstream frame into a row, or `null` to skip it (subscription
 * acks, other events). A frame that is not JSON, or a depth message whose
 * levels are not `[price, qty]` pairs, throws: the server records it as a
 * reject and goes on.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import handler from "./binance_depth.ts";
 * const row = handler('{"e":"depthUpdate","E":1672515782136,"s":"BTCUSDT","U":157,"u":160,"b":[["85565.01","0.5"]],"a":[]}');
 * deepStrictEqual(row?.bids, [{ price: 85565.01, qty: 0.5 }]);
 * ```
 */
export default function handler(frame: string): BookRow | null {
  const msg = JSON.parse(frame);
  // The combined endpoint wraps each message: {"stream":"btcusdt@depth10","data":{…}}.
  const stream = typeof msg?.stream === "string" ? msg.stream : null;
  const m = stream !== null ? msg.data : msg;
  if (m?.e === "depthUpdate") {
    return {
      event_ts: Number(m.E) * 1000,
      symbol: String(m.s),
      kind: "update",
      first_update_id: Number(m.U),
      last_update_id: Number(m.u),
      bids: levels(m.b, "b"),
      asks: levels(m.a, "a"),
    };
  }
  if (m !== null && typeof m === "object" && "lastUpdateId" in m) {
    // The partial book: the symbol is in the stream name (or, on futures, in "s").
    const symbol = typeof m.s === "string" ? m.s : stream?.split("@")[0].toUpperCase();
    if (!symbol) throw new TypeError("a partial book without a symbol (use the combined endpoint)");
    return {
      event_ts: typeof m.E === "number" ? m.E * 1000 : null,
      symbol,
      kind: "snapshot",
      first_update_id: null,
      last_update_id: Number(m.lastUpdateId),
      bids: levels(m.bids, "bids"),
      asks: levels(m.asks, "asks"),
    };
  }
  return null;
}
