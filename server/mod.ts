/**
 * The server: a {@linkcode Stream} (rows in, validated, made durable, then
 * broadcast) and {@linkcode serve}, which serves streams over HTTP and
 * WebSocket on one port; tokens, and the metrics registry `/metrics` shows.
 *
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { serve, Stream } from "./mod.ts";
 * const root = await Deno.makeTempDir();
 * const ticks = await Stream.open("ticks", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([ticks], { port: 0, onListen: () => {} });
 * await ticks.send({ v: 1.5 }); // durable at offset 1
 * const head = await (await fetch(`${server.url}/ticks/head`)).json();
 * equal(head.end_offset, 2); // the next offset to be written
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 *
 * @module
 */

export { serve, type ServedStream, type ServeOptions, type Server } from "./serve.ts";
export {
  type ClusterRefusal,
  type StreamMember,
  type StreamMirror,
  type StreamRole,
} from "./role.ts";
export { Stream } from "./stream/stream.ts";
export { type StreamOptions, type StreamRestoreOptions } from "./stream/stream_options.ts";
export { RowError } from "./stream/row_error.ts";
export { DiskFullError } from "./stream/disk_gate.ts";
export { type Grant, TokenTable, type TokenVerifier } from "./auth.ts";
export {
  type InvalidWhy,
  SignedTokens,
  type SignedTokensOptions,
  type TokenCheck,
} from "./access/signed_tokens.ts";
export {
  Counter,
  type CounterChild,
  exponentialBuckets,
  Gauge,
  type GaugeChild,
  Histogram,
  type HistogramChild,
  type HistogramSnapshot,
  type Labels,
  type Metric,
  Registry,
  ValueMetric,
} from "./metrics.ts";
