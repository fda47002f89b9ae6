/**
 * The rows a commit takes: every sealed row of the log past the table's
 * last offset, read from the log's chunks (not its segments: a row reaches
 * the table once it is sealed), with its append time.
 *
 * The chunks are those the log's manifest lists (in the log folder, read
 * without the writer's lock, as export reads beside a live server), after
 * the archive's older ones when the table is behind the local tier (a log
 * restored from its archive, or one whose retention dropped chunks the
 * table had not taken yet). An archived chunk may reach past where the
 * local tier begins (another writer cut it: a cluster's earlier leader, or
 * a merge): it is taken, and the rows both hold are read once. A chunk
 * merged away between the manifest's
 * read and its own is a {@linkcode Deno.errors.NotFound}: the commit is
 * tried again on a fresh manifest.
 *
 * The rows taken are whole: past the table's last offset, offsets that no
 * chunk holds are taken over only when the log accounts for them — a fence
 * of the local log (a gap between two of its chunks), or the gap below the
 * log's first offset that a restore fences (`log/restore.ts`). Any other gap
 * is a hole ({@linkcode OffsetHoleError}): the rows before it are committed,
 * none past it, and the table stays as it is until the hole is filled.
 *
 * Append times come from each chunk's time index (`chunks/SHA256.times`,
 * see `log/chunk/times.ts`). A chunk without one (from the archive, or an
 * older log) gives its rows its first append time and its last row its
 * last: the times stay within the chunk's and never decrease.
 *
 * @module
 */

import type { ArchiveStore } from "../log/chunk/archive.ts";
import { ChunkCursor, type ChunkEntry, chunkPath } from "../log/chunk/chunk.ts";
import { type ChunkTimes, readChunkTimes } from "../log/chunk/times.ts";
import { readManifest } from "../log/chunk/manifest_file.ts";
import { readMeta } from "../log/log_meta.ts";
import type { RecordBatch } from "../log/mod.ts";

/**
 * A chunk holding rows past the table's end, and where it is read from.
 */
export interface PendingChunk {
  /** The chunk, as its manifest lists it. */
  entry: ChunkEntry;
  /** Read from the archive (the local tier no longer holds it). */
  archived: boolean;
}

/**
 * Offsets past the table's end that no chunk the table can read holds, and
 * that no fence of the log accounts for: committing past them would leave
 * those rows out of the table for good.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { OffsetHoleError } from "./commit_rows.ts";
 * const err = new OffsetHoleError(61, 100, true);
 * equal(err.message.startsWith("offsets 61..100 are missing"), true);
 * ```
 */
export class OffsetHoleError extends Error {
  /** The first offset missing. */
  readonly from: number;
  /** The last offset missing. */
  readonly to: number;
  /** Offsets `from..to` are missing; `archive`: an archive was searched too. */
  constructor(from: number, to: number, archive: boolean) {
    super(
      `offsets ${from}..${to} are missing: no chunk of the log${
        archive ? " or of its archive" : " (and no archive is set)"
      } holds them, and no fence of the log accounts for them; the table takes nothing past ` +
        `${from - 1} until they are found`,
    );
    this.name = "OffsetHoleError";
    this.from = from;
    this.to = to;
  }
}

/** A hole in pending chunks: offsets `from..to`, just before `chunks[index]`. */
export interface OffsetHole {
  /** The first offset missing. */
  from: number;
  /** The last offset missing. */
  to: number;
  /** The pending chunk that begins past the hole. */
  index: number;
}

/**
 * The first hole in `chunks` (pending chunks, in offset order) past offset
 * `after`, or `null`. A gap in offsets is not a hole when the log accounts for
 * it: within one chunk (its span covers the fence), between two local chunks
 * (a fence of this log), or below `firstOffset` (the log's first offset: a
 * restore fences the offsets between the archive's end and it). Before the
 * table's first row (`after` 0) nothing is missing: the table begins with
 * the first row any chunk holds. `localFirst` is the local tier's first
 * offset: the table's last row is in a local chunk when it is at or past it.
 *
 * @example
 * ```ts
 * import { deepEqual, equal } from "node:assert/strict";
 * import { firstHole } from "./commit_rows.ts";
 * const c = (first: number, last: number, archived: boolean) => ({
 *   entry: { first, last, rows: last - first + 1, bytes: 1, sha256: "ab", first_ts: 0, last_ts: 0 },
 *   archived,
 * });
 * // The archive lost 61..100: a hole.
 * deepEqual(firstHole(0, [c(1, 60, true), c(101, 150, false)], 101, 1), { from: 61, to: 100, index: 1 });
 * // Two local chunks with a gap between them: a fence of this log.
 * equal(firstHole(0, [c(1, 60, false), c(101, 150, false)], 1, 1), null);
 * // A restored log: the gap below its first offset is the restore's fence.
 * equal(firstHole(50, [c(1051, 1100, false)], 1051, 1051), null);
 * ```
 */
export function firstHole(
  after: number,
  chunks: readonly PendingChunk[],
  localFirst: number,
  firstOffset: number,
): OffsetHole | null {
  let through = after;
  let prevLocal = after > 0 && localFirst <= after;
  for (let i = 0; i < chunks.length; i++) {
    const { entry, archived } = chunks[i];
    if (entry.last <= through) continue;
    if (through > 0 && entry.first > through + 1) {
      const to = entry.first - 1;
      const fenced = (prevLocal && !archived) || to < firstOffset;
      if (!fenced) return { from: through + 1, to, index: i };
    }
    through = entry.last;
    prevLocal = !archived;
  }
  return null;
}

