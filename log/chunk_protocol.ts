/**
 * The messages between a log (on the writer's thread) and the chunk worker.
 * Nothing else passes between them: the worker owns the manifest and chunk
 * files, the log owns the segments.
 *
 * @module
 */

import type { Manifest } from "./chunk.ts";

/** How a log's chunks are kept. */
export interface ChunkPolicy {
  /** How many adjacent chunks of one size class are merged into one. @default 4 */
  fanIn: number;
  /** Largest chunk a merge may make, compressed bytes. @default 256 MiB */
  maxChunkBytes: number;
  /** How long a chunk replaced by a merge stays readable, ms. @default 15 min */
  graceMs: number;
  /** Drop the oldest chunks while their total exceeds this (null: keep all). */
  retainBytes: number | null;
  /** Drop chunks whose last row is older than this, ms (null: keep all). */
  retainAgeMs: number | null;
}

/** A sealed segment to turn into a chunk. */
export interface SealedSegment {
  /** Its path. */
  path: string;
  /** Its first offset. */
  firstOffset: number;
  /** Its number of records. */
  count: number;
}

/** Messages to the worker. */
export type ToWorker =
  | { type: "open"; dir: string; stream: string; streamId: string; policy: ChunkPolicy }
  | { type: "seal"; dir: string; segment: SealedSegment; nowUs: number }
  | { type: "maintain"; dir: string; nowUs: number }
  | { type: "policy"; dir: string; policy: ChunkPolicy }
  | { type: "sync"; dir: string; id: number }
  | { type: "close"; dir: string };

/** Messages from the worker. */
export type FromWorker =
  | { type: "manifest"; dir: string; manifest: Manifest }
  | { type: "chunked"; dir: string; segmentPath: string; sha256: string | null }
  | { type: "synced"; dir: string; id: number }
  | { type: "closed"; dir: string }
  | { type: "error"; dir: string; message: string };
