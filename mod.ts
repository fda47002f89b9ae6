/**
 * streamcast: a replayable WebSocket multicaster. One feed in, every row
 * appended to a durable segmented log and only then broadcast to any number of
 * subscribers, each frame carrying its offset, so that a subscriber can leave
 * and come back with no gap and no duplicate.
 *
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { connect, serve, Stream } from "@streamcast/server";
 *
 * const trades = await Stream.open("trades", {
 *   root: await Deno.makeTempDir(), // the log lives in ROOT/trades
 *   schema: {
 *     type: "object",
 *     properties: { price: { type: "number" }, side: { type: "integer", format: "int32" } },
 *     required: ["price", "side"],
 *   },
 * });
 * const server = serve([trades], { port: 0, onListen: () => {} });
 * await trades.send({ price: 85565.5, side: 1 }); // durable, then broadcast: offset 1
 *
 * const sub = await connect(`${server.url}/trades`, { offset: 1 });
 * for await (const [offset, msg] of sub) {
 *   equal(offset, 1);
 *   deepStrictEqual(msg, { price: 85565.5, side: 1 });
 *   break;
 * }
 * await server.shutdown();
 * ```
 *
 * @module
 */

export * from "./log/mod.ts";
export * from "./client/mod.ts";
export { serve, type ServeOptions, type Server } from "./server/serve.ts";
export { Stream } from "./server/stream/stream.ts";
export { type StreamOptions, type StreamRestoreOptions } from "./server/stream/stream_options.ts";
export { IcebergTable } from "./iceberg/table_link.ts";
export type { IcebergOptions } from "./iceberg/options.ts";
export type { TableState as IcebergTableState } from "./iceberg/worker_protocol.ts";
export { RowError } from "./server/stream/row_error.ts";
export { type Grant, TokenTable } from "./server/auth.ts";
export {
  type LogFields,
  type LogFormat,
  Logger,
  type LoggerOptions,
  type LogLevel,
} from "./common/logger.ts";
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
} from "./server/metrics.ts";
export { compileSchema } from "./schema/compile.ts";
export type { Column, ColumnType, RowSchema } from "./schema/row_schema.ts";
export { SchemaError } from "./schema/schema_error.ts";
export { FileCursor } from "./client/file_cursor.ts";
