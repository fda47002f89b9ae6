/**
 * Prometheus metrics without a dependency: counters, gauges and fixed-bucket
 * histograms, rendered in the text exposition format (version 0.0.4) that
 * `GET /_/metrics` serves.
 *
 * Invariants this module keeps:
 * - a metric name matches `[a-zA-Z_:][a-zA-Z0-9_:]*` and a label name matches
 *   `[a-zA-Z_][a-zA-Z0-9_]*` without a leading `__` (checked once, at creation
 *   of the metric or of the series, never on the hot path);
 * - one series per distinct label set, whatever the order of the keys in the
 *   labels object; a metric holds at most {@linkcode MAX_SERIES} series, so a
 *   label fed from unbounded input fails loudly instead of eating memory;
 * - counters never go down; histogram buckets are strictly increasing and
 *   rendered cumulatively, ending with `le="+Inf"` equal to `_count`.
 *
 * Hot path: `inc(labels)` costs two `Map` lookups per label (about 40 ns for
 * one label); a child bound once with `labels()` costs a field update (~10 ns).
 *
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Registry } from "./metrics.ts";
 * const registry = new Registry();
 * const rows = registry.counter("streamcast_rows_appended_total", "Rows appended to the log.");
 * const trades = rows.labels({ stream: "trades" });
 * trades.inc();
 * trades.inc(9);
 * equal(
 *   registry.render(),
 *   "# HELP streamcast_rows_appended_total Rows appended to the log.\n" +
 *     "# TYPE streamcast_rows_appended_total counter\n" +
 *     'streamcast_rows_appended_total{stream="trades"} 10\n',
 * );
 * ```
 *
 * @module
 */

import {
  formatNumber,
  type Labels,
  makeValueSeries,
  type Series,
  SeriesMap,
  type ValueSeries,
} from "./_metric_series.ts";

export { type Labels, MAX_SERIES } from "./_metric_series.ts";

/** The `Content-Type` of {@linkcode Registry.render}'s output. */
export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
// A metric's sample lines without its HELP and TYPE, for a registry that
// renders one family from several registries (see Registry.include).
const SAMPLES = new WeakMap<object, () => string>();

/**
 * A counter's series bound to one label set by {@linkcode Counter.labels}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Counter, type CounterChild } from "./metrics.ts";
 * const sent: CounterChild = new Counter("frames_sent_total", "Frames sent.").labels({ stream: "t" });
 * sent.inc(64);
 * equal(sent.get(), 64);
 * ```
 */
export interface CounterChild {
  /** Adds `by` (default 1, must be ≥ 0) to the series. */
  inc(by?: number): void;
  /** The series' current value. */
  get(): number;
}

/**
 * A gauge's series bound to one label set by {@linkcode Gauge.labels}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Gauge, type GaugeChild } from "./metrics.ts";
 * const live: GaugeChild = new Gauge("subscribers", "Subscribers.").labels({ state: "live" });
 * live.inc();
 * live.dec();
 * live.set(3);
 * equal(live.get(), 3);
 * ```
 */
export interface GaugeChild {
  /** Sets the series to `value`. */
  set(value: number): void;
  /** Adds `by` (default 1) to the series. */
  inc(by?: number): void;
  /** Subtracts `by` (default 1) from the series. */
  dec(by?: number): void;
  /** The series' current value. */
  get(): number;
}

/**
 * A histogram's series bound to one label set by {@linkcode Histogram.labels}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Histogram, type HistogramChild } from "./metrics.ts";
 * const h = new Histogram("fsync_seconds", "Fsync latency.", [0.001, 0.01, 0.1]);
 * const child: HistogramChild = h.labels({ stream: "t" });
 * child.observe(0.004);
 * equal(child.get().count, 1);
 * ```
 */
export interface HistogramChild {
  /** Records one observation. */
  observe(value: number): void;
  /** The series' count, sum and cumulative bucket counts. */
  get(): HistogramSnapshot;
}