/**
 * The chunks holding rows past offset `after`, in offset order: the local
 * manifest's, after the archive's older ones when the local chunks do not
 * reach back to `after + 1` and `archive` is given — unless the archive was
 * already found to hold nothing below `known` (its older chunks never
 * change: the archive grows only with chunks the local tier makes), so a
 * restored log whose table is up to date does not read the archive's
 * manifest at every commit. `localFirst` is the local tier's first offset
 * (Infinity without a chunk), to pass as `known` once the archive had none.
 * The chunks end before the first hole ({@linkcode firstHole}), given as
 * `hole`.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { pendingChunks } from "./commit_rows.ts";
 * const dir = await Deno.makeTempDir();
 * deepEqual(await pendingChunks(dir, 0, null), {
 *   chunks: [],
 *   localFirst: Infinity,
 *   hole: null,
 * });
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function pendingChunks(
  dir: string,
  after: number,
  archive: ArchiveStore | null,
  known = 0,
): Promise<{ chunks: PendingChunk[]; localFirst: number; hole: OffsetHole | null }> {
  const local = (await readManifest(dir))?.chunks ?? [];
  const chunks: PendingChunk[] = local.filter((c) => c.last > after).map((entry) => ({
    entry,
    archived: false,
  }));
  const localFirst = local[0]?.first ?? Infinity;
  if (archive && localFirst > after + 1 && localFirst > known) {
    const archived = (await archive.getManifest())?.chunks ?? [];
    const older = archived
      .filter((c) => c.last > after && c.first < localFirst)
      .map((entry) => ({ entry, archived: true }));
    chunks.unshift(...older);
  }
  const firstOffset = (await readMeta(dir))?.meta.first_offset ?? 1;
  const hole = firstHole(after, chunks, localFirst, firstOffset);
  if (hole) chunks.length = hole.index;
  return { chunks, localFirst, hole };
}

/**
 * Sets `batch.times` from a chunk's runs (or, without them, from the
 * chunk's first and last times), for rows in offset order.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { fillTimes } from "./commit_rows.ts";
 * const entry = { first: 1, last: 4, rows: 4, bytes: 9, sha256: "ab", first_ts: 10, last_ts: 40 };
 * const batch = {
 *   buf: new Uint8Array(0), count: 3, offsets: new Float64Array([2, 3, 4]),
 *   times: new Float64Array(3), starts: new Int32Array(3), lengths: new Int32Array(3),
 * };
 * fillTimes(batch, { first: 1, offsets: [1, 3], times: [10, 30] }, entry);
 * deepEqual([...batch.times], [10, 30, 30]);
 * fillTimes(batch, null, entry);
 * deepEqual([...batch.times], [10, 10, 40]);
 * ```
 */
export function fillTimes(batch: RecordBatch, runs: ChunkTimes | null, entry: ChunkEntry): void {
  const { offsets, times, count } = batch;
  if (runs === null) {
    for (let i = 0; i < count; i++) {
      times[i] = offsets[i] === entry.last ? entry.last_ts : entry.first_ts;
    }
    return;
  }
  let r = 0;
  for (let i = 0; i < count; i++) {
    const o = offsets[i];
    while (r + 1 < runs.offsets.length && runs.offsets[r + 1] <= o) r++;
    times[i] = runs.times[r];
  }
}

/**
 * The rows of `chunks` past offset `after`, with their append times, in
 * batches, until at least `maxBytes` of rows were given (then at the end of
 * a batch): a commit's rows. Each offset is given once: rows a chunk shares
 * with one before it (an archived chunk cut elsewhere) are skipped.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log/mod.ts";
 * import { pendingChunks, readRows } from "./commit_rows.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { chunks: true, timers: false });
 * await log.appendMany(['{"n":1}', '{"n":2}', '{"n":3}']);
 * await log.roll();
 * await log.chunks.settled();
 * await log.close();
 * let rows = 0;
 * const { chunks } = await pendingChunks(dir, 1, null);
 * for await (const b of readRows(dir, chunks, 1, null, 1 << 20)) {
 *   rows += b.count;
 *   equal(b.offsets[0], 2);
 *   equal(b.times[0] > 0, true);
 * }
 * equal(rows, 2);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function* readRows(
  dir: string,
  chunks: readonly PendingChunk[],
  after: number,
  archive: ArchiveStore | null,
  maxBytes: number,
): AsyncGenerator<RecordBatch> {
  let given = 0;
  let through = after; // the last offset given
  for (const { entry, archived } of chunks) {
    if (entry.last <= through) continue;
    let cursor: ChunkCursor;
    let runs: ChunkTimes | null = null;
    if (archived) {
      if (!archive) {
        throw new Error(`chunk ${entry.sha256} is only in the archive, which is not set`);
      }
      cursor = new ChunkCursor(
        `${archive.uri} ${entry.sha256}`,
        entry,
        () => archive.getChunk(entry.sha256),
      );
    } else {
      cursor = new ChunkCursor(chunkPath(dir, entry.sha256), entry);
      runs = await readChunkTimes(dir, entry);
    }
    await cursor.open();
    try {
      while (true) {
        const b = await cursor.read(1 << 20);
        if (b.count === 0) break;
        let from = 0;
        while (from < b.count && b.offsets[from] <= through) from++;
        if (from === b.count) continue;
        const batch = from === 0 ? b : {
          buf: b.buf,
          count: b.count - from,
          offsets: b.offsets.subarray(from),
          times: b.times.subarray(from),
          starts: b.starts.subarray(from),
          lengths: b.lengths.subarray(from),
        };
        fillTimes(batch, runs, entry);
        through = batch.offsets[batch.count - 1];
        yield batch;
        for (let i = 0; i < batch.count; i++) given += batch.lengths[i];
        if (given >= maxBytes) return;
      }
    } finally {
      cursor.close();
    }
  }
}
