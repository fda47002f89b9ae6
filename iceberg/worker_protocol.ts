/**
 * The messages between the streams' tables (on the writer's thread) and the
 * Iceberg worker, which does the table's work — reading chunks, writing
 * Parquet, committing — off that thread. One worker serves every table of a
 * process; a table is named by its log folder.
 *
 * @module
 */

import type { ArchiveOptions } from "../common/s3.ts";

/**
 * Where a table lives and what it takes.
 */
export interface TableSpec {
  /** The log folder (the table is `DIR/iceberg` without an archive). */
  dir: string;
  /** The stream's name. */
  stream: string;
  /** The log's stream id. */
  streamId: string;
  /** The log's archive: the table is `ARCHIVE/NAME/iceberg` with one. */
  archive: ArchiveOptions | null;
  /** Rows (bytes as stored) per commit at most. */
  maxCommitBytes: number;
  /**
   * Ask the writer's thread before each commit (`may-commit`) whether this
   * process may still make it: a cluster's leader, whose leadership can end
   * at any moment. @default false
   */
  guarded?: boolean;
}

/**
 * How far a table has got.
 */
export interface TableState {
  /** The table's location (an absolute URI). */
  location: string;
  /** The last offset the table holds (0: none; -1: not read yet). */
  lastOffset: number;
  /** The table's current version (0: not read yet). */
  version: number;
  /** Commits made by this process. */
  commits: number;
  /** Rows committed by this process. */
  rows: number;
  /** When the last commit was made, ms since the epoch (0: none yet). */
  lastCommitMs: number;
  /** Failed attempts so far. */
  errors: number;
  /** The last failure, or null after a success. */
  lastError: string | null;
}

/**
 * Messages to the worker.
 */
export type ToIcebergWorker =
  | { type: "open"; spec: TableSpec }
  | { type: "kick"; dir: string }
  | { type: "close"; dir: string; waitMs: number }
  | { type: "may-commit"; dir: string; id: number; ok: boolean };

/**
 * Messages from the worker (`failed` is made on the writer's thread when the
 * worker itself dies: every table it held is let go). `may-commit` asks a
 * guarded table's thread whether the commit about to be made may be made; the
 * answer comes back as the `may-commit` message to the worker with the same id.
 */
export type FromIcebergWorker =
  | { type: "state"; dir: string; state: TableState }
  | { type: "failed"; dir: string; message: string }
  | { type: "may-commit"; dir: string; id: number }
  | { type: "closed"; dir: string };
