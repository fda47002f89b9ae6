/**
 * Reading one segment file: a cursor that strips beacons, checks every record
 * (checksum, terminator, offset sequence, beacon agreement) and hands out
 * batches of records without copying payloads; and a beacon search that finds
 * where to start reading for any offset in O(log n) small reads.
 *
 * @module
 */

import {
  type Beacon,
  BEACON_BYTES,
  checksum,
  decodeBeacon,
  decodeEndMark,
  decodeHeader,
  END_MAGIC,
  END_MARK_BYTES,
  type EndMark,
  foldRunning,
  getU64,
  HEADER_BYTES,
  Layout,
  RECORD_HEAD_BYTES,
  RECORD_OVERHEAD,
  RUNNING_SEED,
  type SegmentHeader,
  TERMINATOR,
} from "./format.ts";
import { LogCorruptError } from "../errors.ts";

/** Records read from a segment; payloads are views into `buf`. */
export interface RecordBatch {
  /** Bytes holding the payloads. */
  readonly buf: Uint8Array;
  /** Number of records. */
  readonly count: number;
  /** Offset of record i. */
  readonly offsets: Float64Array;
  /** Append time (µs) of record i. */
  readonly times: Float64Array;
  /** Start of record i's payload in `buf`. */
  readonly starts: Int32Array;
  /** Length of record i's payload. */
  readonly lengths: Int32Array;
}

/** An empty batch. */
export const EMPTY_BATCH: RecordBatch = {
  buf: new Uint8Array(0),
  count: 0,
  offsets: new Float64Array(0),
  times: new Float64Array(0),
  starts: new Int32Array(0),
  lengths: new Int32Array(0),
};

/**
 * The records of `batch` with offsets in `[from, to]` (the batch itself when all are).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * import { clipBatch } from "./reader.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.appendMany(["1", "2", "3"].map((t) => new TextEncoder().encode(t)));
 * const reader = log.reader(1);
 * const batch = await reader.read();
 * reader.close();
 * await log.close();
 * deepStrictEqual(Array.from(clipBatch(batch, 2, 2).offsets), [2]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function clipBatch(batch: RecordBatch, from: number, to: number): RecordBatch {
  let lo = 0;
  while (lo < batch.count && batch.offsets[lo] < from) lo++;
  let hi = batch.count;
  while (hi > lo && batch.offsets[hi - 1] > to) hi--;
  if (lo === 0 && hi === batch.count) return batch;
  if (lo >= hi) return EMPTY_BATCH;
  return {
    buf: batch.buf,
    count: hi - lo,
    offsets: batch.offsets.subarray(lo, hi),
    times: batch.times.subarray(lo, hi),
    starts: batch.starts.subarray(lo, hi),
    lengths: batch.lengths.subarray(lo, hi),
  };
}

/** Where and how a cursor starts. */
export interface CursorStart {
  /** Physical position of a record boundary. */
  phys: number;
  /** Offset of the record starting there. */
  offset: number;
  /** Running checksum of the records before it, when known. */
  running: number | null;
  /** Records of the segment before it, when known. */
  count: number | null;
}

/** Reads records of one segment file forward from a record boundary. */
export class SegmentCursor {
  readonly path: string;
  readonly #file: Deno.FsFile;
  readonly #layout: Layout;
  readonly #maxPayload: number;
  #phys: number;
  #carry: Uint8Array = new Uint8Array(0);
  #carryLogical: number;
  #expect: number;
  #running: number | null;
  #count: number | null;
  #lastOffset: number;
  #beacons: { at: number; beacon: Beacon }[] = [];
  #end: EndMark | null = null;
  readonly #readMax: number;
  #badBeacon: LogCorruptError | null = null;
  // Damage found behind good records of the same read: those records are
  // handed out first, and this is thrown by the next read.
  #pending: LogCorruptError | null = null;
  #stripped = 0;

