// Paired A/B runs of two checkouts in one sitting: the pairing order (ABBA)
// and the summary of each pair's after / before ratio. The one home of that
// logic; bench/e2e/ab.ts and bench/e2e/ingest_ab.ts use it.
import { median } from "./report.ts";

/** The two sides of an A/B: the checkout compared against, and this one. */
export type Side = "before" | "after";

/**
 * The order of pair `p` (from 0): before then after on even pairs, after then
 * before on odd ones (A B B A A B …), so that a drift of the machine's load
 * over the sitting falls on both sides alike.
 */
export function abbaOrder(p: number): [Side, Side] {
  return p % 2 === 0 ? ["before", "after"] : ["after", "before"];
}

/** One pair's two results. */
export type Pair<T> = Record<Side, T>;

/** Runs one pair, pair `p`'s sides in {@linkcode abbaOrder}. */
export async function runPair<T>(
  p: number,
  run: (side: Side, pair: number) => Promise<T>,
): Promise<Pair<T>> {
  const got: Partial<Pair<T>> = {};
  for (const side of abbaOrder(p)) got[side] = await run(side, p);
  return got as Pair<T>;
}

/**
 * Runs `pairs` pairs in ABBA order, each side once a pair, and calls `done`
 * after each pair (for a progress line).
 */
export async function runPairs<T>(
  pairs: number,
  run: (side: Side, pair: number) => Promise<T>,
  done?: (pair: Pair<T>, p: number, order: [Side, Side]) => void,
): Promise<Pair<T>[]> {
  const out: Pair<T>[] = [];
  for (let p = 0; p < pairs; p++) {
    out.push(await runPair(p, run));
    done?.(out[p], p, abbaOrder(p));
  }
  return out;
}

/** after / before of each pair's figure, and their median, least and most. */
export interface Ratios {
  each: number[];
  median: number;
  min: number;
  max: number;
}

/** The after / before ratio of `figure` in every pair. */
export function ratios<T>(pairs: Pair<T>[], figure: (t: T) => number): Ratios {
  const each = pairs.map((p) => figure(p.after) / figure(p.before));
  return { each, median: median(each), min: Math.min(...each), max: Math.max(...each) };
}
