/**
 * The series of network publishing, in the server's {@linkcode Registry}:
 * rows published by stream and route, duplicates answered, refusals by
 * reason, producers remembered per stream, and the latency from a publish's
 * arrival to its ack.
 *
 * @module
 */

import type { Counter, Histogram, HistogramChild, Registry } from "../metrics.ts";
import type { Stream } from "../stream/stream.ts";

/**
 * The routes a publish comes by.
 */
export type PublishRoute = "http" | "websocket";

/**
 * Why a publish (or a frame of one) was refused.
 */
export type PublishRefusal =
  | "invalid_row"
  | "forbidden"
  | "invalid_body"
  | "stale_seq"
  | "too_large"
  | "body_timeout"
  | "not_publishable"
  | "bad_request"
  | "unsupported_media_type"
  | "protocol"
  | "too_many_in_flight"
  | "write_failed"
  | "disk_full"
  | "not_leader"
  | "no_leader"
  | "not_enough_replicas";

// Ack latency buckets, seconds: 0.1 ms to 5 s.
const ACK_BUCKETS_S = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000, 5000]
  .map((ms) => ms / 1000);

/**
 * Publishing's series, each child bound on first use.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { Registry } from "../metrics.ts";
 * import { PublishMetrics } from "./publish_metrics.ts";
 * const m = new PublishMetrics(new Registry(), []);
 * m.published("trades", "http", 3);
 * ok(m.registry.render().includes('streamcast_rows_published_total{route="http",stream="trades"} 3'));
 * ```
 */
export class PublishMetrics {
  /** The registry the series are in. */
  readonly registry: Registry;
  readonly #rows: Counter;
  readonly #duplicates: Counter;
  readonly #refusals: Counter;
  readonly #ack: Histogram;
  readonly #acks = new Map<string, HistogramChild>();

  /**
   * Registers the series in `registry`; the producer gauge reads `streams`
   * at each render, the held-bytes gauge `budget` (when given).
   */
  constructor(registry: Registry, streams: Iterable<Stream>, budget?: { readonly used: number }) {
    this.registry = registry;
    this.#rows = registry.counter(
      "streamcast_rows_published_total",
      "Rows stored from network publishers, by stream and route (http, websocket).",
    );
    this.#duplicates = registry.counter(
      "streamcast_publish_duplicates_total",
      "Publishes answered as duplicates of a producer's last seq (nothing stored), by stream.",
    );
    this.#refusals = registry.counter(
      "streamcast_publish_refusals_total",
      "Publishes (bodies, frames, upgrades) refused, by stream and reason.",
    );
    this.#ack = registry.histogram(
      "streamcast_publish_ack_seconds",
      "From a publish's arrival (body read, frame received) to its answer, by route.",
      ACK_BUCKETS_S,
    );
    const producers = registry.gauge(
      "streamcast_producers",
      "Producers remembered for idempotent publishing, by stream.",
    );
    const held = budget === undefined ? null : registry.gauge(
      "streamcast_publish_held_bytes",
      "Bytes of publishing the server holds now (frames taken, POST bodies being read or " +
        "committed), against --max-publish-server-bytes.",
    );
    // Read at each render: streams come and go while serving.
    registry.collect(() => {
      for (const s of streams) {
        if (s.log !== null) producers.set(s.log.producers.size, { stream: s.name });
      }
      held?.set(budget!.used);
    });
  }

  /** Counts `rows` stored in `stream` by `route`. */
  published(stream: string, route: PublishRoute, rows: number): void {
    // Looked up per call (no child kept): a deleted stream's series are dropped.
    this.#rows.inc({ stream, route }, rows);
  }

  /** Counts a duplicate answered. */
  duplicate(stream: string): void {
    this.#duplicates.inc({ stream });
  }

  /** Counts a refusal. */
  refused(stream: string, reason: PublishRefusal): void {
    this.#refusals.inc({ stream, reason });
  }

  /** Records the time from arrival (`t0`, `performance.now()`) to the answer. */
  acked(route: PublishRoute, t0: number): void {
    let h = this.#acks.get(route);
    if (h === undefined) this.#acks.set(route, h = this.#ack.labels({ route }));
    h.observe((performance.now() - t0) / 1000);
  }
}
