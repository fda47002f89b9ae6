// The rows of the compression benchmarks: trade rows, and trade rows with an
// order book serialised as JSON in a string column.
import { tradeRows } from "../../tests/harness/trades.ts";

/** The two row kinds of the compression benchmarks. */
export type Kind = "trade" | "nested";
/** `n` rows of `kind` as JSON text: trade rows, or trade rows with an order book in a string column. */
export function rowsOf(kind: Kind, n: number): string[] {
  const make = tradeRows(1);
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = make(i);
    if (kind === "nested") {
      const p = r.price as number;
      const level = (k: number, side: number) => [
        Math.round((p + side * (k + 1) * 0.01 * p / 100) * 100) / 100,
        Math.round(((i * 7 + k * 13) % 1000) / 10 * 1000) / 1000,
      ];
      r.book = JSON.stringify({
        bids: [0, 1, 2, 3, 4].map((k) => level(k, -1)),
        asks: [0, 1, 2, 3, 4].map((k) => level(k, 1)),
        venue: ["cb", "kr", "bn"][i % 3],
      });
    }
    out.push(JSON.stringify(r));
  }
  return out;
}
