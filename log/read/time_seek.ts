/**
 * Finding the first record at or after a time in one segment file, through
 * its beacons, in O(log n) small reads plus at most about two beacon
 * intervals of records — never a scan of the file.
 *
 * Each beacon (at byte k·I) carries the offset and append time of the last
 * record completed before it. Append times never decrease in offset order
 * (the committer clamps a clock that steps back), so the beacons' times are
 * sorted: a binary search finds the last beacon whose record is older than
 * the time; the answer is after that record and no later than the next
 * beacon's. A second beacon search (the one offset seeks use) finds the
 * record boundary at or before the record after it, and the cursor reads
 * forward from there, checking every record, until one is at or after the
 * time: at most the interval holding it and the one before.
 *
 * In a chunk (`chunkTimeHit`), after the manifest's binary search has found
 * it: one more small read, the chunk's time index (`../chunk/times.ts`), whose
 * runs are binary-searched. Without a sound index (an older log, a chunk
 * restored from the archive, a damaged index) the answer stays the chunk's
 * first row, an earlier start flagged `exact: false`, never a wrong one.
 *
 * @module
 */

import type { ChunkEntry } from "../chunk/chunk.ts";
import { readChunkTimes, seekRuns } from "../chunk/times.ts";
import type { Segment } from "../segment/state.ts";
import { earliestOffset, planSince, type Tiers } from "./tier_lookup.ts";
import {
  type Beacon,
  BEACON_BYTES,
  decodeBeacon,
  Layout,
  type SegmentHeader,
} from "../segment/format.ts";
import {
  type CursorStart,
  readAt,
  SegmentCursor,
  segmentStart,
  startAfterBeacon,
} from "../segment/reader.ts";

/**
 * What a time lookup read, for tests and benchmarks that check its cost
 * does not grow with the log: counters the lookup adds to.
 */
export interface LookupStats {
  /** Small reads (a beacon, a record head). */
  reads: number;
  /** Bytes of records read by the cursor. */
  bytes: number;
  /** Records decoded. */
  records: number;
}

/**
 * A fresh set of counters.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { lookupStats } from "./time_seek.ts";
 * equal(lookupStats().reads, 0);
 * ```
 */
export function lookupStats(): LookupStats {
  return { reads: 0, bytes: 0, records: 0 };
}

/** The first record at or after a time. */
export interface TimeHit {
  /** Its offset. */
  offset: number;
  /** Its append time, µs. */
  ts: number;
}

/** How {@linkcode seekTime} reads. */
export interface SeekTimeOptions {
  /** Bytes of the file holding records (the durable size, or the file size). */
  size: number;
  /** Largest payload a record may claim. */
  maxPayloadBytes: number;
  /** Counters to add to. */
  stats?: LookupStats;
}

