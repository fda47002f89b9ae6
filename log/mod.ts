/**
 * The durable, segmented log under every streamcast stream: append with group
 * commit, read from any offset, recover from a crash.
 *
 * ```ts
 * import { Log } from "@streamcast/server/log";
 * const log = await Log.open(await Deno.makeTempDir());
 * await log.append(new TextEncoder().encode('{"price":101.5}'));
 * const batch = await log.reader(1).read();
 * console.log(batch.count); // 1
 * await log.close();
 * ```
 *
 * @module
 */

export * from "./log.ts";
export * from "./log_reader.ts";
export { LogCorruptError, type RecordBatch } from "./segment_reader.ts";
export { DEFAULT_BEACON_INTERVAL, type SegmentHeader } from "./format.ts";
export * from "./verify.ts";
export {
  ChunkCorruptError,
  type ChunkEntry,
  chunkPath,
  CHUNKS_DIR,
  type Manifest,
  MANIFEST_FILE,
  type RetiredChunk,
} from "./chunk.ts";
export type { ChunkPolicy } from "./chunk_protocol.ts";
export type { ArchiveOptions } from "./archive.ts";
export type { ArchiveState } from "./chunk_protocol.ts";
export { FENCE, restoreLog, type RestoreOptions, type RestoreReport } from "./restore.ts";
