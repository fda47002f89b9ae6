/**
 * The messages between a log (on the writer's thread) and the chunk worker.
 * Nothing else passes between them (but the worker's report of its own
 * memory): the worker owns the manifest and chunk files, the log owns the
 * segments.
 *
 * @module
 */

import type { ChunkEntry, Manifest } from "./chunk.ts";
import type { ArchiveOptions } from "./archive.ts";

/** How a log's chunks are kept. */
export interface ChunkPolicy {
  /** How many adjacent chunks of one size class are merged into one. @default 4 */
  fanIn: number;
  /**
   * Largest chunk a merge may make, compressed bytes; with `retainBytes` or
   * `retainAgeMs` set, a merge is held smaller still (`merge_plan.ts`).
   * @default 256 MiB
   */
  maxChunkBytes: number;
  /**
   * How long a chunk replaced by a merge stays readable, ms; with
   * `retainAgeMs`, no longer than that keeps its rows. @default 15 min
   */
  graceMs: number;
  /** Drop the oldest chunks while their total exceeds this (null: keep all). */
  retainBytes: number | null;
  /** Drop chunks whose last row is older than this, ms (null: keep all). */
  retainAgeMs: number | null;
  /** Archive chunks and the manifest to S3 (null: no archive). */
  archive: ArchiveOptions | null;
  /**
   * A replica's chunks (a mirror's): the worker makes no chunks of its own
   * and merges none — its chunks are the primary's, adopted — and applies
   * retention only. @default false
   */
  replica?: boolean;
  /**
   * A cluster's replicated log (docs/SPEC.md §11.12): the term this node
   * leads, whose number each manifest it uploads carries, or null while it
   * does not lead (nothing is uploaded). Absent: not a cluster's log; the
   * archive takes every manifest.
   */
  archiveTerm?: number | null;
}

/** How far the archive has got. */
export interface ArchiveState {
  /** The archive URI. */
  uri: string;
  /** Last offset the archived manifest covers (0: none). */
  through: number;
  /** The archived manifest (archive-only history first, then the local chunks). */
  manifest: Manifest | null;
  /** Chunks uploaded by this process. */
  uploadedChunks: number;
  /** Bytes uploaded by this process. */
  uploadedBytes: number;
  /** Failed attempts so far. */
  errors: number;
  /** The last failure, or null after a success. */
  lastError: string | null;
  /** When the archive last caught up with the local manifest, µs (0: never). */
  syncedUs: number;
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
  // A replica adopts chunks whose files (checked) are in place: see adoption.ts.
  | { type: "adopt"; dir: string; chunks: ChunkEntry[]; nowUs: number }
  | { type: "close"; dir: string; archiveWaitMs?: number };

/** Messages from the worker. */
export type FromWorker =
  | { type: "manifest"; dir: string; manifest: Manifest }
  | { type: "chunked"; dir: string; segmentPath: string; sha256: string | null }
  | { type: "synced"; dir: string; id: number }
  | { type: "archive"; dir: string; state: ArchiveState }
  // Retention dropped these rows and bytes of chunks (the oldest).
  | { type: "retained"; dir: string; rows: number; bytes: number }
  | { type: "closed"; dir: string }
  // `stopped`: made on the writer's thread when the worker's thread itself
  // stopped (`client.ts`): nothing asked of it will be answered.
  | { type: "error"; dir: string; message: string; stopped?: true };