/**
 * The first record of segment `file` whose append time is at or after
 * `sinceUs`, or `null` when every record is older. Records read are
 * checked; damage throws `LogCorruptError`.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * import { readHeader } from "../segment/reader.ts";
 * import { seekTime } from "./time_seek.ts";
 * let now = 1000;
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { clock: () => now, timers: false });
 * await log.append("{}");
 * now = 2000;
 * await log.append("{}");
 * const info = log.segments()[0];
 * await log.close();
 * const file = await Deno.open(info.path);
 * const header = await readHeader(file, info.path);
 * const hit = await seekTime(file, info.path, header, 1_500_000, { size: info.size, maxPayloadBytes: 1 << 20 });
 * deepStrictEqual(hit, { offset: 2, ts: 2000000 });
 * file.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function seekTime(
  file: Deno.FsFile,
  path: string,
  header: SegmentHeader,
  sinceUs: number,
  options: SeekTimeOptions,
): Promise<TimeHit | null> {
  const { size, stats } = options;
  const layout = new Layout(header.beaconInterval);
  const beacons = Math.max(0, Math.floor((size - BEACON_BYTES) / layout.interval));
  const cache = new Map<number, Beacon | null>();
  const beaconAt = async (k: number): Promise<Beacon | null> => {
    if (cache.has(k)) return cache.get(k)!;
    if (stats) stats.reads++;
    const b = decodeBeacon(await readAt(file, k * layout.interval, BEACON_BYTES), 0);
    cache.set(k, b);
    return b;
  };
  // The last record known to be older than the time.
  let older = header.firstOffset - 1;
  let lo = 1;
  let hi = beacons;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const b = await beaconAt(mid);
    if (!b) break; // a damaged beacon: start from what is known; the cursor will say why
    if (b.lastTimeUs < sinceUs) {
      if (b.lastOffset > 0) older = b.lastOffset;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  // A record boundary at or before the record after `older`.
  const want = older + 1;
  let start: CursorStart = segmentStart(header);
  lo = 1;
  hi = beacons;
  while (lo <= hi && want > header.firstOffset) {
    const mid = (lo + hi) >>> 1;
    const b = await beaconAt(mid);
    if (!b) break;
    const s = startAfterBeacon(layout, header, mid, b);
    if (s && s.offset <= want) {
      start = s;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  const cursor = new SegmentCursor(file, path, layout, start, {
    maxPayloadBytes: options.maxPayloadBytes,
    blockBytes: layout.interval + 4096,
  });
  while (!cursor.endMark) {
    const before = cursor.physicalEnd;
    // An interval at a time: the answer is within about two of the start.
    const batch = await cursor.read(size, layout.interval);
    if (stats) stats.bytes += cursor.physicalEnd - before;
    if (batch.count === 0) return null;
    for (let i = 0; i < batch.count; i++) {
      if (stats) stats.records++;
      if (batch.times[i] >= sinceUs) return { offset: batch.offsets[i], ts: batch.times[i] };
    }
  }
  return null;
}

/**
 * The first row of chunk `entry` (in log folder `dir`) whose append time is
 * at or after `sinceUs`, from the chunk's time index, or `null` when the
 * index is missing, damaged or not this chunk's (the caller then answers
 * with the chunk's first row, as without an index).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { chunkTimeHit } from "./time_seek.ts";
 * const c = { first: 1, last: 9, rows: 9, bytes: 1, sha256: "00", first_ts: 10, last_ts: 20 };
 * const dir = await Deno.makeTempDir();
 * equal(await chunkTimeHit(dir, c, 15), null);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function chunkTimeHit(
  dir: string,
  entry: ChunkEntry,
  sinceUs: number,
  stats?: LookupStats,
): Promise<TimeHit | null> {
  if (stats) stats.reads++;
  try {
    const times = await readChunkTimes(dir, entry);
    return times ? seekRuns(times, sinceUs) : null;
  } catch {
    // Damaged, or unreadable: chunk-grained, as without an index (verify reports it).
    return null;
  }
}

/** Where a time starts in a log: what `Log.offsetAt` and `FolderReader.offsetAt` answer. */
export interface TimeLookup {
  /** The first offset whose append time is at or after the time, or the end when every row is older. */
  offset: number;
  /** That row's append time, µs, or `null` at the end. */
  ts: number | null;
  /**
   * Whether `ts` is known to be the first at or after the time: `false` when
   * the row is the first of a chunk whose rows straddle the time and whose
   * time index is missing or damaged (an older log, a chunk from the
   * archive): the start is earlier, never later.
   */
  exact: boolean;
  /**
   * Whether rows older than `offset` that the log no longer holds (dropped by
   * retention) may have been at or after the time (see
   * {@linkcode lookupAnswers}).
   */
  evicted: boolean;
}

/** What a lookup knows of the log's extent when it answers. */
export interface LookupExtent {
  /** The earliest offset held, or `null` when no row is held. */
  earliest: number | null;
  /** The offset after the last row (the durable end). */
  end: number;
  /** The log's first offset: rows below `earliest` and from here on were dropped. */
  firstOffset: number;
}

/**
 * Makes a lookup's answers for `sinceUs`, with `evicted` — whether rows the
 * log dropped (retention) may have been appended at or after the time — set
 * by one rule: rows below the earliest held were dropped, and either nothing
 * is held or the time is at or before the answer's row, which is the earliest
 * held. Dropped rows are older than that row, so a time past it was reached by
 * none of them: a chunk-grained answer (the first row of a chunk straddling the
 * time, `ts` its first time) is not evicted merely because it is coarse.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { lookupAnswers } from "./time_seek.ts";
 * // The earliest row held is offset 100, appended at 5000 µs; rows 1-99 were dropped.
 * const at = (us: number) => lookupAnswers(us, { earliest: 100, end: 200, firstOffset: 1 });
 * equal(at(4000)(100, 5000, true).evicted, true);
 * equal(at(6000)(100, 5000, false).evicted, false); // chunk-grained: starts before the time
 * equal(at(6000)(140, 6000, true).evicted, false);
 * const kept = lookupAnswers(4000, { earliest: 1, end: 200, firstOffset: 1 });
 * equal(kept(1, 5000, true).evicted, false); // nothing was dropped
 * ```
 */
