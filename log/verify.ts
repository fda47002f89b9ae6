/**
 * Read-only checks of a log folder, for `cli.ts verify` and `cli.ts inspect`:
 * they take no lock and change nothing, so they can run beside a live writer.
 *
 * @module
 */

import { basename, join } from "node:path";
import {
  BEACON_BYTES,
  decodeBeacon,
  HEADER_BYTES,
  Layout,
  parseSegmentFileName,
  type SegmentHeader,
} from "./segment/format.ts";
import {
  readAt,
  readHeader,
  SegmentCursor,
  segmentStart,
  startAfterBeacon,
} from "./segment/reader.ts";
import { LogCorruptError } from "./errors.ts";
import { DEFAULT_MAX_PAYLOAD_BYTES } from "./options.ts";
import {
  checkSegmentStreamId,
  type LogMeta,
  mayBeFenceLeftover,
  META_FILE,
  readMeta,
} from "./log_meta.ts";
import { readManifest } from "./chunk/manifest_file.ts";
import { checkSidecarFiles } from "./disk/meta_file.ts";
import { scanSegmentRecords } from "./segment/scan.ts";
import {
  ChunkCorruptError,
  ChunkCursor,
  type ChunkEntry,
  chunkPath,
  type Manifest,
  sha256Hex,
} from "./chunk/chunk.ts";
import { readChunkTimes } from "./chunk/times.ts";
import { PRODUCERS_FILE } from "./producer/journal.ts";
import { DEFAULT_MAX_PRODUCERS } from "./producer/table.ts";
import { checkProducerJournal, type ProducerJournalReport } from "./producer/verify.ts";

/** What verify or inspect found in one segment. */
export interface SegmentReport {
  /** File name. */
  file: string;
  /** File size in bytes. */
  bytes: number;
  /** First offset (from the header). */
  firstOffset: number;
  /** Last offset, or `null` when the segment holds no row. */
  lastOffset: number | null;
  /** Records. */
  rows: number;
  /** Whether it ends with an end mark. */
  sealed: boolean;
  /** Beacons in the file. */
  beacons: number;
  /** Bytes after the last complete record of an unsealed segment (an append in progress or a torn tail). */
  tailBytes: number;
  /** Append time of the first and last record, µs. */
  firstTimeUs: number | null;
  /** Append time of the last record, µs. */
  lastTimeUs: number | null;
  /** Beacon interval. */
  beaconInterval: number;
}

/** The result of {@linkcode verifyLog}. */
export interface LogReport {
  /** The log folder. */
  dir: string;
  /** The stream name. */
  name: string;
  /** The stream id. */
  streamId: string;
  /** Segments, oldest first. */
  segments: SegmentReport[];
  /** The chunk manifest, when the log keeps chunks. */
  manifest: Manifest | null;
  /** Rows in the chunks (below the first segment). */
  chunkRows: number;
  /** Rows in all segments. */
  rows: number;
  /** The producer journal (`producers.log`), when the log has one (verify only; inspect: null). */
  producers: ProducerJournalReport | null;
  /** The first problem found, or `null` when every check passed. */
  error: LogCorruptError | null;
}

async function readLogMeta(dir: string): Promise<{ meta: LogMeta; checked: boolean }> {
  const r = await readMeta(dir);
  if (r === null) throw new Deno.errors.NotFound(`no log at ${dir} (${META_FILE} is missing)`);
  return r;
}

/** How many newer manifests verify moves on to before it gives up on a log that keeps changing. */
const MAX_MANIFEST_RELOADS = 1000;

/**
 * Whether manifest `m` accounts for the deletion of the segment starting at
 * `first`: a live log deletes a sealed segment only once a chunk listed in the
 * manifest holds its rows (and retention may since have dropped that chunk,
 * leaving `through` at or past it).
 */
function coversSegment(m: Manifest | null, first: number): boolean {
  if (m === null || m.through < first) return false;
  const c = m.chunks;
  return c.length === 0 || first < c[0].first || c.some((e) => e.first <= first && first <= e.last);
}

