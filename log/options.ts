/**
 * The options of a log and their defaults.
 *
 * @module
 */

import { DEFAULT_BEACON_INTERVAL, HEADER_BYTES, MIN_BEACON_INTERVAL } from "./segment/format.ts";
import type { ChunkPolicy } from "./chunk/protocol.ts";
import type { ArchiveOptions } from "./chunk/archive.ts";
import { Logger } from "../common/logger.ts";
import { DEFAULT_MAX_PRODUCER_HOLDERS, DEFAULT_MAX_PRODUCERS } from "./producer/table.ts";
import { DEFAULT_JOURNAL_BYTES } from "./producer/journal.ts";
import { type LogIo, REAL_IO } from "./disk/io.ts";

export { type LogIo, REAL_IO };

/** Largest payload accepted by default: 16 MiB. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 16 << 20;
/** Default segment size before rolling: 64 MiB. */
export const DEFAULT_SEGMENT_BYTES = 64 << 20;
/** Default age of a segment's first row before rolling: 60 s. */
export const DEFAULT_SEAL_EVERY_MS = 60_000;

/** Options of {@linkcode Log.open}. */
export interface LogOptions {
  /** Stream name written in segment headers. @default the folder name ("" for "_") */
  name?: string;
  /** Create the log when the folder holds none. @default true */
  create?: boolean;
  /** Stream id for a new log (32 hex); a new random one when absent. */
  streamId?: string;
  /** First offset of a new log. @default 1 */
  firstOffset?: number;
  /**
   * Sync each commit to disk before acknowledging it. `false` survives a
   * process crash but not a power loss. @default true
   */
  fsync?: boolean;
  /** Roll the active segment once it reaches this many bytes. @default 64 MiB */
  segmentBytes?: number;
  /** Roll the active segment once its first row is this old (0: never). @default 60000 */
  sealEveryMs?: number;
  /** Beacon interval of new segments. @default 1 MiB */
  beaconInterval?: number;
  /** Largest payload accepted. @default 16 MiB */
  maxPayloadBytes?: number;
  /**
   * Producers remembered for idempotent publishing (see `producer/table.ts`); past
   * it, the one whose last publish is oldest is forgotten. @default 10000
   */
  maxProducers?: number;
  /**
   * Token holders whose producers are remembered (see `producer/table.ts`);
   * past it, every producer of the holder whose last publish is oldest is
   * forgotten. @default 100000
   */
  maxProducerHolders?: number;
  /**
   * Size of the producer journal (`producers.log`) past which the next
   * producer commit rewrites it, one record per producer remembered.
   * @default 1 MiB
   */
  producerJournalBytes?: number;
  /** The clock, in ms since the epoch (inject one in tests). @default Date.now */
  clock?: () => number;
  /** Check the age rule on a timer; turn off to drive it with `tick()`. @default true */
  timers?: boolean;
  /**
   * How much to check on open: `"all"` reads every record of every segment,
   * `"tail"` only the active segment from its last beacon. @default "all"
   */
  verify?: "all" | "tail";
  /**
   * Turn sealed segments into chunks in the chunk worker (`true`, or a policy
   * for merging and retention). @default false (streams turn it on)
   */
  chunks?: boolean | Partial<ChunkPolicy>;
  /** How often the worker merges, expires and applies retention, ms. @default 60000 */
  maintainEveryMs?: number;
  /**
   * Every change the log and its chunk worker make on disk goes through here
   * (`disk/io.ts`): a seam for tests to see each write and sync, fail one, or
   * compute what a crash would leave. With another than the real one, the
   * chunk worker's steps run on the log's thread, through it (a `Worker`
   * cannot be handed functions). @default the real filesystem
   */
  io?: LogIo;
  /** Archive chunks and the manifest to S3 (turns chunks on). */
  archive?: ArchiveOptions | null;
  /**
   * A replica of another server's log (a mirror's, `serve --follow`): offsets come from the
   * primary ({@linkcode Log.appendAt}), chunks are the primary's, adopted
   * ({@linkcode Log.adoptChunks}); the chunk worker makes and merges none of
   * its own. Turns chunks on. @default false
   */
  replica?: boolean;
  /**
   * One replica of a cluster's stream (`replica/replication.ts`, `Log.replication`):
   * a row is shown — to readers, to `onCommit`, to the caller awaiting its
   * append — only once the cluster's commit index passes it, and local
   * appends are taken only while the node leads. @default false
   */
  replicated?: boolean;
  /** Serve offsets the local tier dropped from the archive. @default false */
  replayArchive?: boolean;
  /**
   * On close with an archive: seal the active segment and wait up to this
   * long for the archive to take everything (a planned stop loses nothing).
   * @default 10000
   */
  archiveWaitMs?: number;
  /**
   * Where the log reports what it cannot tell a caller (a chunk worker error,
   * a segment it cannot delete): events with snake_case names.
   * @default a text Logger writing to stderr
   */
  logger?: Logger;
}

