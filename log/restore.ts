/**
 * Rebuilding a log from its archive on another machine (producer failover).
 *
 * The restored log keeps the stream id and the producer table (the archived
 * producer journal's records of archived rows), and **fences** its offsets: the next
 * offset is the archived end plus 2^20, so that no offset is ever issued twice
 * with other data — even one the lost producer wrote (and a subscriber saw)
 * but never archived. Consumers resume from their cursors and see a gap.
 *
 * @module
 */

import { join } from "node:path";
import type { ArchiveOptions } from "./chunk/archive.ts";
import { CHUNKS_DIR, type Manifest } from "./chunk/chunk.ts";
import { ChunkDigestError, storeAdoptedChunk } from "./chunk/adoption.ts";
import { Log, type LogOptions, META_FILE } from "./log.ts";
import { syncDir, writeFileAtomic } from "./disk/fs.ts";
import { writeManifest } from "./chunk/manifest_file.ts";
import { encodeRecords, parseJournal, PRODUCERS_FILE } from "./producer/journal.ts";

/** How far offsets jump on a restore. */
export const FENCE = 2 ** 20;

/** Options of {@linkcode restoreLog}. */
export interface RestoreOptions {
  /** The archive to restore from. */
  archive: ArchiveOptions;
  /**
   * Copy archived chunks back to local disk: `true` for all of them, a number
   * for those whose last row is younger than that many ms. @default false
   */
  hydrate?: boolean | number;
  /** Options for the restored log. */
  logOptions?: LogOptions;
  /** Progress messages (e.g. console.error). */
  progress?: (message: string) => void;
}

/** What a restore did. */
export interface RestoreReport {
  /** The stream id kept. */
  streamId: string;
  /** Last offset the archive held. */
  archivedThrough: number;
  /** The first offset the restored log will issue. */
  nextOffset: number;
  /** Chunks copied to local disk. */
  hydratedChunks: number;
}

/**
 * Rebuilds the log of `stream` in `dir` from the archive and opens it.
 * Refuses when `dir` already holds a log.
 *
 * @example
 * ```ts
 * import { FENCE, restoreLog } from "./restore.ts";
 * // Needs a reachable archive, so this example is type-checked but not run.
 * async function failover(): Promise<boolean> {
 *   const { log, report } = await restoreLog("data/trades", "trades", {
 *     archive: { uri: "s3://market-data/prod" },
 *     hydrate: 7 * 24 * 3600_000, // copy back the chunks of the last week
 *   });
 *   await log.close();
 *   return report.nextOffset === report.archivedThrough + 1 + FENCE;
 * }
 * ```
 */
export async function restoreLog(
  dir: string,
  stream: string,
  options: RestoreOptions,
): Promise<{ log: Log; report: RestoreReport }> {
  try {
    await Deno.stat(join(dir, META_FILE));
    throw new Deno.errors.AlreadyExists(
      `${dir} already holds a log; restore only into a folder without one`,
    );
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const say = options.progress ?? (() => {});
  // Loaded only when needed: the S3 SDK is large.
  const { ArchiveStore } = await import("./chunk/archive.ts");
  const store = new ArchiveStore(options.archive, stream);
  let hydrated = 0;
  let manifest: Manifest | null;
  try {
    manifest = await store.getManifest();
    if (!manifest) {
      throw new Deno.errors.NotFound(`no archived manifest for stream "${stream}" in ${store.uri}`);
    }
    say(`archive ${store.uri}: stream ${manifest.stream_id} through ${manifest.through}`);
    await Deno.mkdir(join(dir, CHUNKS_DIR), { recursive: true });
    const h = options.hydrate ?? false;
    if (h !== false && manifest.chunks.length > 0) {
      const newest = manifest.chunks[manifest.chunks.length - 1].last_ts;
      const keep = h === true
        ? manifest.chunks
        : manifest.chunks.filter((c) => c.last_ts >= newest - h * 1000);
      // Local chunks must be a suffix of the archive's list.
      const first = manifest.chunks.length - keep.length;
      const local = manifest.chunks.slice(first);
      for (const c of local) {
        // Streamed to its file and checked (size, SHA-256, rows) on the way,
        // never held whole: a merged chunk can be hundreds of MB.
        try {
          await storeAdoptedChunk(dir, c, await store.getChunk(c.sha256), null);
        } catch (err) {
          if (!(err instanceof ChunkDigestError)) throw err;
          throw new Error(
            `archived chunk ${c.sha256} is not what the manifest says: ${err.message}`,
          );
        }
        hydrated++;
        say(`hydrated chunk ${hydrated}/${local.length} (offsets ${c.first}..${c.last})`);
      }
      const localManifest: Manifest = { ...manifest, chunks: local, retired: [] };
      await writeManifest(dir, localManifest);
    }
    // The producer table: the archived journal's records of rows the archive
    // holds (a record of rows past its end was never archived: those rows are
    // lost with the old machine, and their producers may send them again).
    const journal = await store.getFile(PRODUCERS_FILE);
    if (journal !== null) {
      const through = manifest.through;
      const { records } = parseJournal(journal, `${store.uri} ${PRODUCERS_FILE}`);
      const kept = records.filter((r) => r.seq === 0 || r.last <= through);
      const body = encodeRecords(kept);
      const bytes = new Uint8Array(8 + body.length);
      bytes.set(journal.subarray(0, 8), 0);
      bytes.set(body, 8);
      await writeFileAtomic(join(dir, PRODUCERS_FILE), bytes);
      say(`producer journal: ${kept.length} of ${records.length} records kept`);
    }
    await syncDir(dir);
  } finally {
    store.close();
  }
  const nextOffset = manifest.through + 1 + FENCE;
  const log = await Log.open(dir, {
    name: stream,
    ...options.logOptions,
    streamId: manifest.stream_id,
    firstOffset: nextOffset,
    archive: options.logOptions?.archive ?? options.archive,
  });
  return {
    log,
    report: {
      streamId: manifest.stream_id,
      archivedThrough: manifest.through,
      nextOffset,
      hydratedChunks: hydrated,
    },
  };
}