// Checks one chunk: its SHA-256, its size, that it decompresses, that its
// lines are the offsets the manifest says, and its time index if it has one.
// False when its file is gone.
async function verifyChunk(dir: string, c: ChunkEntry): Promise<boolean> {
  const path = chunkPath(dir, c.sha256);
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
  if (sha256Hex(bytes) !== c.sha256) {
    throw new LogCorruptError(path, 0, "SHA-256 does not match the chunk's name");
  }
  if (bytes.length !== c.bytes) {
    throw new LogCorruptError(path, 0, `${bytes.length} bytes, the manifest says ${c.bytes}`);
  }
  const cursor = new ChunkCursor(path, c);
  try {
    await cursor.open();
  } catch (err) {
    // Deleted between the two opens: the caller decides whether that is explained.
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
  try {
    while ((await cursor.read()).count > 0) { /* checks as it reads */ }
  } catch (err) {
    if (err instanceof ChunkCorruptError) throw new LogCorruptError(path, 0, err.message);
    throw err;
  } finally {
    cursor.close();
  }
  // Its time index, when it has one (older chunks and chunks restored from
  // the archive have none): damage is a finding, naming the index's file.
  try {
    await readChunkTimes(dir, c);
  } catch (err) {
    if (err instanceof ChunkCorruptError) throw new LogCorruptError(err.chunk, 0, err.message);
    throw err;
  }
  return true;
}

// Checks every chunk of the manifest (see verifyChunk). A chunk whose file
// disappears during the check is no finding when a newer manifest no longer
// lists it (a merge retired it, or retention dropped it): the check goes on
// with that manifest, skipping chunks already checked. Returns the manifest
// checked last and the rows of its chunks below the first segment.
async function verifyChunks(
  dir: string,
  manifest: Manifest,
  firstSegment: number | null,
  onChunk?: (c: ChunkEntry) => void,
): Promise<{ manifest: Manifest; rows: number }> {
  const checked = new Set<string>();
  let m = manifest;
  for (let reloads = 0;; reloads++) {
    let gone: ChunkEntry | null = null;
    for (const c of m.chunks) {
      if (checked.has(c.sha256)) continue;
      if (!(await verifyChunk(dir, c))) {
        gone = c;
        break;
      }
      checked.add(c.sha256);
      onChunk?.(c);
    }
    if (gone === null) break;
    const fresh = await readManifest(dir);
    if (fresh === null || fresh.chunks.some((c) => c.sha256 === gone.sha256)) {
      throw new LogCorruptError(
        chunkPath(dir, gone.sha256),
        0,
        "chunk listed in the manifest is missing",
      );
    }
    if (reloads >= MAX_MANIFEST_RELOADS) {
      throw new Error(
        `Cannot verify ${dir}: its manifest changed ${reloads} times during the check; run it again`,
      );
    }
    m = fresh;
  }
  let rows = 0;
  for (const c of m.chunks) rows += firstSegment === null || c.last < firstSegment ? c.rows : 0;
  return { manifest: m, rows };
}

/** Segment file names in `dir`, oldest first. */
export async function listSegments(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (e.isFile && parseSegmentFileName(e.name) !== null) names.push(e.name);
  }
  return names.sort();
}

/**
 * How far {@linkcode verifyLog} has got.
 */
export interface VerifyProgress {
  /** Bytes of segments and chunks checked so far. */
  bytes: number;
  /** Bytes of segments and chunks to check (as listed when the check started). */
  totalBytes: number;
  /** Rows checked so far. */
  rows: number;
}

/**
 * Options of {@linkcode verifyLog}.
 */
export interface VerifyOptions {
  /** Called as the check goes on (after each block of records and each chunk). */
  onProgress?: (progress: VerifyProgress) => void;
  /**
   * The writer's `maxProducers`: producers it remembers, so the journal check
   * knows when a producer was forgotten and may start its seqs anew.
   * @default {DEFAULT_MAX_PRODUCERS} (10000)
   */
  maxProducers?: number;
  /** The writer's `maxProducerHolders` (holders whose producers it remembers). @default 100000 */
  maxProducerHolders?: number;
}

