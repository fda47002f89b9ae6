/**
 * The one rule for reading the records of a segment file, shared by recovery
 * (`Log.open`), `verify` and the lock-free readers, so that they cannot
 * disagree about what a file holds:
 *
 * - every record is checked by {@linkcode SegmentCursor} (checksum,
 *   terminator, offset sequence, beacons, end mark);
 * - damage in any segment but the log's last is corruption;
 * - in the last segment, damage (a failed check, or a record that claims more
 *   bytes than the file holds) is a **torn tail** — an append that never
 *   completed, so never acknowledged — only when no valid record with a later
 *   offset follows it in the file; otherwise it is corruption, and the error
 *   says where the valid records resume.
 *
 * What to do with a torn tail is the caller's: recovery cuts it off, a
 * reader leaves it out, verify reports a damaged record there (an unfinished
 * one is an append in progress beside a live writer).
 *
 * @module
 */

import {
  checksum,
  type EndMark,
  getU64,
  Layout,
  RECORD_HEAD_BYTES,
  type SegmentHeader,
  TERMINATOR,
} from "./format.ts";
import {
  type CursorStart,
  readAt,
  type RecordBatch,
  SegmentCursor,
  segmentStart,
} from "./reader.ts";
import { LogCorruptError } from "../errors.ts";

/** How {@linkcode readSegmentRecords} reads. */
export interface SegmentScanOptions {
  /** Bytes of the file to read (its size, or the durable size a writer reported). */
  size: number;
  /** Whether this is the log's last segment, which may end in a torn tail. */
  last: boolean;
  /** Where to start. @default the first record */
  start?: CursorStart;
  /** Largest payload a record may claim. */
  maxPayloadBytes: number;
  /** Most bytes read at once. @default 4 MiB */
  blockBytes?: number;
  /** Most bytes handed out per batch. @default blockBytes */
  batchBytes?: number;
  /** Called after each batch with the physical end of the records read so far, and their count. */
  onRead?: (physicalEnd: number, rows: number) => void;
}

/** The end of a last segment that is not records: an append that never completed. */
export interface TornTail {
  /** Where it starts: the end of the last good record. */
  position: number;
  /** The failed check, or `null` for a record cut short (unfinished). */
  damage: LogCorruptError | null;
}

/** What {@linkcode readSegmentRecords} found once it has read to the end. */
export interface SegmentScan {
  /** The end mark, when the segment is sealed. */
  endMark: EndMark | null;
  /** Offset after the last good record. */
  nextOffset: number;
  /** Physical end of the last good record (or of the end mark). */
  physicalEnd: number;
  /** Running checksum of the records, when read from the first. */
  running: number | null;
  /** Bytes past the last complete record that are not a (torn) record in progress. */
  carryBytes: number;
  /** Append time of the first and last record read (0: none read). */
  firstTimeUs: number;
  /** Append time of the last record read (0: none). */
  lastTimeUs: number;
  /** Records read. */
  rows: number;
  /** The torn tail of a last segment, if it has one. */
  torn: TornTail | null;
}

/**
 * Searches the file bytes after `fromPhys` for a valid record whose offset is
 * above `expectOffset`; returns its physical position or `null`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { findLaterRecord } from "./scan.ts";
 * const path = await Deno.makeTempFile();
 * const file = await Deno.open(path, { read: true });
 * equal(await findLaterRecord(file, 0, 0, 1), null);
 * file.close();
 * await Deno.remove(path);
 * ```
 */
export async function findLaterRecord(
  file: Deno.FsFile,
  fromPhys: number,
  size: number,
  expectOffset: number,
): Promise<number | null> {
  if (fromPhys >= size) return null;
  const buf = await readAt(file, fromPhys, size - fromPhys);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.length);
  const lo = expectOffset + 1;
  const hi = expectOffset + 0x1_0000_0000;
  for (let i = 1; i + RECORD_HEAD_BYTES + 5 <= buf.length; i++) {
    // Offsets are below 2^53: the top bytes of a record's first word are zero.
    if (buf[i] !== 0 || buf[i + 1] !== 0) continue;
    const offset = getU64(view, i);
    if (offset < lo || offset > hi) continue;
    const n = view.getUint32(i + 16);
    const end = i + RECORD_HEAD_BYTES + n;
    if (end + 5 > buf.length || buf[end + 4] !== TERMINATOR) continue;
    if (checksum(buf.subarray(i, end)) === view.getUint32(end)) {
      return fromPhys + i;
    }
  }
  return null;
}

