/**
 * A stream's series for `/_/metrics`, in a {@linkcode Registry} of its own
 * that the server includes in its registry (see `Registry.include`).
 *
 * Every series of the hot path (commit, fan-out, catch-up sends) is bound
 * once, when the stream is made, so counting is a field update: no label
 * lookup, no allocation per row or per subscriber. Drops and refusals are
 * rare; their series are bound the first time a reason is seen.
 *
 * @module
 */

import {
  type Counter,
  type CounterChild,
  type Gauge,
  type Histogram,
  type HistogramChild,
  Registry,
} from "../metrics.ts";

// Commit (write + sync) latency buckets, in seconds: 0.1 ms to 1 s.
const COMMIT_BUCKETS_S: number[] = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000]
  .map((ms) => ms / 1000);

/**
 * A snapshot of a stream's counters (what `/_/metrics` serves for it).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Stream, type StreamStats } from "./stream.ts";
 * const s = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const stats: StreamStats = s.stats;
 * equal(stats.rowsAppended, 0);
 * ```
 */
export interface StreamStats {
  /** Rows made durable (or sent, on an ephemeral stream). */
  rowsAppended: number;
  /** Log commits. */
  commits: number;
  /** Frames sent to subscribers. */
  framesSent: number;
  /** Bytes of frame text sent. */
  bytesSent: number;
  /** Rows sent from the log to catching-up subscribers. */
  replayRows: number;
  /** Rows refused by the schema. */
  rowsRejected: number;
  /** Subscribers dropped or demoted, by reason. */
  drops: Record<string, number>;
  /** Subscribes refused, by why. */
  refusals: Record<string, number>;
  /** Subscribes accepted. */
  subscribes: number;
}

/** What a stream's registry asks of the stream at each render. */
export interface StreamMetricsSource {
  /** Subscribers in each state now. */
  subscriberStates(): { catching_up: number; live: number };
  /** The log's end, or null when the stream is ephemeral. */
  readonly endOffset: number | null;
  /** Why the stream takes no rows (its disk is full), or null while it takes them. */
  readonly diskFull?: string | null;
  /**
   * A durable stream's local history: bytes on disk, and the rows retention
   * dropped since it opened (absent: ephemeral).
   */
  history?(): { bytes: number; droppedRows: number };
}

/**
 * Declares the stream metric families in `registry`, in the order they are
 * rendered (a server declares them so that its output has them, in this
 * order, whatever streams it serves).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Registry } from "../metrics.ts";
 * import { declareStreamMetrics } from "./stream_metrics.ts";
 * const r = new Registry();
 * declareStreamMetrics(r);
 * equal(r.render().startsWith("# HELP streamcast_rows_appended_total"), true);
 * ```
 */
