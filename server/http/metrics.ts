/**
 * The server's own series (requests, refusals, denials, connections, replay
 * reads, memory) in the server's {@linkcode Registry}, and `GET /_/metrics`,
 * which renders that registry with every stream's series included.
 *
 * @module
 */

import {
  CONTENT_TYPE,
  type Counter,
  type CounterChild,
  type Gauge,
  type Registry,
} from "../metrics.ts";
import { declareStreamMetrics } from "../stream/stream_metrics.ts";
import type { Gate } from "../fanout/replay_gate.ts";
import type { SendBudget } from "../fanout/send_budget.ts";
import { BackgroundService } from "../../common/background_thread.ts";
import { mallocInfo } from "../malloc_info.ts";

/** Routes counted in `streamcast_http_requests_total{route}`. */
export type RouteName =
  | "health"
  | "viewer"
  | "upgrade"
  | "metrics"
  | "streams"
  | "head"
  | "at"
  | "latest"
  | "manifest"
  | "chunk"
  | "dictionary"
  | "publish"
  | "replicate"
  | "admin";

/** Why access control denied a request. */
export type DenyWhy = "missing_token" | "invalid_token" | "bad_request" | "forbidden";

/**
 * The server's series, each child bound on first use.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { Registry } from "../metrics.ts";
 * import { Gate } from "../fanout/replay_gate.ts";
 * import { ServerMetrics } from "./metrics.ts";
 * const m = new ServerMetrics(new Registry(), new Gate(4));
 * m.request("head");
 * ok(m.registry.render().includes('streamcast_http_requests_total{route="head"} 1'));
 * ```
 */
export class ServerMetrics {
  /** The registry behind `/_/metrics`. */
  readonly registry: Registry;
  readonly #requests: (route: string) => CounterChild;
  readonly #protocol: (code: string) => CounterChild;
  readonly #limits: (limit: string) => CounterChild;
  readonly #denials: (why: string) => CounterChild;
  readonly #connections: Gauge;

  /** Registers the server's series in `registry`, then the stream families (empty until included). */
  constructor(registry: Registry, replayGate: Gate, sendBudget?: SendBudget) {
    this.registry = registry;
    const r = registry;
    this.#requests = bindOnUse(
      r.counter("streamcast_http_requests_total", "HTTP requests, by route."),
      "route",
    );
    this.#protocol = bindOnUse(
      r.counter(
        "streamcast_protocol_refusals_total",
        "Subscribes refused before reaching a stream (4400, 4404, 1013).",
      ),
      "code",
    );
    this.#limits = bindOnUse(
      r.counter(
        "streamcast_limit_refusals_total",
        "Requests refused by a server limit (max_connections, open_files, max_url_bytes, max_replica_links).",
      ),
      "limit",
    );
    this.#denials = bindOnUse(
      r.counter(
        "streamcast_auth_denials_total",
        "Requests denied by access control, by why (missing_token, invalid_token, bad_request, " +
          "forbidden).",
      ),
      "why",
    );
    this.#connections = r.gauge(
      "streamcast_connections",
      "WebSocket connections open (subscribers, and refused ones still closing).",
    );
    const replayReads = r.gauge(
      "streamcast_replay_reads",
      "Log reads for catching-up subscribers, in flight (active) and waiting their turn (waiting).",
    );
    const memory = r.gauge(
      "streamcast_process_memory_bytes",
      "Memory of the server process: resident (RSS), the JavaScript heap of the main thread " +
        "(heap_total, heap_used) and outside it (external); the same of the background thread " +
        "while it runs the chunk worker or the Iceberg worker (background_heap_total, " +
        "background_heap_used, background_external); and glibc malloc's own account, where it " +
        "can be read: what its arenas hold (malloc_arenas), of it in use (malloc_in_use) and " +
        "free (malloc_free), and allocations mapped on their own (malloc_mmapped).",
    );
    const buffered = sendBudget
      ? r.gauge(
        "streamcast_send_buffered_bytes",
        "Bytes handed to subscribers' sockets and not yet written (their bufferedAmount), " +
          "all streams together; bounded by about send_buffer_bytes.",
      )
      : null;
    // Streams' families next, so that they render in this order whatever streams are served.
    declareStreamMetrics(r);
    r.collect(() => {
      replayReads.set(replayGate.active, { state: "active" });
      replayReads.set(replayGate.waiting, { state: "waiting" });
      const m = Deno.memoryUsage();
      memory.set(m.rss, { kind: "resident" });
      memory.set(m.heapTotal, { kind: "heap_total" });
      memory.set(m.heapUsed, { kind: "heap_used" });
      memory.set(m.external, { kind: "external" });
      const b = BackgroundService.memory();
      if (b !== null) {
        memory.set(b.heapTotal, { kind: "background_heap_total" });
        memory.set(b.heapUsed, { kind: "background_heap_used" });
        memory.set(b.external, { kind: "background_external" });
      }
      const c = mallocInfo();
      if (c !== null) {
        memory.set(c.arenas, { kind: "malloc_arenas" });
        memory.set(c.inUse, { kind: "malloc_in_use" });
        memory.set(c.free, { kind: "malloc_free" });
        memory.set(c.mmapped, { kind: "malloc_mmapped" });
      }
      buffered?.set(sendBudget!.buffered());
    });
  }

  /** Counts a request to `route`. */
  request(route: RouteName): void {
    this.#requests(route).inc();
  }

  /**
   * Counts a subscribe refused before reaching a stream (`code` 4400 or
   * 4404, or 1013 for a stream opening again here).
   */
  protocolRefusal(code: 4400 | 4404 | 1013): void {
    this.#protocol(String(code)).inc();
  }

  /** Counts a request refused by a server limit. */
  limitRefusal(
    limit: "max_connections" | "open_files" | "max_url_bytes" | "max_replica_links",
  ): void {
    this.#limits(limit).inc();
  }

  /** Counts a request denied by access control. */
  denial(why: DenyWhy): void {
    this.#denials(why).inc();
  }

  /** Sets the number of WebSocket connections open. */
  connections(n: number): void {
    this.#connections.set(n);
  }
}

// The child of `counter` for each value of `label`, bound the first time it is counted.
function bindOnUse(counter: Counter, label: string): (value: string) => CounterChild {
  const children = new Map<string, CounterChild>();
  return (value) => {
    let child = children.get(value);
    if (child === undefined) children.set(value, child = counter.labels({ [label]: value }));
    return child;
  };
}

/**
 * `GET /_/metrics`: the registry in the Prometheus text format.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Registry } from "../metrics.ts";
 * import { metricsResponse } from "./metrics.ts";
 * const r = new Registry();
 * r.counter("x_total", "X.").inc();
 * equal((await metricsResponse(r).text()).endsWith("x_total 1\n"), true);
 * ```
 */
export function metricsResponse(registry: Registry): Response {
  return new Response(registry.render(), { headers: { "content-type": CONTENT_TYPE } });
}
