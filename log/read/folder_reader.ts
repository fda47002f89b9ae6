/**
 * Reading a log folder without its lock, beside a live writer that may be
 * sealing, chunking, merging or expiring under the reader (`cli.ts export`
 * of a served stream). It changes nothing on disk.
 *
 * Each step plans from what is on disk now — the manifest's chunks and the
 * segment files — with the log's own tier lookup (`tier_lookup.ts`), reads
 * that tier, and plans again from where it stopped; a file that went away
 * under it (a segment chunked and deleted, a chunk merged or expired) makes
 * it plan again, a bounded number of times. Segments are read under the one
 * reading rule (`../segment/scan.ts`): every record is checked, and a torn tail
 * of the last segment is not a row yet and is left out, as recovery would;
 * damage followed by valid records is `LogCorruptError`. Chunks are checked
 * line by line as they are read.
 *
 * @module
 */

import { join } from "node:path";
import { ChunkCursor, type ChunkEntry, chunkPath } from "../chunk/chunk.ts";
import { LogCorruptError, LogEvictedError } from "../errors.ts";
import {
  getU64,
  HEADER_BYTES,
  parseSegmentFileName,
  RECORD_HEAD_BYTES,
  segmentFileName,
} from "../segment/format.ts";
import { readMeta } from "../log_meta.ts";
import { exists } from "../disk/fs.ts";
import { readManifest } from "../chunk/manifest_file.ts";
import {
  clipBatch,
  readAt,
  readHeader,
  type RecordBatch,
  seekStart,
  segmentStart,
} from "../segment/reader.ts";
import { readSegmentRecords } from "../segment/scan.ts";
import { earliestOffset, locateOffset, planSince, type TierSegment } from "./tier_lookup.ts";
import {
  chunkTimeHit,
  lookupAnswers,
  type LookupStats,
  seekTime,
  type TimeLookup,
} from "./time_seek.ts";
import { inspectLog, type LogReport } from "../verify.ts";

/** Retries of a lock-free read when files move under it (a live writer chunking or merging). */
const MAX_REPLANS = 8;
/** Default bytes read per step. */
const READ_BYTES = 1 << 20;
/** Verify and readers accept any payload a log may hold. */
const MAX_PAYLOAD = 0xffff_ff00;

/** Options of {@linkcode FolderReader.open}. */
export interface FolderReaderOptions {
  /** About how many bytes of records each batch holds. @default 1 MiB */
  readBytes?: number;
}

async function segmentFirsts(dir: string): Promise<number[]> {
  const firsts: number[] = [];
  for await (const e of Deno.readDir(dir)) {
    const first = e.isFile ? parseSegmentFileName(e.name) : null;
    if (first !== null) firsts.push(first);
  }
  return firsts.sort((a, b) => a - b);
}

async function inspect(dir: string): Promise<LogReport> {
  for (let attempt = 0;; attempt++) {
    try {
      return await inspectLog(dir);
    } catch (err) {
      // A segment chunked and deleted between listing and opening it.
      if (!(err instanceof Deno.errors.NotFound) || attempt >= MAX_REPLANS) throw err;
      if (!(await exists(join(dir, "log.json")))) throw err;
    }
  }
}

/** How reading one segment ended. */
interface SegmentEnd {
  /** The range is complete (it reached `to`, or the end of an unsealed segment). */
  done: boolean;
  /** The offset after the last record read. */
  nextOffset: number;
  /** The segment's records, when it is sealed (or an empty leftover). */
  sealedCount: number | null;
}