/**
 * Reads the records of one segment (its header already read) under the rule
 * above, yielding them in batches, and returns what it found. Throws
 * {@linkcode LogCorruptError} for damage that is not a torn tail.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * import { readHeader } from "./reader.ts";
 * import { readSegmentRecords } from "./scan.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.append("{}");
 * const path = log.segments()[0].path;
 * await log.close();
 * const file = await Deno.open(path, { read: true });
 * const header = await readHeader(file, path);
 * const size = (await file.stat()).size;
 * const records = readSegmentRecords(file, path, header, { size, last: true, maxPayloadBytes: 1 << 24 });
 * let r = await records.next();
 * while (!r.done) r = await records.next();
 * equal(r.value.rows, 1);
 * file.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function* readSegmentRecords(
  file: Deno.FsFile,
  path: string,
  header: SegmentHeader,
  options: SegmentScanOptions,
): AsyncGenerator<RecordBatch, SegmentScan> {
  const { size, last } = options;
  const layout = new Layout(header.beaconInterval);
  const blockBytes = options.blockBytes ?? 4 << 20;
  const cursor = new SegmentCursor(
    file,
    path,
    layout,
    options.start ?? segmentStart(header),
    {
      maxPayloadBytes: options.maxPayloadBytes,
      blockBytes,
    },
  );
  const batchBytes = options.batchBytes ?? blockBytes;
  let firstTimeUs = 0;
  let lastTimeUs = 0;
  let rows = 0;
  let torn: TornTail | null = null;
  while (!cursor.endMark) {
    let batch: RecordBatch;
    try {
      batch = await cursor.read(size, batchBytes);
    } catch (err) {
      if (!(last && err instanceof LogCorruptError)) throw err;
      // Search from the end of the last good record, not from where the
      // check failed: a damaged length field can hide the damage until a
      // beacon further on, past valid records.
      const from = cursor.physicalEnd;
      const later = await findLaterRecord(file, from, size, cursor.nextOffset);
      if (later !== null) {
        throw new LogCorruptError(
          path,
          later < err.position ? from : err.position,
          later < err.position
            ? `record ${cursor.nextOffset} is damaged (${err.detail} at byte ${err.position}), ` +
              `and valid records follow it (from byte ${later})`
            : `${err.detail}, and valid records follow it (from byte ${later})`,
        );
      }
      torn = { position: cursor.physicalEnd, damage: err };
      break;
    }
    if (batch.count === 0) break;
    if (firstTimeUs === 0) firstTimeUs = batch.times[0];
    lastTimeUs = batch.times[batch.count - 1];
    rows += batch.count;
    options.onRead?.(cursor.physicalEnd, rows);
    yield batch;
  }
  let carryBytes = cursor.carryBytes;
  if (torn === null && last && carryBytes > 0 && cursor.endMark === null) {
    // An unfinished record at the end: a torn append, unless valid records
    // follow it (a damaged length field made it look longer than it is).
    const later = await findLaterRecord(
      file,
      cursor.physicalEnd,
      size,
      cursor.nextOffset,
    );
    if (later !== null) {
      throw new LogCorruptError(
        path,
        cursor.physicalEnd,
        `record ${cursor.nextOffset} claims more bytes than the file holds, ` +
          `and valid records follow it (from byte ${later})`,
      );
    }
    torn = { position: cursor.physicalEnd, damage: null };
    carryBytes = 0;
  }
  return {
    endMark: cursor.endMark,
    nextOffset: cursor.nextOffset,
    physicalEnd: cursor.physicalEnd,
    running: cursor.running,
    carryBytes,
    firstTimeUs,
    lastTimeUs,
    rows,
    torn,
  };
}

/**
 * Reads a whole segment under the rule (see {@linkcode readSegmentRecords})
 * and returns what it found.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * import { readHeader } from "./reader.ts";
 * import { scanSegmentRecords } from "./scan.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.appendMany(["{}", "{}"]);
 * const path = log.segments()[0].path;
 * await log.close();
 * const file = await Deno.open(path, { read: true });
 * const header = await readHeader(file, path);
 * const size = (await file.stat()).size;
 * const scan = await scanSegmentRecords(file, path, header, { size, last: true, maxPayloadBytes: 1 << 24 });
 * equal(scan.rows, 2);
 * equal(scan.torn, null);
 * file.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function scanSegmentRecords(
  file: Deno.FsFile,
  path: string,
  header: SegmentHeader,
  options: SegmentScanOptions,
): Promise<SegmentScan> {
  const records = readSegmentRecords(file, path, header, options);
  while (true) {
    const r = await records.next();
    if (r.done) return r.value;
  }
}