  /**
   * A cursor over `file` (its own handle) starting at `start`. `blockBytes`
   * is the most read at once; nothing of that size is held between reads.
   */
  constructor(
    file: Deno.FsFile,
    path: string,
    layout: Layout,
    start: CursorStart,
    options: { maxPayloadBytes: number; blockBytes?: number },
  ) {
    this.#file = file;
    this.path = path;
    this.#layout = layout;
    this.#maxPayload = options.maxPayloadBytes;
    this.#phys = start.phys;
    this.#carryLogical = layout.toLogical(start.phys);
    this.#expect = start.offset;
    this.#lastOffset = start.offset - 1;
    this.#running = start.running;
    this.#count = start.count;
    this.#readMax = options.blockBytes ?? 1 << 20;
  }

  /** The end mark, once read: the segment is complete. */
  get endMark(): EndMark | null {
    return this.#end;
  }

  /** Physical position just past the last complete record (or end mark) read. */
  get physicalEnd(): number {
    return this.#layout.toPhysicalEnd(this.#carryLogical);
  }

  /** Offset of the next record expected. */
  get nextOffset(): number {
    return this.#expect;
  }

  /** Running checksum of the records read, when known from the start. */
  get running(): number | null {
    return this.#running;
  }

  /** Records of the segment read so far, when counted from the start. */
  get count(): number | null {
    return this.#count;
  }

  /** Bytes read past the last complete record (a partial record). */
  get carryBytes(): number {
    return this.#carry.length;
  }

