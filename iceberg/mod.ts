/**
 * A stream's Apache Iceberg table: the log's sealed chunks committed as
 * Parquet data files (`StreamOptions.iceberg`), by a worker off the writer's
 * thread; {@linkcode IcebergTable} is the stream's link to it.
 *
 * @module
 */

export { IcebergTable } from "./table_link.ts";
export type { IcebergOptions } from "./options.ts";
export type { TableState as IcebergTableState } from "./worker_protocol.ts";