export function declareStreamMetrics(registry: Registry): {
  rowsAppended: Counter;
  rowsRejected: Counter;
  commits: Counter;
  framesSent: Counter;
  bytesSent: Counter;
  replayRows: Counter;
  subscribes: Counter;
  subscribers: Gauge;
  drops: Counter;
  refusals: Counter;
  endOffset: Gauge;
  commitSeconds: Histogram;
  zstdFrames: Counter;
  zstdBytes: Counter;
  keys: Gauge;
  keysRefused: Counter;
  takesRows: Gauge;
  historyBytes: Gauge;
  retentionRows: Counter;
} {
  const c = (name: string, help: string) => registry.counter(name, help);
  const families = {
    rowsAppended: c(
      "streamcast_rows_appended_total",
      "Rows made durable (sent, on ephemeral streams).",
    ),
    rowsRejected: c("streamcast_rows_rejected_total", "Rows refused by the stream's schema."),
    commits: c("streamcast_commits_total", "Log commits (one write and one sync each)."),
    framesSent: c("streamcast_frames_sent_total", "WebSocket frames sent."),
    bytesSent: c("streamcast_bytes_sent_total", "Bytes of frame text sent."),
    replayRows: c(
      "streamcast_replay_rows_total",
      "Rows sent from the log to catching-up subscribers.",
    ),
    subscribes: c("streamcast_subscribes_total", "Subscribes accepted."),
    subscribers: registry.gauge("streamcast_subscribers", "Subscribers connected, by state."),
    drops: c(
      "streamcast_drops_total",
      "Subscribers dropped (backlog, stalled) or sent back to the log (to_catch_up), by reason.",
    ),
    refusals: c("streamcast_refusals_total", "Subscribes refused, by why."),
    endOffset: registry.gauge("streamcast_end_offset", "The next offset to be written."),
    commitSeconds: registry.histogram(
      "streamcast_commit_seconds",
      "Duration of a log commit (write + syncData).",
      COMMIT_BUCKETS_S,
    ),
    zstdFrames: c(
      "streamcast_zstd_frames_total",
      "zstd frames compressed (compress=zstd), by path: live (once per commit, shared by " +
        "every subscriber) or replay (once per catch-up read).",
    ),
    zstdBytes: c(
      "streamcast_zstd_bytes_total",
      "Bytes into (side=text) and out of (side=zstd) zstd compression, by path.",
    ),
    keys: registry.gauge("streamcast_keys", "Keys a keyed stream keeps (its latest row each)."),
    keysRefused: c(
      "streamcast_keys_refused_total",
      "Rows of a new key a keyed stream did not add: it keeps --max-keys keys already.",
    ),
    takesRows: registry.gauge(
      "streamcast_stream_takes_rows",
      "1 while a durable stream takes rows, 0 while its disk is full.",
    ),
    historyBytes: registry.gauge(
      "streamcast_log_bytes",
      "Bytes of local history a durable stream holds (segments and chunks).",
    ),
    retentionRows: c(
      "streamcast_retention_dropped_rows_total",
      "Rows of local history retention dropped (--retain-age, --retain-bytes).",
    ),
  };
  return families;
}

/**
 * The series of one stream, bound for the hot path.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { StreamMetrics } from "./stream_metrics.ts";
 * const m = new StreamMetrics("trades", {
 *   subscriberStates: () => ({ catching_up: 0, live: 2 }),
 *   endOffset: 10,
 * });
 * m.rowsAppended.inc(3);
 * m.dropped("stalled");
 * ok(m.registry.render().includes('streamcast_subscribers{state="live",stream="trades"} 2'));
 * ```
 */
export class StreamMetrics {
  /** The stream's own registry (the server includes it in its own). */
  readonly registry: Registry = new Registry();
  /** Rows made durable (sent, on an ephemeral stream). */
  readonly rowsAppended: CounterChild;
  /** Rows refused by the schema (or too big for the log). */
  readonly rowsRejected: CounterChild;
  /** Log commits. */
  readonly commits: CounterChild;
  /** Frames sent to subscribers. */
  readonly framesSent: CounterChild;
  /** Bytes of frame text sent. */
  readonly bytesSent: CounterChild;
  /** Rows sent from the log to catching-up subscribers. */
  readonly replayRows: CounterChild;
  /** Subscribes accepted. */
  readonly subscribes: CounterChild;
  /** Commit durations in seconds; null on an ephemeral stream. */
  readonly commitSeconds: HistogramChild | null;
  /** compress=: frames compressed, and bytes in and out, per path. */
  readonly zstd: Record<
    "live" | "replay",
    { frames: CounterChild; text: CounterChild; zstd: CounterChild }
  >;
  readonly #labels: { stream: string };
  readonly #f: ReturnType<typeof declareStreamMetrics>;
  readonly #drops: Counter;
  readonly #refusals: Counter;
  readonly #dropsBy = new Map<string, CounterChild>();
  readonly #refusalsBy = new Map<string, CounterChild>();

