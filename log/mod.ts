/**
 * The durable, segmented log under every streamcast stream: append with group
 * commit, read from any offset, recover from a crash.
 *
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "@streamcast/server/log";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.append(new TextEncoder().encode('{"price":101.5}'));
 * const batch = await log.reader(1).read();
 * equal(batch.count, 1);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 *
 * @module
 */

export {
  DEFAULT_CHUNK_POLICY,
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_SEAL_EVERY_MS,
  DEFAULT_SEGMENT_BYTES,
  LOCK_FILE,
  Log,
  type LogIo,
  type LogOptions,
  type LookupStats,
  META_FILE,
  type ProducerState,
  type ProducerTag,
  type PublishResult,
  type SegmentInfo,
  type TimeLookup,
} from "./log.ts";
export { DEFAULT_READ_BYTES, LogReader } from "./read/log_reader.ts";
export * from "./errors.ts";
export type { RecordBatch } from "./segment/reader.ts";
export { DEFAULT_BEACON_INTERVAL, type SegmentHeader } from "./segment/format.ts";
export {
  inspectLog,
  listSegments,
  type LogReport,
  type SegmentReport,
  verifyLog,
  type VerifyOptions,
  type VerifyProgress,
} from "./verify.ts";
export { FolderReader, type FolderReaderOptions } from "./read/folder_reader.ts";
export {
  ChunkCorruptError,
  type ChunkEntry,
  chunkPath,
  CHUNKS_DIR,
  type Manifest,
  MANIFEST_FILE,
  type RetiredChunk,
  type SharedManifest,
} from "./chunk/chunk.ts";
export type { ArchiveState, ChunkPolicy } from "./chunk/protocol.ts";
export type { LogArchive, LogChunks } from "./chunk/log_chunks.ts";
export type { LogProducers } from "./producer/log_producers.ts";
export type { ArchiveOptions } from "./chunk/archive.ts";
export { DEFAULT_MAX_PRODUCER_HOLDERS, DEFAULT_MAX_PRODUCERS } from "./producer/table.ts";
export { PRODUCERS_FILE } from "./producer/journal.ts";
export type { ProducerJournalReport } from "./producer/verify.ts";
export type { LogListener } from "./log_listener.ts";
export { FENCE, restoreLog, type RestoreOptions, type RestoreReport } from "./restore.ts";
