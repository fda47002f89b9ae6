/**
 * Reading a log folder without its lock, for exports beside a live server:
 * plan from the manifest and the segment files on disk, read, and plan again
 * whenever a file a live writer moved has gone. (A second copy of what the
 * log's own readers do; to be replaced by the log's lock-free folder reader.)
 *
 * @module
 */

import { join } from "node:path";
import {
  type ChunkEntry,
  inspectLog,
  LogCorruptError,
  LogEvictedError,
  type LogReport,
  type RecordBatch,
} from "../log/mod.ts";
import { ChunkCursor, chunkPath } from "../log/chunk.ts";
import { Layout, parseSegmentFileName, segmentFileName } from "../log/format.ts";
import { readHeader, seekStart, SegmentCursor, segmentStart } from "../log/segment_reader.ts";
import { findLaterRecord } from "../log/recovery.ts";
import { exists, readManifest } from "../log/fs.ts";
import { clip, READ_BYTES, type Source } from "./_log_source.ts";

/** Retries of a lock-free read when files move under it (a live writer chunking or merging). */
const MAX_REPLANS = 8;

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

async function segmentFirsts(dir: string): Promise<number[]> {
  const firsts: number[] = [];
  for await (const e of Deno.readDir(dir)) {
    const first = e.isFile ? parseSegmentFileName(e.name) : null;
    if (first !== null) firsts.push(first);
  }
  return firsts.sort((a, b) => a - b);
}

/**
 * A log folder as a {@linkcode Source}, read without its lock and changing
 * nothing, beside a live writer if there is one (see `export.ts`).
 *
 * @example
 * ```ts
 * import { Log } from "../log/mod.ts";
 * import { openDir } from "./_folder_source.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.appendMany(["1", "2"].map((t) => new TextEncoder().encode(t)));
 * await log.close();
 * const source = await openDir(dir);
 * console.log(source.earliest, source.last); // 1 2
 * ```
 */
export async function openDir(dir: string): Promise<Source> {
  const report = await inspect(dir);
  const segs = report.segments.filter((s) => s.rows > 0);
  const chunks = report.manifest?.chunks ?? [];
  const firstSeg = report.segments[0]?.firstOffset ?? Infinity;
  const lows = [chunks[0]?.first, segs[0]?.firstOffset].filter((x) => x !== undefined);
  const earliest = lows.length > 0 ? Math.min(...lows as number[]) : null;
  let last: number | null = null;
  for (const s of segs) last = Math.max(last ?? 0, s.lastOffset ?? 0);
  for (const c of chunks) {
    if (c.first < firstSeg || last === null) last = Math.max(last ?? 0, c.last);
  }
  return {
    earliest,
    last,
    read: (from, to) => readDir(dir, from, to),
    close: () => Promise.resolve(),
  };
}

/**
 * Reads `[from, to]` from a log folder without its lock: plan from the
 * manifest and the segment files on disk, read, and plan again from where it
 * stopped whenever a file has gone (chunked, merged, or expired under us).
 */