  /**
   * Reads and checks the records in physical bytes up to `limit`, at most about
   * `maxBytes` at a time. Returns an empty batch when nothing new is complete.
   * Throws {@linkcode LogCorruptError} on any damage.
   */
  async read(limit: number, maxBytes: number = this.#readMax): Promise<RecordBatch> {
    if (this.#pending) {
      const err = this.#pending;
      this.#pending = null;
      throw err;
    }
    if (this.#end) return EMPTY_BATCH;
    const L = this.#layout;
    const I = L.interval;
    while (true) {
      let want = Math.min(limit - this.#phys, maxBytes, this.#readMax);
      if (want <= 0) return EMPTY_BATCH;
      // Never stop inside a beacon.
      const endAt = this.#phys + want;
      const k = Math.floor(endAt / I);
      if (k > 0 && endAt - k * I < BEACON_BYTES && endAt - k * I > 0) {
        want = k * I - this.#phys;
        if (want <= 0) return EMPTY_BATCH;
      }
      // Read straight behind the carried partial record, into a buffer the
      // batch then owns: no block is kept per cursor between reads (a
      // thousand idle readers hold nothing), and no second copy is made.
      const carried = this.#carry.length;
      const buf = new Uint8Array(carried + want);
      buf.set(this.#carry, 0);
      await this.#file.seek(this.#phys, Deno.SeekMode.Start);
      let got = 0;
      while (got < want) {
        const n = await this.#file.read(buf.subarray(carried + got));
        if (n === null) break;
        got += n;
      }
      if (got < want) {
        throw new LogCorruptError(this.path, this.#phys + got, "file is shorter than expected");
      }
      const logical = this.#strip(buf, carried, this.#phys);
      this.#phys += this.#stripped;
      const batch = this.#parse(logical);
      if (this.#badBeacon) {
        const err = this.#badBeacon;
        this.#badBeacon = null;
        if (this.#pending === null) {
          if (batch.count === 0) throw err;
          this.#pending = err;
        }
      }
      if (batch.count > 0 || this.#end || this.#phys >= limit) return batch;
    }
  }

  // Removes the beacons, in place, from the physical bytes `buf[from..]`
  // (read at file position `at`, behind `from` carried bytes), returning
  // logical bytes starting at #carryLogical.
  #strip(buf: Uint8Array, from: number, at: number): Uint8Array {
    const I = this.#layout.interval;
    let o = from;
    let p = from;
    while (p < buf.length) {
      const abs = at + p - from;
      if (abs % I === 0 && abs >= I) {
        const beacon = decodeBeacon(buf, p);
        if (!beacon) {
          // Hand back what lies before the bad beacon first: its records are
          // good, and a recovery must keep them. The error is raised once they
          // are parsed.
          this.#badBeacon = new LogCorruptError(this.path, abs, "bad beacon");
          this.#stripped = p - from;
          return buf.subarray(0, o);
        }
        this.#beacons.push({ at: this.#carryLogical + o, beacon });
        p += BEACON_BYTES;
        continue;
      }
      // Up to the next beacon; the write position never passes the read one.
      const next = Math.min(buf.length, p + (Math.floor(abs / I) + 1) * I - abs);
      if (o !== p) buf.copyWithin(o, p, next);
      o += next - p;
      p = next;
    }
    this.#stripped = buf.length - from;
    return buf.subarray(0, o);
  }

  #checkBeacons(recordStart: number, recordEnd: number): void {
    while (this.#beacons.length > 0 && this.#beacons[0].at <= recordStart) {
      const { at, beacon } = this.#beacons.shift()!;
      this.#checkBeacon(at, beacon, 0);
    }
    // A record longer than the interval can hold several beacons.
    while (this.#beacons.length > 0 && this.#beacons[0].at < recordEnd) {
      const { at, beacon } = this.#beacons.shift()!;
      this.#checkBeacon(at, beacon, recordEnd - at);
    }
  }

  #checkBeacon(at: number, b: Beacon, remaining: number): void {
    const last = this.#lastOffset;
    const ok = b.remaining === remaining && (remaining === 0) === (b.split === 0) &&
      (b.lastOffset === last || (b.lastOffset === 0 && this.#count === 0)) &&
      (this.#running === null || b.running === this.#running);
    if (!ok) {
      const phys = this.#layout.toPhysical(at) - BEACON_BYTES;
      throw new LogCorruptError(this.path, phys, "beacon disagrees with the records before it");
    }
  }

  #physAt(pos: number): number {
    return this.#layout.toPhysical(this.#carryLogical + pos);
  }

  #parse(buf: Uint8Array): RecordBatch {
    const view = new DataView(buf.buffer, buf.byteOffset, buf.length);
    let pos = 0;
    let count = 0;
    // First pass: find complete records.
    const offsets: number[] = [];
    const times: number[] = [];
    const starts: number[] = [];
    const lengths: number[] = [];
    try {
      while (pos + 4 <= buf.length) {
        if (view.getUint32(pos) === END_MAGIC) {
          if (pos + END_MARK_BYTES > buf.length) break;
          const mark = decodeEndMark(buf, pos);
          const at = this.#layout.toPhysical(this.#carryLogical + pos);
          if (!mark) throw new LogCorruptError(this.path, at, "bad end mark");
          if (
            (this.#count !== null && mark.count !== this.#count) ||
            (this.#running !== null && mark.running !== this.#running) ||
            mark.lastOffset !== (this.#count === 0 ? 0 : this.#lastOffset)
          ) {
            throw new LogCorruptError(this.path, at, "end mark disagrees with the records");
          }
          this.#checkBeacons(this.#carryLogical + pos, this.#carryLogical + pos + END_MARK_BYTES);
          this.#end = mark;
          pos += END_MARK_BYTES;
          break;
        }
        if (pos + RECORD_HEAD_BYTES > buf.length) break;
        const n = view.getUint32(pos + 16);
        if (n > this.#maxPayload) {
          throw new LogCorruptError(
            this.path,
            this.#physAt(pos),
            `record length ${n} exceeds the limit of ${this.#maxPayload}`,
          );
        }
        const size = n + RECORD_OVERHEAD;
        if (pos + size > buf.length) break;
        const offset = getU64(view, pos);
        if (offset !== this.#expect) {
          throw new LogCorruptError(
            this.path,
            this.#physAt(pos),
            `offset ${offset} where ${this.#expect} was due`,
          );
        }
        const crc = view.getUint32(pos + RECORD_HEAD_BYTES + n);
        if (checksum(buf.subarray(pos, pos + RECORD_HEAD_BYTES + n)) !== crc) {
          throw new LogCorruptError(
            this.path,
            this.#physAt(pos),
            `checksum mismatch in record ${offset}`,
          );
        }
        if (buf[pos + size - 1] !== TERMINATOR) {
          throw new LogCorruptError(
            this.path,
            this.#physAt(pos),
            `missing terminator after record ${offset}`,
          );
        }
        if (this.#beacons.length > 0) {
          this.#checkBeacons(this.#carryLogical + pos, this.#carryLogical + pos + size);
        }
        offsets.push(offset);
        times.push(getU64(view, pos + 8));
        starts.push(pos + RECORD_HEAD_BYTES);
        lengths.push(n);
        if (this.#running !== null) this.#running = foldRunning(this.#running, crc);
        if (this.#count !== null) this.#count++;
        this.#lastOffset = offset;
        this.#expect = offset + 1;
        count++;
        pos += size;
      }
    } catch (err) {
      // Keep the position of the damage: physicalEnd then points at the bad
      // record, so a recovery that cuts a torn tail keeps every good record
      // read before it in this block; those are handed out before the error.
      this.#carryLogical += pos;
      this.#carry = new Uint8Array(0);
      if (count === 0 || !(err instanceof LogCorruptError)) throw err;
      this.#pending = err;
    }
    if (!this.#pending) {
      this.#carry = buf.slice(pos);
      this.#carryLogical += pos;
      if (this.#end && this.#carry.length > 0) {
        throw new LogCorruptError(
          this.path,
          this.#layout.toPhysical(this.#carryLogical),
          "bytes after the end mark",
        );
      }
    }
    if (count === 0) return EMPTY_BATCH;
    return {
      buf,
      count,
      offsets: Float64Array.from(offsets),
      times: Float64Array.from(times),
      starts: Int32Array.from(starts),
      lengths: Int32Array.from(lengths),
    };
  }
}

/** Reads exactly `n` bytes at `at` (fewer only at end of file). */
export async function readAt(file: Deno.FsFile, at: number, n: number): Promise<Uint8Array> {
  const buf = new Uint8Array(n);
  await file.seek(at, Deno.SeekMode.Start);
  let got = 0;
  while (got < n) {
    const r = await file.read(buf.subarray(got));
    if (r === null) break;
    got += r;
  }
  return buf.subarray(0, got);
}

/** Reads and checks a segment header. */
export async function readHeader(file: Deno.FsFile, path: string): Promise<SegmentHeader> {
  const buf = await readAt(file, 0, HEADER_BYTES);
  const h = decodeHeader(buf);
  if (typeof h === "string") throw new LogCorruptError(path, 0, h);
  return h;
}

/** The start of a segment's records. */
export function segmentStart(header: SegmentHeader): CursorStart {
  return { phys: HEADER_BYTES, offset: header.firstOffset, running: RUNNING_SEED, count: 0 };
}

/**
 * The record boundary right after beacon `k` (1-based), given its contents, or
 * `null` when what follows the beacon is the tail of the end mark.
 */
export function startAfterBeacon(
  layout: Layout,
  header: SegmentHeader,
  k: number,
  b: Beacon,
): CursorStart | null {
  if (b.split === 2) return null;
  const complete = b.lastOffset === 0 ? 0 : b.lastOffset - header.firstOffset + 1;
  const splitRecord = b.split === 1 ? 1 : 0;
  const logical = layout.toLogical(k * layout.interval + BEACON_BYTES) + b.remaining;
  return {
    phys: layout.toPhysical(logical),
    offset: header.firstOffset + complete + splitRecord,
    running: splitRecord ? foldRunning(b.running, b.splitCrc) : b.running,
    count: complete + splitRecord,
  };
}

/**
 * Finds a record boundary at or before `offset` using the beacons of a segment
 * whose first `size` bytes are written: a binary search over beacons, each a
 * 32-byte read.
 */
export async function seekStart(
  file: Deno.FsFile,
  header: SegmentHeader,
  size: number,
  offset: number,
): Promise<CursorStart> {
  const layout = new Layout(header.beaconInterval);
  let lo = 1;
  let hi = Math.floor((size - BEACON_BYTES) / layout.interval);
  let best: CursorStart = segmentStart(header);
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const raw = await readAt(file, mid * layout.interval, BEACON_BYTES);
    const b = decodeBeacon(raw, 0);
    if (!b) break; // a damaged beacon: fall back to the best start so far; the read will say why
    const start = startAfterBeacon(layout, header, mid, b);
    if (start && start.offset <= offset) {
      best = start;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return best;
}
