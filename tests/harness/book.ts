// An order-book schema and rows with nested values, shared by the nested suites.

/** An order book row: level arrays, a typed struct, an open object. */
export const BOOK = {
  type: "object",
  properties: {
    symbol: { type: "string" },
    bids: {
      type: "array",
      items: { type: "array", items: { type: "number" }, minItems: 2, maxItems: 2 },
    },
    asks: {
      type: "array",
      items: {
        type: "object",
        properties: { px: { type: "number" }, qty: { type: "number" } },
        required: ["px", "qty"],
        additionalProperties: false,
      },
    },
    meta: { type: ["object", "null"] },
    tags: { type: ["array", "null"], items: { type: "string" } },
  },
  required: ["symbol", "bids", "asks", "meta", "tags"],
  additionalProperties: false,
};

/**
 * Row `i` as a producer writes it (JSON text, keys in its own order, top and
 * inside): what must be stored is JSON.stringify of the parsed value with
 * the top-level keys in column order.
 */
export function bookLine(i: number, random: () => number): string {
  const px = (k: number) => Math.round((100 + k + random()) * 100) / 100;
  const bids = Array.from({ length: 1 + (i % 4) }, (_, k) => `[${px(-k)},${(k + 1) * 0.5}]`);
  const asks = Array.from({ length: i % 3 }, (_, k) => `{"qty":${k + 1},"px":${px(k)}}`);
  const meta = i % 5 === 0
    ? "null"
    : `{"z":${i},"a":{"é":"\\u2028 \\"q\\"","1":[true,null,1.0e2]},"__proto__":{"x":1}}`;
  const tags = i % 2 === 0 ? "null" : `["t${i}","😀"]`;
  return `{"tags":${tags},"meta":${meta},"asks":[${asks}],"bids":[${bids}],"symbol":"BTC-${i}"}`;
}

/** What the server stores for a producer's line. */
export function stored(line: string): string {
  const v = JSON.parse(line);
  return JSON.stringify({
    symbol: v.symbol,
    bids: v.bids,
    asks: v.asks,
    meta: v.meta,
    tags: v.tags,
  });
}