/**
 * The state of one histogram series, as {@linkcode Histogram.get} reports it.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Histogram, type HistogramSnapshot } from "./metrics.ts";
 * const h = new Histogram("latency_seconds", "Latency.", [1, 2]);
 * h.observe(1.5);
 * const snap: HistogramSnapshot = h.get();
 * deepStrictEqual(snap.buckets, [0, 1, 1]); // ≤1, ≤2, +Inf
 * ```
 */
export interface HistogramSnapshot {
  /** How many observations. */
  count: number;
  /** The sum of the observations. */
  sum: number;
  /** Cumulative counts, one per bucket bound and a last one for `+Inf`. */
  buckets: number[];
}

function checkMetricName(name: string): void {
  if (typeof name !== "string" || !METRIC_NAME.test(name)) {
    throw new TypeError(
      `Cannot create metric ${JSON.stringify(name)}: ` +
        `a metric name must match [a-zA-Z_:][a-zA-Z0-9_:]*`,
    );
  }
}

function checkIncrement(name: string, by: number): void {
  if (!(by >= 0) || by === Infinity) {
    throw new RangeError(
      `Cannot increment counter ${name} by ${by}: a counter only goes up by a finite amount ≥ 0`,
    );
  }
}

/**
 * What {@linkcode Counter} and {@linkcode Gauge} share: one number per label
 * set, rendered as `name{labels} value` lines under the metric's `# TYPE`.
 * `Child` is what {@linkcode ValueMetric.labels} returns.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Gauge, type ValueMetric } from "./metrics.ts";
 * const metric: ValueMetric<unknown> = new Gauge("streamcast_lag_rows", "Rows behind.");
 * (metric as Gauge).set(3, { stream: "t" });
 * equal(metric.get({ stream: "t" }), 3);
 * equal(metric.render().split("\n")[2], 'streamcast_lag_rows{stream="t"} 3');
 * ```
 */
export abstract class ValueMetric<Child> {
  /** The metric name. */
  readonly name: string;
  /** The `# HELP` text. */
  readonly help: string;
  readonly #series: SeriesMap<ValueSeries>;
  readonly #type: "counter" | "gauge";
  readonly #bind: (series: { value: number }) => Child;

  /**
   * Makes the metric; throws `TypeError` if `name` is not a valid metric name.
   * `bind` makes the child of one series, for {@linkcode ValueMetric.labels}.
   */
  constructor(
    name: string,
    help: string,
    type: "counter" | "gauge",
    bind: (series: { value: number }) => Child,
  ) {
    checkMetricName(name);
    this.name = name;
    this.help = help;
    this.#type = type;
    this.#bind = bind;
    const series = new SeriesMap(name, makeValueSeries);
    this.#series = series;
    SAMPLES.set(this, () => renderValues(name, series));
  }

  /** The value of the series of `labels`; 0 if it was never touched. */
  get(labels?: Labels): number {
    return this.#series.find(labels, false)?.value ?? 0;
  }

  /** The series of `labels`, bound once for a hot path. */
  labels(labels: Labels): Child {
    return this.#bind(this.#series.get(labels));
  }

  /** This metric in the text exposition format, ending with a newline. */
  render(): string {
    return header(this.name, this.help, this.#type) + renderValues(this.name, this.#series);
  }

  /** Removes every series whose label `label` is `value`; returns how many. */
  forget(label: string, value: string): number {
    return this.#series.drop(label, value);
  }

  /** The series of `labels`, made if new: what a change of the value changes. */
  protected series(labels?: Labels): { value: number } {
    return this.#series.get(labels);
  }
}

class BoundCounter implements CounterChild {
  readonly #name: string;
  readonly #series: { value: number };
  constructor(name: string, series: { value: number }) {
    this.#name = name;
    this.#series = series;
  }
  inc(by = 1): void {
    if (!(by >= 0) || by === Infinity) checkIncrement(this.#name, by);
    this.#series.value += by;
  }
  get(): number {
    return this.#series.value;
  }
}

/**
 * A value that only goes up, e.g. rows appended. A series appears in the output
 * once touched: `inc(labels, 0)` makes it show as 0.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Counter } from "./metrics.ts";
 * const refusals = new Counter("streamcast_refusals_total", "Subscribes refused.");
 * refusals.inc({ why: "evicted" });
 * refusals.inc({ why: "evicted" }, 2);
 * equal(refusals.get({ why: "evicted" }), 3);
 * ```
 */
export class Counter extends ValueMetric<CounterChild> {
  /** Makes a counter; throws `TypeError` if `name` is not a valid metric name. */
  constructor(name: string, help: string) {
    super(name, help, "counter", (series) => new BoundCounter(name, series));
  }