/**
 * Reads every record of every segment of the log in `dir` and checks its
 * checksum, terminator, offset and the beacons and end marks around it, and
 * every chunk the manifest lists; checks `log.json`, `manifest.json`,
 * every sidecar-checked file (`schema.json`), and the producer journal
 * (`producers.log`: its checksums, and its records against the log's
 * offsets, see `producer/verify.ts`). Never throws for damage: the
 * first problem found is the report's `error`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log, verifyLog } from "./mod.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.append(new TextEncoder().encode("{}"));
 * await log.close();
 * const report = await verifyLog(dir);
 * equal(report.rows, 1);
 * equal(report.error, null);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function verifyLog(dir: string, options: VerifyOptions = {}): Promise<LogReport> {
  const onProgress = options.onProgress;
  const report: LogReport = {
    dir,
    name: "",
    streamId: "",
    segments: [],
    manifest: null,
    chunkRows: 0,
    rows: 0,
    producers: null,
    error: null,
  };
  let meta: LogMeta;
  let checked: boolean;
  try {
    // A damaged log.json or manifest is a finding to report, like any other.
    const read = await readLogMeta(dir);
    meta = read.meta;
    checked = read.checked;
    report.name = meta.name ?? "";
    report.streamId = meta.stream_id;
    report.manifest = await readManifest(dir);
    await checkSidecarFiles(dir);
  } catch (err) {
    if (!(err instanceof LogCorruptError)) throw err;
    report.error = err;
    return report;
  }
  // Read before the segments: each of its records was synced before the
  // log's end is read below (see `producer/verify.ts`).
  const journalPath = join(dir, PRODUCERS_FILE);
  const journal = await Deno.readFile(journalPath).catch((err) => {
    if (err instanceof Deno.errors.NotFound) return null; // nothing published with a producer
    throw err;
  });
  const names = await listSegments(dir);
  let total = 0;
  for (const n of names) total += await sizeOf(join(dir, n));
  for (const c of report.manifest?.chunks ?? []) total += c.bytes;
  let done = 0;
  let expectNext: number | null = null;
  for (let i = 0; i < names.length; i++) {
    const path = join(dir, names[i]);
    let file: Deno.FsFile | null = null;
    try {
      file = await openSegment(dir, path);
      if (file === null) continue; // chunked and deleted since it was listed
      const header = await headerOf(file, path, i === names.length - 1);
      if (header === null) continue; // being created by the live writer
      const size = (await file.stat()).size;
      await checkSegmentStreamId(dir, meta, checked, path, header.streamId);
      if (expectNext !== null && header.firstOffset < expectNext) {
        throw new LogCorruptError(
          path,
          24,
          `first offset ${header.firstOffset} overlaps the previous segment`,
        );
      }
      const layout = new Layout(header.beaconInterval);
      // The rule recovery applies (see `segment/scan.ts`), with the largest
      // payload any log accepts: verify does not know the writer's limit.
      const cursor = await scanSegmentRecords(file, path, header, {
        size,
        last: i === names.length - 1,
        maxPayloadBytes: Math.max(DEFAULT_MAX_PAYLOAD_BYTES, 0xffff_ff00),
        onRead: (end, rows) =>
          onProgress?.({ bytes: done + end, totalBytes: total, rows: report.rows + rows }),
      });
      // A damaged record at the tail is a finding (open would cut it, losing
      // a row if it was acknowledged); an unfinished one is an append in
      // progress, or a torn one that open cuts.
      if (cursor.torn?.damage) throw cursor.torn.damage;
      const first = cursor.firstTimeUs || null;
      const last = cursor.lastTimeUs || null;
      const rows = cursor.rows;
      const sealed = cursor.endMark !== null;
      const tailBytes = size - cursor.physicalEnd;
      if (sealed && tailBytes > 0) {
        throw new LogCorruptError(
          path,
          cursor.physicalEnd,
          `${tailBytes} bytes after the end mark`,
        );
      }
      // What open does (recovery.ts): an empty unsealed segment before the
      // last passes only as a fence's leftover.
      // (log.json is read again: a fence may have named it since the start.)
      const leftover = rows === 0 && size === HEADER_BYTES &&
        (mayBeFenceLeftover(meta, header.firstOffset) ||
          mayBeFenceLeftover((await readMeta(dir))?.meta ?? meta, header.firstOffset));
      if (!sealed && i < names.length - 1 && !leftover) {
        throw new LogCorruptError(path, cursor.physicalEnd, "sealed segment has no end mark");
      }
      report.segments.push({
        file: names[i],
        bytes: size,
        firstOffset: header.firstOffset,
        lastOffset: rows > 0 ? header.firstOffset + rows - 1 : null,
        rows,
        sealed,
        beacons: Math.max(0, Math.floor((size - BEACON_BYTES) / layout.interval)),
        tailBytes,
        firstTimeUs: first,
        lastTimeUs: last,
        beaconInterval: header.beaconInterval,
      });
      report.rows += rows;
      expectNext = header.firstOffset + rows;
      done += size;
    } catch (err) {
      if (!(err instanceof LogCorruptError)) throw err;
      report.error = err;
      return report;
    } finally {
      file?.close();
    }
  }
  try {
    // Read again: a live log may have chunked segments since the first read,
    // and these chunks hold the rows of the segments that were gone.
    const m = await readManifest(dir);
    report.manifest = m;
    if (m) {
      let rows = report.rows;
      const checked = await verifyChunks(dir, m, report.segments[0]?.firstOffset ?? null, (c) => {
        done += c.bytes;
        rows += c.rows;
        onProgress?.({ bytes: done, totalBytes: total, rows });
      });
      report.manifest = checked.manifest;
      report.chunkRows = checked.rows;
      report.rows += checked.rows;
    }
    if (journal !== null) {
      const end = expectNext ?? (report.manifest?.through ?? 0) + 1;
      const max = options.maxProducers ?? DEFAULT_MAX_PRODUCERS;
      report.producers = checkProducerJournal(
        journal,
        journalPath,
        end,
        max,
        options.maxProducerHolders,
      );
    }
  } catch (err) {
    if (!(err instanceof LogCorruptError)) throw err;
    report.error = err;
  }
  return report;
}

/**
 * The header of a segment; `null` for the newest segment (`newest`) while it
 * is shorter than a header or its header does not decode yet: a live writer
 * creates the file, then writes the header. Such a segment never held a row
 * (recovery makes a torn one anew). The size is read after the header, so
 * that a header read whole is never past the size the caller sees.
 */