/**
 * Reads offsets `[from, to]` of a log folder without its lock.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { FolderReader, Log } from "../mod.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.appendMany(["{}", "{}", "{}"]);
 * await log.close();
 * const reader = await FolderReader.open(dir);
 * const offsets: number[] = [];
 * for await (const batch of reader.read(2, 3)) offsets.push(...batch.offsets);
 * deepStrictEqual(offsets, [2, 3]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class FolderReader {
  /** The log folder. */
  readonly dir: string;
  readonly #readBytes: number;
  readonly #earliest: number | null;
  readonly #last: number | null;

  private constructor(dir: string, report: LogReport, readBytes: number) {
    this.dir = dir;
    this.#readBytes = readBytes;
    const segs = report.segments.filter((s) => s.rows > 0);
    const chunks = report.manifest?.chunks ?? [];
    const firstSeg = report.segments[0]?.firstOffset ?? Infinity;
    const lows = [chunks[0]?.first, segs[0]?.firstOffset].filter((x) => x !== undefined);
    this.#earliest = lows.length > 0 ? Math.min(...lows as number[]) : null;
    let last: number | null = null;
    for (const s of segs) last = Math.max(last ?? 0, s.lastOffset ?? 0);
    for (const c of chunks) {
      if (c.first < firstSeg || last === null) last = Math.max(last ?? 0, c.last);
    }
    this.#last = last;
  }

  /**
   * Looks at the log in `dir` (headers, beacons and the manifest) for the
   * range it holds now.
   *
   * @throws {Deno.errors.NotFound} when `dir` holds no log.
   */
  static async open(dir: string, options: FolderReaderOptions = {}): Promise<FolderReader> {
    const readBytes = options.readBytes ?? READ_BYTES;
    if (!Number.isSafeInteger(readBytes) || readBytes < 1) {
      throw new RangeError(`readBytes must be a positive integer, got ${readBytes}`);
    }
    return new FolderReader(dir, await inspect(dir), readBytes);
  }

  /** The earliest offset the log held when opened, or null when it held no row. */
  get earliest(): number | null {
    return this.#earliest;
  }

  /** The last offset the log held when opened, or null. */
  get last(): number | null {
    return this.#last;
  }

  /**
   * Where `sinceUs` starts in the folder as it is now: the first offset whose
   * append time is at or after it, or the offset after the last row when
   * every row is older — the log's own lookup (see `Log.offsetAt`), with the
   * segments' times read from their files: a binary search over the
   * segments' first records, then one segment's beacons.
   *
   * @example
   * ```ts
   * import { equal } from "node:assert/strict";
   * import { FolderReader, Log } from "../mod.ts";
   * let now = 1000;
   * const dir = await Deno.makeTempDir();
   * const log = await Log.open(dir, { clock: () => now });
   * await log.append("{}");
   * now = 2000;
   * await log.append("{}");
   * await log.close();
   * const reader = await FolderReader.open(dir);
   * equal((await reader.offsetAt(1_500_000)).offset, 2);
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async offsetAt(sinceUs: number, stats?: LookupStats): Promise<TimeLookup> {
    const dir = this.dir;
    const firstOffset = (await readMeta(dir))?.meta.first_offset ?? 1;
    for (let attempt = 0;; attempt++) {
      try {
        return await this.#offsetAt(dir, firstOffset, sinceUs, stats);
      } catch (err) {
        // A file went away under us: a live writer moved its rows; plan again.
        if (!(err instanceof Deno.errors.NotFound) || attempt >= MAX_REPLANS) throw err;
      }
    }
  }

  async #offsetAt(
    dir: string,
    firstOffset: number,
    sinceUs: number,
    stats: LookupStats | undefined,
  ): Promise<TimeLookup> {
    const firsts = await segmentFirsts(dir);
    const chunks = (await readManifest(dir))?.chunks ?? [];
    const segments: TierSegment[] = firsts.map((f) => ({
      firstOffset: f,
      count: Infinity,
      sealed: false,
    }));
    const tiers = { segments, chunks, archived: [], end: Infinity };
    const earliest = earliestOffset(tiers);
    const end = this.#last === null ? (earliest ?? firstOffset) : this.#last + 1;
    const answer = lookupAnswers(sinceUs, { earliest, end, firstOffset });
    const plan = planSince(tiers, sinceUs);
    if (plan.kind === "end") return answer(end, null, true);
    if (plan.kind === "row") {
      const entry = plan.exact || plan.tier !== "chunk"
        ? undefined
        : chunks.find((c) => c.first === plan.offset);
      const hit = entry ? await chunkTimeHit(this.dir, entry, sinceUs, stats) : null;
      return hit ? answer(hit.offset, hit.ts, true) : answer(plan.offset, plan.ts, plan.exact);
    }
    // The segments' times are in their files: the last segment whose first
    // record is older than the time holds the answer, or the next one starts it.
    const firstTime = async (i: number): Promise<number> => {
      if (stats) stats.reads++;
      const path = join(dir, segmentFileName(firsts[i]));
      const file = await Deno.open(path, { read: true });
      try {
        const head = await readAt(file, HEADER_BYTES, RECORD_HEAD_BYTES);
        if (head.length < RECORD_HEAD_BYTES) return Infinity; // no row yet
        const view = new DataView(head.buffer, head.byteOffset, head.length);
        return getU64(view, 0) === firsts[i] ? getU64(view, 8) : Infinity;
      } finally {
        file.close();
      }
    };
    let lo = plan.index;
    let hi = firsts.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((await firstTime(mid)) >= sinceUs) hi = mid;
      else lo = mid + 1;
    }
    // Segment lo is the first starting at or after the time; lo - 1 may hold it.
    for (let i = Math.max(plan.index, lo - 1); i < firsts.length; i++) {
      const path = join(dir, segmentFileName(firsts[i]));
      const file = await Deno.open(path, { read: true });
      try {
        const header = await readHeader(file, path);
        const size = (await file.stat()).size;
        let hit = null;
        try {
          hit = await seekTime(file, path, header, sinceUs, {
            size,
            maxPayloadBytes: MAX_PAYLOAD,
            stats,
          });
        } catch (err) {
          // A torn tail of the last segment is not a row yet.
          if (!(err instanceof LogCorruptError) || i < firsts.length - 1) throw err;
        }
        if (hit) return answer(hit.offset, hit.ts, true);
      } finally {
        file.close();
      }
      if (i >= lo) break;
    }
    return answer(end, null, true);
  }

  /**
   * Record batches with offsets in `[from, to]`, in order, as the folder holds
   * them while reading (rows appended meanwhile up to `to` are included).
   *
   * @throws {LogEvictedError} when `from` is below what the folder holds.
   * @throws {LogCorruptError} when a record or a chunk fails its checks.
   */
  async *read(from: number, to: number): AsyncGenerator<RecordBatch> {
    const dir = this.dir;
    let next = Math.max(1, from);
    let replans = 0;
    // Sealed segments read to their end: their row counts, by first offset.
    const sealed = new Map<number, number>();
    while (next <= to) {
      const firsts = await segmentFirsts(dir);
      const chunks = (await readManifest(dir))?.chunks ?? [];
      const segments: TierSegment[] = firsts.map((f) => {
        const count = sealed.get(f);
        // Not read yet: it may hold any offset from its first on.
        return count === undefined
          ? { firstOffset: f, count: Infinity, sealed: false }
          : { firstOffset: f, count, sealed: true };
      });
      const tier = locateOffset({ segments, chunks, archived: [], end: Infinity }, next);
      try {
        if (tier.kind === "end" || tier.kind === "archive") return;
        if (tier.kind === "evicted") throw new LogEvictedError(next, tier.earliest);
        if (tier.kind === "chunk") {
          for await (const b of this.#readChunk(tier.entry, next, to)) {
            next = b.offsets[b.count - 1] + 1;
            yield b;
          }
          if (next > to) return;
          next = Math.max(next, tier.entry.last + 1);
        } else {
          const i = tier.index;
          if (next < firsts[i]) next = firsts[i]; // a fence's gap
          const path = join(dir, segmentFileName(firsts[i]));
          const segment = this.#readSegment(path, next, to, i === firsts.length - 1);
          let r: IteratorResult<RecordBatch, SegmentEnd>;
          try {
            while (!(r = await segment.next()).done) {
              next = r.value.offsets[r.value.count - 1] + 1;
              yield r.value;
            }
          } finally {
            // Closes the file if the caller stopped early.
            await segment.return({ done: true, nextOffset: next, sealedCount: null });
          }
          const end = r.value;
          if (end.done) return;
          sealed.set(firsts[i], end.sealedCount ?? 0);
          next = Math.max(next, end.nextOffset);
        }
        replans = 0;
      } catch (err) {
        if (!(err instanceof Deno.errors.NotFound) || ++replans > MAX_REPLANS) throw err;
        // The file went away under us: a live writer moved its rows; plan again.
      }
    }
  }

  async *#readChunk(entry: ChunkEntry, from: number, to: number): AsyncGenerator<RecordBatch> {
    const cursor = new ChunkCursor(chunkPath(this.dir, entry.sha256), entry);
    await cursor.open();
    try {
      while (true) {
        const batch = await cursor.read(this.#readBytes);
        if (batch.count === 0) return;
        const out = clipBatch(batch, from, to);
        if (out.count > 0) yield out;
        if (batch.offsets[batch.count - 1] >= to) return;
      }
    } finally {
      cursor.close();
    }
  }

  // Reads one segment file from `from` through `to` under the reading rule
  // (`last`: it is the log's last segment, which may end in a torn tail).
  async *#readSegment(
    path: string,
    from: number,
    to: number,
    last: boolean,
  ): AsyncGenerator<RecordBatch, SegmentEnd> {
    const file = await Deno.open(path, { read: true });
    try {
      const size = (await file.stat()).size;
      const header = await readHeader(file, path);
      const start = from <= header.firstOffset
        ? segmentStart(header)
        : await seekStart(file, header, size, from);
      const records = readSegmentRecords(file, path, header, {
        size,
        last,
        start,
        maxPayloadBytes: MAX_PAYLOAD,
        blockBytes: Math.max(this.#readBytes, header.beaconInterval + 4096),
        batchBytes: this.#readBytes,
      });
      while (true) {
        const r = await records.next();
        if (r.done) {
          const scan = r.value;
          if (scan.endMark) {
            return {
              done: false,
              nextOffset: scan.nextOffset,
              sealedCount: scan.nextOffset - header.firstOffset,
            };
          }
          if (last) return { done: true, nextOffset: scan.nextOffset, sealedCount: null };
          if (scan.nextOffset === header.firstOffset && scan.physicalEnd === size) {
            // An empty segment a fence left behind (open removes it): on to the next.
            return { done: false, nextOffset: scan.nextOffset, sealedCount: 0 };
          }
          throw new LogCorruptError(path, scan.physicalEnd, "sealed segment has no end mark");
        }
        const batch = r.value;
        const out = clipBatch(batch, from, to);
        if (out.count > 0) yield out;
        if (batch.offsets[batch.count - 1] >= to) {
          return { done: true, nextOffset: to + 1, sealedCount: null };
        }
      }
    } finally {
      file.close();
    }
  }
}