export function lookupAnswers(
  sinceUs: number,
  extent: LookupExtent,
): (offset: number, ts: number | null, exact: boolean) => TimeLookup {
  const { earliest, end, firstOffset } = extent;
  const dropped = (earliest ?? end) > firstOffset;
  return (offset, ts, exact) => ({
    offset,
    ts,
    exact,
    evicted: dropped &&
      (earliest === null || (offset === earliest && (ts === null || sinceUs <= ts))),
  });
}

/**
 * {@linkcode seekTime} on the segment at `path`, opened and closed here.
 *
 * @throws {Deno.errors.NotFound} when the segment is gone (chunked and
 * deleted meanwhile).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * import { readHeader } from "../segment/reader.ts";
 * import { seekTimeIn } from "./time_seek.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { clock: () => 1000, timers: false });
 * await log.append("{}");
 * const info = log.segments()[0];
 * await log.close();
 * const file = await Deno.open(info.path);
 * const header = await readHeader(file, info.path);
 * file.close();
 * const hit = await seekTimeIn(info.path, header, 0, { size: info.size, maxPayloadBytes: 1 << 20 });
 * deepStrictEqual(hit, { offset: 1, ts: 1000000 });
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function seekTimeIn(
  path: string,
  header: SegmentHeader,
  sinceUs: number,
  options: SeekTimeOptions,
): Promise<TimeHit | null> {
  const file = await Deno.open(path, { read: true });
  try {
    return await seekTime(file, path, header, sinceUs, options);
  } finally {
    file.close();
  }
}

/** What {@linkcode offsetAtTime} reads of a log. */
export interface TimeLookupView {
  /** The log folder. */
  dir: string;
  /** The first offset the log was created with. */
  firstOffset: number;
  /** The append time of the newest commit, µs. */
  lastTimeUs: number;
  /** The largest payload a record may have. */
  maxPayloadBytes: number;
  /** The tiers as they are now (their `end`: the end readers see). */
  tiers(): Tiers;
  /** The segments, in the order of `tiers().segments`. */
  segments: readonly Segment[];
}

/**
 * Where `sinceUs` (µs since the epoch) starts in a log: the first offset
 * whose append time is at or after it, or the end when every row is older —
 * in O(log n): a binary search over the chunks' and segments' times, then
 * over one segment's beacons, then at most about two beacon intervals of
 * records. `stats` counts the reads. What `Log.offsetAt` answers.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * let now = 1000;
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { clock: () => now, timers: false });
 * await log.append("{}");
 * now = 2000;
 * await log.append("{}");
 * equal((await log.offsetAt(1_500_000)).offset, 2); // through offsetAtTime
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function offsetAtTime(
  view: TimeLookupView,
  sinceUs: number,
  stats?: LookupStats,
): Promise<TimeLookup> {
  for (let attempt = 0;; attempt++) {
    const t = view.tiers();
    const answers = lookupAnswers(sinceUs, {
      earliest: earliestOffset(t),
      end: t.end,
      firstOffset: view.firstOffset,
    });
    // A row past the end readers see (durable, not yet committed) answers as the end.
    const answer = (offset: number, ts: number | null, exact: boolean): TimeLookup =>
      offset >= t.end && ts !== null ? answers(t.end, null, true) : answers(offset, ts, exact);
    if (sinceUs > view.lastTimeUs) {
      return { offset: t.end, ts: null, exact: true, evicted: false };
    }
    const plan = planSince(t, sinceUs);
    if (plan.kind === "end") return answer(t.end, null, true);
    if (plan.kind === "row") {
      const entry = plan.exact || plan.tier !== "chunk"
        ? undefined
        : t.chunks.find((c) => c.first === plan.offset);
      const hit = entry ? await chunkTimeHit(view.dir, entry, sinceUs, stats) : null;
      return hit ? answer(hit.offset, hit.ts, true) : answer(plan.offset, plan.ts, plan.exact);
    }
    const seg = view.segments[plan.index];
    try {
      const hit = await seekTimeIn(seg.info.path, seg.header, sinceUs, {
        size: seg.info.size,
        maxPayloadBytes: view.maxPayloadBytes,
        stats,
      });
      if (hit) return answer(hit.offset, hit.ts, true);
    } catch (err) {
      // Chunked and deleted under us: plan again from the tiers as they are now.
      if (!(err instanceof Deno.errors.NotFound) || attempt >= 3) throw err;
      continue;
    }
    // Rows appended meanwhile: the next segment (or the end) starts it.
    const next = view.segments[plan.index + 1];
    if (!next || next.info.count === 0) return answer(t.end, null, true);
    if (attempt >= 3) return answer(next.info.firstOffset, next.info.firstTimeUs, true);
  }
}