  /** Adds `by` (default 1, must be finite and ≥ 0, else `RangeError`) to the series of `labels`. */
  inc(labels?: Labels, by = 1): void {
    if (!(by >= 0) || by === Infinity) checkIncrement(this.name, by);
    this.series(labels).value += by;
  }
}

class BoundGauge implements GaugeChild {
  readonly #series: { value: number };
  constructor(series: { value: number }) {
    this.#series = series;
  }
  set(value: number): void {
    this.#series.value = value;
  }
  inc(by = 1): void {
    this.#series.value += by;
  }
  dec(by = 1): void {
    this.#series.value -= by;
  }
  get(): number {
    return this.#series.value;
  }
}

/**
 * A value that goes up and down, e.g. subscribers by state. Often refreshed
 * from state by a {@linkcode Registry.collect} callback.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Gauge } from "./metrics.ts";
 * const subscribers = new Gauge("streamcast_subscribers", "Subscribers by state.");
 * subscribers.set(5, { stream: "trades", state: "live" });
 * subscribers.dec({ stream: "trades", state: "live" });
 * equal(subscribers.get({ state: "live", stream: "trades" }), 4);
 * ```
 */
export class Gauge extends ValueMetric<GaugeChild> {
  /** Makes a gauge; throws `TypeError` if `name` is not a valid metric name. */
  constructor(name: string, help: string) {
    super(name, help, "gauge", (series) => new BoundGauge(series));
  }

  /** Sets the series of `labels` to `value`. */
  set(value: number, labels?: Labels): void {
    this.series(labels).value = value;
  }

  /** Adds `by` (default 1) to the series of `labels`. */
  inc(labels?: Labels, by = 1): void {
    this.series(labels).value += by;
  }

