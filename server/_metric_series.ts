/**
 * The series of one metric, found by label set: the label checks, the
 * canonical label text and the alias cache behind `inc(labels)`. Private to
 * `metrics.ts`.
 *
 * @module
 */

/** Labels of one series: label name → label value. */
export type Labels = Record<string, string>;

/** The most series one metric may hold; one more throws a `RangeError`. */
export const MAX_SERIES = 10_000;

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
// Differently ordered labels objects for one series each get a cache entry;
// past this many the cache stops growing and misses canonicalize instead.
const MAX_ALIASES = 4 * MAX_SERIES;

/** A series of a metric: its rendered label text, e.g. `{stream="trades"}`. */
export interface Series {
  readonly labels: string;
}

// A path through the alias trie: one level per label, in the caller's key order.
interface AliasNode<S> {
  series?: S;
  next?: Map<string, Map<string, AliasNode<S>>>;
}

/**
 * Finds or creates the series of one metric by label set.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { makeValueSeries, SeriesMap } from "./_metric_series.ts";
 * const m = new SeriesMap("rows_total", makeValueSeries);
 * m.get({ stream: "t", b: "1" }).value += 2;
 * equal(m.get({ b: "1", stream: "t" }).value, 2); // the same series, whatever the labels' order
 * equal(m.get({ b: "1", stream: "t" }).labels, '{b="1",stream="t"}');
 * ```
 */
export class SeriesMap<S extends Series> {
  readonly #metric: string;
  readonly #reserved: string | undefined;
  readonly #make: (labels: string) => S;
  // Label names and values in the caller's key order → series: two `Map`
  // lookups per label and no string building, so `inc(labels)` stays cheap.
  #aliases: AliasNode<S> = {};
  #aliasCount = 0;
  // Rendered label text (names sorted) → series; the identity of a series.
  readonly #byLabels = new Map<string, S>();
  // Rendered label text → the labels it was made from, for `drop`.
  readonly #labelsOf = new Map<string, Labels>();

  constructor(metric: string, make: (labels: string) => S, reserved?: string) {
    this.#metric = metric;
    this.#make = make;
    this.#reserved = reserved;
  }

  /** Every series, in creation order. */
  series(): IterableIterator<S> {
    return this.#byLabels.values();
  }

  get(labels: Labels | undefined): S {
    return this.find(labels, true) as S;
  }

  /** The series of `labels`; if there is none, a new one when `create`, else undefined. */
  find(labels: Labels | undefined, create: boolean): S | undefined {
    let node: AliasNode<S> | undefined = this.#aliases;
    if (labels !== undefined) {
      for (const name in labels) {
        node = node.next?.get(name)?.get(labels[name]);
        if (node === undefined) return this.#miss(labels, create);
      }
    }
    return node.series ?? this.#miss(labels ?? {}, create);
  }

  #miss(labels: Labels, create: boolean): S | undefined {
    const names = Object.keys(labels).sort();
    let text = "";
    for (const name of names) {
      if (!LABEL_NAME.test(name) || name.startsWith("__")) {
        throw new TypeError(
          `Cannot use label name ${JSON.stringify(name)} on metric ${this.#metric}: ` +
            `a label name must match [a-zA-Z_][a-zA-Z0-9_]* and not start with "__"`,
        );
      }
      if (name === this.#reserved) {
        throw new TypeError(
          `Cannot use label name "${name}" on metric ${this.#metric}: it is reserved`,
        );
      }
      const value: unknown = labels[name];
      if (typeof value !== "string") {
        throw new TypeError(
          `Cannot use label ${name}=${String(value)} on metric ${this.#metric}: ` +
            `label values must be strings, got ${typeof value}`,
        );
      }
      text += (text === "" ? "" : ",") + name + '="' + escapeLabelValue(value) + '"';
    }
    if (text !== "") text = "{" + text + "}";
    let series = this.#byLabels.get(text);
    if (series === undefined) {
      if (!create) return undefined;
      if (this.#byLabels.size >= MAX_SERIES) {
        throw new RangeError(
          `Cannot add series ${text} to metric ${this.#metric}: ` +
            `it already holds the maximum of ${MAX_SERIES} series`,
        );
      }
      series = this.#make(text);
      this.#byLabels.set(text, series);
      this.#labelsOf.set(text, { ...labels });
    }
    if (this.#aliasCount < MAX_ALIASES) this.#alias(labels, series);
    return series;
  }

  /**
   * Removes every series whose label `name` is `value` (e.g. the series of a
   * deleted stream), so names that come and go do not pile up series. Returns
   * how many were removed. A child bound earlier to a removed series keeps
   * counting into it unseen: bind again after a drop.
   */
  drop(name: string, value: string): number {
    let dropped = 0;
    for (const [text, labels] of this.#labelsOf) {
      if (labels[name] !== value) continue;
      this.#labelsOf.delete(text);
      this.#byLabels.delete(text);
      dropped++;
    }
    if (dropped > 0) {
      // The alias trie may lead to a dropped series; it refills on the next lookups.
      this.#aliases = {};
      this.#aliasCount = 0;
    }
    return dropped;
  }

  #alias(labels: Labels, series: S): void {
    let node = this.#aliases;
    for (const name in labels) {
      node.next ??= new Map();
      let values = node.next.get(name);
      if (values === undefined) node.next.set(name, values = new Map());
      let child = values.get(labels[name]);
      if (child === undefined) values.set(labels[name], child = {});
      node = child;
    }
    if (node.series === undefined) this.#aliasCount++;
    node.series = series;
  }
}

export interface ValueSeries extends Series {
  value: number;
}

/** A new counter or gauge series at 0. */
export function makeValueSeries(labels: string): ValueSeries {
  return { labels, value: 0 };
}

/**
 * A sample value as the exposition format writes it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { formatNumber } from "./_metric_series.ts";
 * equal(formatNumber(0.5), "0.5");
 * equal(formatNumber(Infinity), "+Inf");
 * ```
 */
export function formatNumber(value: number): string {
  if (Number.isFinite(value)) return String(value);
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return "NaN";
}

function escapeLabelValue(value: string): string {
  return /[\\"\n]/.test(value)
    ? value.replace(/[\\"\n]/g, (c) => c === "\n" ? "\\n" : "\\" + c)
    : value;
}