/** Default chunk policy. */
export const DEFAULT_CHUNK_POLICY: ChunkPolicy = {
  fanIn: 4,
  maxChunkBytes: 256 << 20,
  graceMs: 15 * 60_000,
  retainBytes: null,
  retainAgeMs: null,
  archive: null,
};

/** {@linkcode LogOptions} with every default filled in (those of a new log's identity aside). */
export type ResolvedOptions =
  & Required<
    Omit<LogOptions, "streamId" | "firstOffset" | "name" | "create" | "chunks" | "archive">
  >
  & { chunks: ChunkPolicy | null };

/**
 * Fills in the defaults of `options` and checks the ranges.
 *
 * @throws {RangeError} for a beacon interval, payload limit, producer bound, journal size or segment size out of range.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { resolveOptions } from "./options.ts";
 * equal(resolveOptions({ fsync: false }).segmentBytes, 67108864);
 * ```
 */
export function resolveOptions(options: LogOptions): ResolvedOptions {
  const opts: ResolvedOptions = {
    fsync: options.fsync ?? true,
    segmentBytes: options.segmentBytes ?? DEFAULT_SEGMENT_BYTES,
    sealEveryMs: options.sealEveryMs ?? DEFAULT_SEAL_EVERY_MS,
    beaconInterval: options.beaconInterval ?? DEFAULT_BEACON_INTERVAL,
    maxPayloadBytes: options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
    maxProducers: options.maxProducers ?? DEFAULT_MAX_PRODUCERS,
    maxProducerHolders: options.maxProducerHolders ?? DEFAULT_MAX_PRODUCER_HOLDERS,
    producerJournalBytes: options.producerJournalBytes ?? DEFAULT_JOURNAL_BYTES,
    clock: options.clock ?? Date.now,
    timers: options.timers ?? true,
    verify: options.verify ?? "all",
    chunks: options.chunks || options.archive || options.replica
      ? {
        ...DEFAULT_CHUNK_POLICY,
        ...(typeof options.chunks === "object" ? options.chunks : {}),
        archive: options.archive ?? null,
        replica: options.replica ?? false,
        // A cluster's log uploads only while its node leads (Log.archiveAs).
        ...(options.replicated ? { archiveTerm: null } : {}),
      }
      : null,
    replica: options.replica ?? false,
    replicated: options.replicated ?? false,
    maintainEveryMs: options.maintainEveryMs ?? 60_000,
    replayArchive: options.replayArchive ?? false,
    archiveWaitMs: options.archiveWaitMs ?? 10_000,
    io: options.io ?? REAL_IO,
    logger: options.logger ?? new Logger(),
  };
  if (opts.beaconInterval < MIN_BEACON_INTERVAL || opts.beaconInterval > 1 << 30) {
    throw new RangeError(
      `beaconInterval must be between ${MIN_BEACON_INTERVAL} and 2^30, got ${opts.beaconInterval}`,
    );
  }
  if (opts.maxPayloadBytes < 1 || opts.maxPayloadBytes > 0xffff_ffff - 64) {
    throw new RangeError(`maxPayloadBytes out of range: ${opts.maxPayloadBytes}`);
  }
  if (!Number.isSafeInteger(opts.maxProducers) || opts.maxProducers < 1) {
    throw new RangeError(`maxProducers must be an integer ≥ 1, got ${opts.maxProducers}`);
  }
  if (!Number.isSafeInteger(opts.maxProducerHolders) || opts.maxProducerHolders < 1) {
    throw new RangeError(
      `maxProducerHolders must be an integer ≥ 1, got ${opts.maxProducerHolders}`,
    );
  }
  if (!Number.isSafeInteger(opts.producerJournalBytes) || opts.producerJournalBytes < 0) {
    throw new RangeError(
      `producerJournalBytes must be an integer ≥ 0, got ${opts.producerJournalBytes}`,
    );
  }
  if (opts.segmentBytes < HEADER_BYTES * 2) {
    throw new RangeError(`segmentBytes must be at least ${HEADER_BYTES * 2}`);
  }
  return opts;
}