async function* readDir(dir: string, from: number, to: number): AsyncGenerator<RecordBatch> {
  let next = from;
  let replans = 0;
  while (next <= to) {
    const firsts = await segmentFirsts(dir);
    const manifest = await readManifest(dir);
    const chunks = manifest?.chunks ?? [];
    const segStart = firsts[0] ?? Infinity;
    let step: { kind: "chunk"; entry: ChunkEntry } | { kind: "segment"; i: number } | null = null;
    if (next < segStart) {
      const entry = chunks.find((c) => c.last >= next);
      if (entry && entry.first < segStart) {
        const earliest = chunks[0].first;
        if (next < earliest) throw new LogEvictedError(next, earliest);
        step = { kind: "chunk", entry };
      } else if (firsts.length > 0) {
        if (chunks.length > 0 && next < chunks[0].first) {
          throw new LogEvictedError(next, chunks[0].first);
        }
        next = segStart; // a gap (a fence), or the chunks end below the segments
        continue;
      } else {
        return;
      }
    } else {
      let i = firsts.length - 1;
      while (firsts[i] > next) i--;
      step = { kind: "segment", i };
    }
    try {
      if (step.kind === "chunk") {
        const entry = step.entry;
        const cursor = new ChunkCursor(chunkPath(dir, entry.sha256), entry);
        await cursor.open();
        try {
          while (true) {
            const batch = await cursor.read(READ_BYTES);
            if (batch.count === 0) break;
            const out = clip(batch, next, to);
            if (out.count > 0) {
              next = out.offsets[out.count - 1] + 1;
              yield out;
            }
            if (batch.offsets[batch.count - 1] >= to) return;
          }
        } finally {
          cursor.close();
        }
        next = Math.max(next, entry.last + 1);
      } else {
        const path = join(dir, segmentFileName(firsts[step.i]));
        const segment = readSegment(path, next, to, step.i === firsts.length - 1);
        let r: IteratorResult<RecordBatch, { done: boolean; nextOffset: number }>;
        try {
          while (!(r = await segment.next()).done) {
            next = r.value.offsets[r.value.count - 1] + 1;
            yield r.value;
          }
        } finally {
          await segment.return({ done: true, nextOffset: next }); // closes the file if we stopped early
        }
        const after = r.value;
        if (after.done) return;
        // A sealed segment ended: on to the next one (past any fenced gap).
        const following = firsts[step.i + 1];
        if (following === undefined) return;
        next = Math.max(next, after.nextOffset, following);
      }
      replans = 0;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound) || ++replans > MAX_REPLANS) throw err;
      // The file went away under us: a live writer moved its rows; plan again.
    }
  }
}

/**
 * Reads one segment file from `from` through `to`, checking every record
 * (`last`: it is the log's last segment, which may end in a torn record).
 * Returns whether the range is complete (it reached `to`, or the end of what
 * an unsealed segment holds) and, for a sealed segment, the offset after its
 * last record.
 */
async function* readSegment(
  path: string,
  from: number,
  to: number,
  last: boolean,
): AsyncGenerator<RecordBatch, { done: boolean; nextOffset: number }> {
  const file = await Deno.open(path, { read: true });
  try {
    const size = (await file.stat()).size;
    const header = await readHeader(file, path);
    const layout = new Layout(header.beaconInterval);
    let limit = size;
    let want = from;
    const cursorAt = async (): Promise<SegmentCursor> =>
      new SegmentCursor(
        file,
        path,
        layout,
        want <= header.firstOffset
          ? segmentStart(header)
          : await seekStart(file, header, limit, want),
        { maxPayloadBytes: 0xffff_ff00, blockBytes: Math.max(READ_BYTES, layout.interval + 4096) },
      );
    let cursor = await cursorAt();
    while (true) {
      let batch: RecordBatch;
      try {
        batch = await cursor.read(limit, READ_BYTES);
      } catch (err) {
        if (!last || !(err instanceof LogCorruptError) || limit !== size) throw err;
        // Damage in the last segment is a torn tail (never a row) only when no
        // valid record follows it: the rule recovery applies on open. The
        // records before it are good: read again up to where it starts.
        const later = await findLaterRecord(file, layout, err.position, size, cursor.nextOffset);
        if (later !== null) throw err;
        limit = err.position;
        cursor = await cursorAt();
        continue;
      }
      if (batch.count === 0) {
        // The end mark of a sealed segment, or the end of what an unsealed one holds.
        return { done: cursor.endMark === null, nextOffset: cursor.nextOffset };
      }
      const out = clip(batch, want, to);
      if (out.count > 0) {
        want = out.offsets[out.count - 1] + 1;
        yield out;
      }
      if (batch.offsets[batch.count - 1] >= to) return { done: true, nextOffset: to + 1 };
    }
  } finally {
    file.close();
  }
}