  /** Subtracts `by` (default 1) from the series of `labels`. */
  dec(labels?: Labels, by = 1): void {
    this.series(labels).value -= by;
  }
}

interface HistogramSeries extends Series {
  // Per bucket, not cumulative; the last slot is the +Inf bucket.
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

function observeInto(bounds: Float64Array, series: HistogramSeries, value: number): void {
  let i = 0;
  const n = bounds.length;
  // `!(value <= bound)` rather than `value > bound` so NaN lands in +Inf.
  while (i < n && !(value <= bounds[i])) i++;
  series.counts[i]++;
  series.sum += value;
  series.count++;
}

function snapshot(series: HistogramSeries): HistogramSnapshot {
  const buckets: number[] = [];
  let total = 0;
  for (const c of series.counts) buckets.push(total += c);
  return { count: series.count, sum: series.sum, buckets };
}

class BoundHistogram implements HistogramChild {
  readonly #bounds: Float64Array;
  readonly #series: HistogramSeries;
  constructor(bounds: Float64Array, series: HistogramSeries) {
    this.#bounds = bounds;
    this.#series = series;
  }
  observe(value: number): void {
    observeInto(this.#bounds, this.#series, value);
  }
  get(): HistogramSnapshot {
    return snapshot(this.#series);
  }
}

/**
 * Observations counted into fixed buckets given at creation, rendered as
 * cumulative `_bucket{le="…"}` lines ending with `le="+Inf"`, then `_sum` and
 * `_count`. The label name `le` is reserved.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Histogram } from "./metrics.ts";
 * const fsync = new Histogram("streamcast_fsync_seconds", "Fsync latency.", [0.001, 0.01, 0.1]);
 * fsync.observe(0.004, { stream: "trades" });
 * fsync.observe(0.2, { stream: "trades" });
 * deepStrictEqual(fsync.get({ stream: "trades" }).buckets, [0, 1, 1, 2]);
 * ```
 */
export class Histogram {
  /** The metric name. */
  readonly name: string;
  /** The `# HELP` text. */
  readonly help: string;
  /** The bucket upper bounds, strictly increasing, without the implicit `+Inf`. */
  readonly buckets: readonly number[];
  readonly #bounds: Float64Array;
  readonly #series: SeriesMap<HistogramSeries>;

  /**
   * Makes a histogram; throws `TypeError` for an invalid name and `RangeError`
   * unless `buckets` are finite and strictly increasing (a trailing `Infinity`
   * is dropped: `+Inf` is always there).
   */
  constructor(name: string, help: string, buckets: number[]) {
    checkMetricName(name);
    const bounds = buckets.at(-1) === Infinity ? buckets.slice(0, -1) : buckets.slice();
    for (let i = 0; i < bounds.length; i++) {
      if (!Number.isFinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
        throw new RangeError(
          `Cannot create histogram ${name}: buckets must be finite and strictly increasing, ` +
            `got [${buckets.join(", ")}]`,
        );
      }
    }
    this.name = name;
    this.help = help;
    this.buckets = Object.freeze(bounds);
    this.#bounds = Float64Array.from(bounds);
    const slots = bounds.length + 1;
    this.#series = new SeriesMap(
      name,
      (labels) => ({ labels, counts: new Float64Array(slots), sum: 0, count: 0 }),
      "le",
    );
    SAMPLES.set(this, () => this.#samples());
  }

  /** Records one observation in the series of `labels`. */
  observe(value: number, labels?: Labels): void {
    observeInto(this.#bounds, this.#series.get(labels), value);
  }

  /** The count, sum and cumulative buckets of the series of `labels` (zeros if never touched). */
  get(labels?: Labels): HistogramSnapshot {
    const series = this.#series.find(labels, false);
    if (series !== undefined) return snapshot(series);
    return { count: 0, sum: 0, buckets: new Array(this.buckets.length + 1).fill(0) };
  }

  /** The series of `labels`, bound once for a hot path. */
  labels(labels: Labels): HistogramChild {
    return new BoundHistogram(this.#bounds, this.#series.get(labels));
  }

  /** This metric in the text exposition format, ending with a newline. */
  render(): string {
    return header(this.name, this.help, "histogram") + this.#samples();
  }

  /** Removes every series whose label `label` is `value`; returns how many. */
  forget(label: string, value: string): number {
    return this.#series.drop(label, value);
  }

  #samples(): string {
    const name = this.name;
    const les = this.buckets.map((b) => 'le="' + formatNumber(b) + '"');
    les.push('le="+Inf"');
    let out = "";
    for (const s of this.#series.series()) {
      const open = s.labels === "" ? "{" : s.labels.slice(0, -1) + ",";
      let total = 0;
      for (let i = 0; i < les.length; i++) {
        total += s.counts[i];
        out += name + "_bucket" + open + les[i] + "} " + formatNumber(total) + "\n";
      }
      out += name + "_sum" + s.labels + " " + formatNumber(s.sum) + "\n";
      out += name + "_count" + s.labels + " " + formatNumber(s.count) + "\n";
    }
    return out;
  }
}

/**
 * `count` bucket bounds starting at `start`, each `factor` times the previous,
 * for {@linkcode Histogram}.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { exponentialBuckets } from "./metrics.ts";
 * deepStrictEqual(exponentialBuckets(0.001, 2, 4), [0.001, 0.002, 0.004, 0.008]);
 * ```
 */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  if (!(start > 0) || !(factor > 1) || !Number.isInteger(count) || count < 1) {
    throw new RangeError(
      `Cannot make exponential buckets from start ${start}, factor ${factor}, count ${count}: ` +
        `need start > 0, factor > 1 and an integer count ≥ 1`,
    );
  }
  const out: number[] = [];
  for (let i = 0, b = start; i < count; i++, b *= factor) out.push(Number(b.toPrecision(12)));
  return out;
}

/** Any metric a {@linkcode Registry} holds. */
export type Metric = Counter | Gauge | Histogram;

/**
 * A set of metrics rendered together. Asking again for a name already
 * registered with the same kind returns the existing metric, so independent
 * modules can share one; a different kind (or other histogram buckets) throws
 * `TypeError`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { CONTENT_TYPE, Registry } from "./metrics.ts";
 * const registry = new Registry();
 * const live = registry.gauge("streamcast_subscribers", "Subscribers by state.");
 * let subscribers = 0;
 * registry.collect(() => live.set(subscribers, { state: "live" }));
 * subscribers = 7;
 * const response = new Response(registry.render(), { headers: { "content-type": CONTENT_TYPE } });
 * equal((await response.text()).includes('streamcast_subscribers{state="live"} 7'), true);
 * ```
 */
export class Registry {
  readonly #metrics = new Map<string, Metric>();
  readonly #collectors = new Set<() => void>();
  readonly #included = new Set<Registry>();

  /** The counter called `name`, created if new. */
  counter(name: string, help: string): Counter {
    const found = this.#existing(name, Counter);
    if (found) return found;
    const metric = new Counter(name, help);
    this.#metrics.set(name, metric);
    return metric;
  }

  /** The gauge called `name`, created if new. */
  gauge(name: string, help: string): Gauge {
    const found = this.#existing(name, Gauge);
    if (found) return found;
    const metric = new Gauge(name, help);
    this.#metrics.set(name, metric);
    return metric;
  }

  /** The histogram called `name` with `buckets`, created if new. */
  histogram(name: string, help: string, buckets: number[]): Histogram {
    const found = this.#existing(name, Histogram);
    if (found) {
      const want = new Histogram(name, help, buckets).buckets;
      if (!sameBuckets(want, found.buckets)) {
        throw new TypeError(
          `Cannot register histogram ${name} with buckets [${want.join(", ")}]: ` +
            `it exists with buckets [${found.buckets.join(", ")}]`,
        );
      }
      return found;
    }
    const metric = new Histogram(name, help, buckets);
    this.#metrics.set(name, metric);
    return metric;
  }

  /**
   * Runs `fn` at the start of every {@linkcode Registry.render}, e.g. to
   * refresh gauges computed from state. Callbacks run in registration order;
   * one that throws makes `render` throw. Returns a function that removes it.
   */
  collect(fn: () => void): () => void {
    this.#collectors.add(fn);
    return () => {
      this.#collectors.delete(fn);
    };
  }

  /**
   * Renders `other`'s metrics with this registry's, as long as it stays
   * included: its collectors run, and a metric of the same name becomes one
   * family (one `# HELP`/`# TYPE`, this registry's first, then each included
   * registry's series in inclusion order). This is how every stream's
   * series (a registry per stream, made with the stream) appear in the
   * server's `/_/metrics`. A metric of the same name must be of the same kind
   * (and buckets), else `TypeError` here or at render. Returns a function that
   * removes it.
   *
   * @example
   * ```ts
   * import { equal } from "node:assert/strict";
   * import { Registry } from "./metrics.ts";
   * const server = new Registry();
   * const a = new Registry();
   * const b = new Registry();
   * a.counter("rows_total", "Rows.").inc({ stream: "a" }, 2);
   * b.counter("rows_total", "Rows.").inc({ stream: "b" }, 3);
   * server.include(a);
   * server.include(b);
   * equal(
   *   server.render(),
   *   '# HELP rows_total Rows.\n# TYPE rows_total counter\nrows_total{stream="a"} 2\nrows_total{stream="b"} 3\n',
   * );
   * ```
   */
  include(other: Registry): () => void {
    if (other === this || other.#included.size > 0) {
      throw new TypeError(
        "Cannot include a registry in itself, or one that includes others (one level only)",
      );
    }
    this.#families([other]);
    this.#included.add(other);
    return () => {
      this.#included.delete(other);
    };
  }

  /**
   * Removes, from every metric of this registry, the series whose label
   * `label` is `value` — what a stream deleted at runtime leaves behind.
   * Returns how many series were removed.
   *
   * @example
   * ```ts
   * import { equal } from "node:assert/strict";
   * import { Registry } from "./metrics.ts";
   * const r = new Registry();
   * const rows = r.counter("rows_total", "Rows.");
   * rows.inc({ stream: "a" });
   * rows.inc({ stream: "b" });
   * equal(r.forget("stream", "a"), 1);
   * equal(r.render().includes('stream="a"'), false);
   * equal(rows.get({ stream: "b" }), 1);
   * ```
   */
  forget(label: string, value: string): number {
    let dropped = 0;
    for (const metric of this.#metrics.values()) dropped += metric.forget(label, value);
    return dropped;
  }

  /** Every metric in registration order, in the text exposition format. */
  render(): string {
    for (const fn of this.#collectors) fn();
    if (this.#included.size === 0) {
      let out = "";
      for (const metric of this.#metrics.values()) out += metric.render();
      return out;
    }
    const included = [...this.#included];
    for (const r of included) for (const fn of r.#collectors) fn();
    let out = "";
    for (const family of this.#families(included).values()) {
      out += header(family[0].name, family[0].help, kindOf(family[0]));
      for (const metric of family) out += SAMPLES.get(metric)!();
    }
    return out;
  }

  // This registry's metrics and those of `others`, grouped by name in
  // registration order; throws when one name has two kinds.
  #families(others: readonly Registry[]): Map<string, Metric[]> {
    const out = new Map<string, Metric[]>();
    for (const r of [this, ...this.#included, ...others]) {
      for (const [name, metric] of r.#metrics) {
        const family = out.get(name);
        if (family === undefined) {
          out.set(name, [metric]);
          continue;
        }
        const first = family[0];
        if (
          kindOf(first) !== kindOf(metric) ||
          (first instanceof Histogram && !sameBuckets(first.buckets, (metric as Histogram).buckets))
        ) {
          throw new TypeError(
            `Cannot render ${kindOf(metric)} ${name} with the ${kindOf(first)} of that name ` +
              `of another registry: one name, one kind (and one set of buckets)`,
          );
        }
        if (!family.includes(metric)) family.push(metric);
      }
    }
    return out;
  }

  #existing<T extends Metric>(
    name: string,
    kind: new (name: string, help: string, buckets: number[]) => T,
  ): T | undefined {
    const found = this.#metrics.get(name);
    if (found === undefined) return undefined;
    if (!(found instanceof kind)) {
      throw new TypeError(
        `Cannot register ${kind.name.toLowerCase()} ${name}: ` +
          `it is already registered as a ${found.constructor.name.toLowerCase()}`,
      );
    }
    return found;
  }
}

function kindOf(metric: Metric): "counter" | "gauge" | "histogram" {
  return metric instanceof Counter ? "counter" : metric instanceof Gauge ? "gauge" : "histogram";
}

function sameBuckets(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function header(name: string, help: string, type: string): string {
  return "# HELP " + name + " " + escapeHelp(help) + "\n# TYPE " + name + " " + type + "\n";
}

function renderValues(name: string, series: SeriesMap<ValueSeries>): string {
  let out = "";
  for (const s of series.series()) out += name + s.labels + " " + formatNumber(s.value) + "\n";
  return out;
}

function escapeHelp(help: string): string {
  return /[\\\n]/.test(help) ? help.replace(/[\\\n]/g, (c) => c === "\n" ? "\\n" : "\\\\") : help;
}