async function headerOf(
  file: Deno.FsFile,
  path: string,
  newest: boolean,
): Promise<SegmentHeader | null> {
  try {
    return await readHeader(file, path);
  } catch (err) {
    if (!(err instanceof LogCorruptError) || !newest) throw err;
    if ((await file.stat()).size <= HEADER_BYTES) return null;
    throw err;
  }
}

/** A file's size; 0 when it is gone (a live log deletes chunked segments). */
async function sizeOf(path: string): Promise<number> {
  try {
    return (await Deno.stat(path)).size;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
    return 0;
  }
}

/**
 * Opens a listed segment for reading; `null` when it has disappeared since it
 * was listed and the manifest, read again, says why (a live log deletes a
 * segment once a chunk holds its rows). A disappearance the manifest does not
 * explain throws `LogCorruptError`.
 */
async function openSegment(dir: string, path: string): Promise<Deno.FsFile | null> {
  try {
    return await Deno.open(path, { read: true });
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const first = parseSegmentFileName(basename(path));
  if (first !== null && coversSegment(await readManifest(dir), first)) return null;
  throw new LogCorruptError(
    path,
    0,
    "segment disappeared during the check, and the manifest does not hold its rows",
  );
}

/**
 * Describes the log in `dir` from headers and beacons only (fast, no record
 * checks): segments, offsets, sizes, beacons.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { inspectLog, Log } from "./mod.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.append(new TextEncoder().encode("{}"));
 * await log.close();
 * equal((await inspectLog(dir)).segments.length, 1);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function inspectLog(dir: string): Promise<LogReport> {
  const { meta } = await readLogMeta(dir);
  const names = await listSegments(dir);
  const report: LogReport = {
    dir,
    name: meta.name ?? "",
    streamId: meta.stream_id,
    segments: [],
    manifest: await readManifest(dir),
    chunkRows: 0,
    rows: 0,
    producers: null,
    error: null,
  };
  for (let i = 0; i < names.length; i++) {
    const path = join(dir, names[i]);
    let file: Deno.FsFile | null;
    try {
      file = await openSegment(dir, path);
    } catch (err) {
      if (!(err instanceof LogCorruptError)) throw err;
      report.error ??= err;
      continue;
    }
    if (file === null) continue; // chunked and deleted since it was listed
    try {
      const header = await headerOf(file, path, i === names.length - 1);
      if (header === null) continue; // being created by the live writer
      const size = (await file.stat()).size;
      const layout = new Layout(header.beaconInterval);
      const beacons = Math.max(0, Math.floor((size - BEACON_BYTES) / layout.interval));
      // The last beacon says how many records precede it; read the rest.
      let start = segmentStart(header);
      for (let k = beacons; k >= 1; k--) {
        const b = decodeBeacon(await readAt(file, k * layout.interval, BEACON_BYTES), 0);
        if (!b) continue;
        const s = startAfterBeacon(layout, header, k, b);
        if (s) {
          start = s;
          break;
        }
      }
      const cursor = new SegmentCursor(file, path, layout, start, {
        maxPayloadBytes: 0xffff_ff00,
      });
      let lastTime: number | null = null;
      try {
        while (!cursor.endMark) {
          const b = await cursor.read(size);
          if (b.count === 0) break;
          lastTime = b.times[b.count - 1];
        }
      } catch (err) {
        if (!(err instanceof LogCorruptError)) throw err;
        report.error ??= err;
      }
      const rows = cursor.nextOffset - header.firstOffset;
      report.segments.push({
        file: names[i],
        bytes: size,
        firstOffset: header.firstOffset,
        lastOffset: rows > 0 ? cursor.nextOffset - 1 : null,
        rows,
        sealed: cursor.endMark !== null,
        beacons,
        tailBytes: size - cursor.physicalEnd,
        firstTimeUs: null,
        lastTimeUs: lastTime,
        beaconInterval: header.beaconInterval,
      });
      report.rows += rows;
    } finally {
      file.close();
    }
  }
  // Read again: the chunks of segments a live log deleted meanwhile count.
  report.manifest = await readManifest(dir);
  const firstSeg = report.segments[0]?.firstOffset ?? Infinity;
  for (const c of report.manifest?.chunks ?? []) {
    if (c.last < firstSeg) report.chunkRows += c.rows;
  }
  report.rows += report.chunkRows;
  return report;
}