  /** Binds the series of stream `name`; gauges are read from `source` at each render. */
  constructor(name: string, source: StreamMetricsSource) {
    const f = this.#f = declareStreamMetrics(this.registry);
    const labels = this.#labels = { stream: name };
    this.rowsAppended = f.rowsAppended.labels(labels);
    this.rowsRejected = f.rowsRejected.labels(labels);
    this.commits = f.commits.labels(labels);
    this.framesSent = f.framesSent.labels(labels);
    this.bytesSent = f.bytesSent.labels(labels);
    this.replayRows = f.replayRows.labels(labels);
    this.subscribes = f.subscribes.labels(labels);
    const zstd = (path: string) => ({
      frames: f.zstdFrames.labels({ stream: name, path }),
      text: f.zstdBytes.labels({ stream: name, path, side: "text" }),
      zstd: f.zstdBytes.labels({ stream: name, path, side: "zstd" }),
    });
    this.zstd = { live: zstd("live"), replay: zstd("replay") };
    const catchingUp = f.subscribers.labels({ stream: name, state: "catching_up" });
    const live = f.subscribers.labels({ stream: name, state: "live" });
    this.#drops = f.drops;
    this.#refusals = f.refusals;
    const durable = source.endOffset !== null;
    const endOffset = durable ? f.endOffset.labels(labels) : null;
    this.commitSeconds = durable ? f.commitSeconds.labels(labels) : null;
    const takesRows = durable ? f.takesRows.labels(labels) : null;
    const historyBytes = durable ? f.historyBytes.labels(labels) : null;
    const retentionRows = durable ? f.retentionRows.labels(labels) : null;
    let droppedSeen = 0;
    this.registry.collect(() => {
      const states = source.subscriberStates();
      catchingUp.set(states.catching_up);
      live.set(states.live);
      const end = source.endOffset;
      if (endOffset !== null && end !== null) endOffset.set(end);
      takesRows?.set(source.diskFull ? 0 : 1);
      const h = durable ? source.history?.() : undefined;
      if (h !== undefined) {
        historyBytes!.set(h.bytes);
        retentionRows!.inc(Math.max(0, h.droppedRows - droppedSeen));
        droppedSeen = Math.max(droppedSeen, h.droppedRows);
      }
    });
  }

  /**
   * A keyed stream's series: the keys it keeps (`keys()`, read at each
   * render); returns the counter of rows of new keys refused.
   */
  keyed(keys: () => number): CounterChild {
    const gauge = this.#f.keys.labels(this.#labels);
    this.registry.collect(() => gauge.set(keys()));
    return this.#f.keysRefused.labels(this.#labels);
  }

  /** Counts frames and bytes sent to subscribers, and the replayed rows among them. */
  sent(frames: number, bytes: number, replayRows: number): void {
    this.framesSent.inc(frames);
    this.bytesSent.inc(bytes);
    this.replayRows.inc(replayRows);
  }

  /** Counts a subscribe accepted. */
  subscribed(): void {
    this.subscribes.inc();
  }

  /** Counts rows made durable (sent, on an ephemeral stream). */
  appended(rows: number): void {
    this.rowsAppended.inc(rows);
  }

  /** Counts a log commit that took `ms`. */
  committed(ms: number): void {
    this.commits.inc();
    this.commitSeconds?.observe(ms / 1000);
  }

  /** Counts a subscriber dropped (or sent back to the log) for `reason`. */
  dropped(reason: string): void {
    this.#child(this.#drops, this.#dropsBy, "reason", reason).inc();
  }

  /** Counts a subscribe refused for `why`. */
  refused(why: string): void {
    this.#child(this.#refusals, this.#refusalsBy, "why", why).inc();
  }

  /** The counters now. */
  snapshot(): StreamStats {
    return {
      rowsAppended: this.rowsAppended.get(),
      commits: this.commits.get(),
      framesSent: this.framesSent.get(),
      bytesSent: this.bytesSent.get(),
      replayRows: this.replayRows.get(),
      rowsRejected: this.rowsRejected.get(),
      drops: counts(this.#dropsBy),
      refusals: counts(this.#refusalsBy),
      subscribes: this.subscribes.get(),
    };
  }

  /** Drops so far, by reason. */
  drops(): Record<string, number> {
    return counts(this.#dropsBy);
  }

  /** Refusals so far, by why. */
  refusals(): Record<string, number> {
    return counts(this.#refusalsBy);
  }

  #child(
    metric: Counter,
    by: Map<string, CounterChild>,
    label: string,
    value: string,
  ): CounterChild {
    let child = by.get(value);
    if (child === undefined) {
      child = metric.labels({ ...this.#labels, [label]: value });
      by.set(value, child);
    }
    return child;
  }
}

function counts(by: Map<string, CounterChild>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, c] of by) out[k] = c.get();
  return out;
}
