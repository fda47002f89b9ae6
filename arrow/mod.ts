/**
 * Arrow and Parquet for streamcast: map a stream's schema to Arrow, export any
 * range of a log to Arrow IPC or Parquet that pyarrow, DuckDB and Polars read,
 * and subscribe with `frames=arrow` to receive Arrow record batches.
 *
 * Kept apart from the main entry point because apache-arrow (and, for
 * Parquet, parquet-wasm) are large.
 *
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { toArrow } from "@streamcast/server/arrow";
 * const schema = toArrow({
 *   type: "object",
 *   properties: { price: { type: "number" }, side: { type: "integer", format: "int32" } },
 *   required: ["price", "side"],
 * });
 * deepStrictEqual(schema.fields.map((f) => `${f.name}: ${f.type}`), [
 *   "price: Float64",
 *   "side: Int32",
 * ]);
 * ```
 *
 * @module
 */

export { fromArrow, toArrow } from "./schema.ts";
export {
  EXPORT_FORMATS,
  type ExportFormat,
  exportLog,
  type ExportOptions,
  type ExportProgress,
  type ExportReport,
} from "./export.ts";
export { ArrowFileWriter, type ArrowFileWriterOptions } from "./file_writer.ts";
export {
  type ArrowConnectOptions,
  ArrowFrameDecoder,
  type ArrowSubscription,
  batchRows,
  type BinaryFrame,
  connectArrow,
} from "./subscription.ts";
