/**
 * A chunk's time index: the append times of its rows, kept beside the chunk
 * as `ROOT/NAME/chunks/SHA256.times` (the chunk's own name), so that a time
 * inside a chunk's span resolves to the exact first row at or after it.
 * Chunk lines are the wire frames `[offset,msg]` and carry no time; the
 * index is what the chunk worker read from the sealed segment's records.
 *
 * The rows of one commit share one append time, and times never decrease in
 * offset order, so the index holds one **run** per distinct time: the first
 * offset that has it, and the time. The first row at or after a time is the
 * first row of the first run whose time is at or after it.
 *
 * Layout, big-endian:
 *
 * ```text
 *  byte  size  field
 *     0     4  magic "SCTI" (53 43 54 49)
 *     4     1  format version (1)
 *     5     3  zero
 *     8     8  first offset of the chunk (u64)
 *    16     4  runs, n (u32, at least 1)
 *    20     …  n runs, each two unsigned LEB128 varints (7 bits a byte, low
 *              first, high bit set on every byte but the last):
 *                offset delta — from the previous run's first offset (the
 *                               first run's: from the chunk's first offset, 0)
 *                time delta, µs — from the previous run's time (the first
 *                               run's: from 0, its append time)
 *   end-4   4  CRC-32 (IEEE, as the segments') of every byte before it
 * ```
 *
 * Deltas are positive after the first run (offsets increase, and a run
 * starts where the time changes), so a run costs a few bytes. The index is
 * written atomically and durably before the manifest lists its chunk, so a
 * listed chunk's index is complete or absent; a merge writes the merged
 * chunk's index from its sources' (the runs concatenated, a shared time at a
 * boundary joined), or none when a source has none. An index is deleted with
 * its chunk. A missing index (older logs, chunks restored from the archive)
 * or a damaged one only makes the lookup chunk-grained again.
 *
 * @module
 */

import { crc32 } from "node:zlib";
import { join } from "node:path";
import { ChunkCorruptError, type ChunkEntry, CHUNKS_DIR } from "./chunk.ts";
import type { RecordBatch } from "../segment/reader.ts";

/** The index's file name suffix, after the chunk's SHA-256. */
export const TIMES_SUFFIX = ".times";
/** The index's magic bytes, "SCTI". */
export const TIMES_MAGIC: Uint8Array = new Uint8Array([0x53, 0x43, 0x54, 0x49]);
/** The index format version written. */
export const TIMES_VERSION = 1;
const HEAD_BYTES = 20;

/**
 * The most bytes a sound time index of a chunk of `rows` rows can take: the
 * head, at most one run per row of two varints of at most 8 bytes each (values
 * below 2^53), and the checksum. A reader of a copy from elsewhere reads no
 * more than this.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { encodeTimes, maxTimesBytes } from "./times.ts";
 * const worst = encodeTimes({ first: 1, offsets: [1, 2], times: [2 ** 53 - 2, 2 ** 53 - 1] });
 * equal(worst.length <= maxTimesBytes(2), true);
 * equal(maxTimesBytes(2), 56);
 * ```
 */
export function maxTimesBytes(rows: number): number {
  return HEAD_BYTES + rows * 2 * 8 + 4;
}

/**
 * Path of the time index of chunk `sha256` in log folder `dir`.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { timesPath } from "./times.ts";
 * ok(timesPath("/logs/s", "ab").endsWith("chunks/ab.times"));
 * ```
 */
export function timesPath(dir: string, sha256: string): string {
  return join(dir, CHUNKS_DIR, `${sha256}${TIMES_SUFFIX}`);
}

/** A chunk's runs: `offsets[i]` is the first row whose append time is `times[i]`. */
export interface ChunkTimes {
  /** The chunk's first offset. */
  first: number;
  /** First offset of each run, increasing. */
  offsets: number[];
  /** Append time of each run, µs, increasing. */
  times: number[];
}

/**
 * Collects the runs of rows as a chunk is made (rows in offset order).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { TimesBuilder } from "./times.ts";
 * const b = new TimesBuilder();
 * b.add(1, 100); b.add(2, 100); b.add(3, 250);
 * deepStrictEqual(b.runs(), { first: 1, offsets: [1, 3], times: [100, 250] });
 * ```
 */
export class TimesBuilder {
  #first = 0;
  #offsets: number[] = [];
  #times: number[] = [];

  /** Adds one row. */
  add(offset: number, ts: number): void {
    const n = this.#times.length;
    if (n === 0) this.#first = offset;
    // Times never decrease; a time equal to the run's is the same run.
    if (n > 0 && ts <= this.#times[n - 1]) return;
    this.#offsets.push(offset);
    this.#times.push(ts);
  }

  /** Adds every row of a batch of records. */
  addBatch(batch: RecordBatch): void {
    for (let i = 0; i < batch.count; i++) this.add(batch.offsets[i], batch.times[i]);
  }

  /** The runs so far. */
  runs(): ChunkTimes {
    return { first: this.#first, offsets: this.#offsets, times: this.#times };
  }
}

function putVarint(out: number[], v: number): void {
  while (v >= 128) {
    out.push((v % 128) | 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
}

/**
 * Encodes runs as an index file (see the layout above).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { decodeTimes, encodeTimes } from "./times.ts";
 * const bytes = encodeTimes({ first: 5, offsets: [5, 9], times: [1000, 1200] });
 * deepStrictEqual(decodeTimes(bytes, "x").offsets, [5, 9]);
 * ```
 */
export function encodeTimes(t: ChunkTimes): Uint8Array {
  const n = t.offsets.length;
  if (n === 0 || n !== t.times.length) {
    throw new RangeError(`a time index needs one time per run and at least one run, got ${n}`);
  }
  const body: number[] = [];
  let prevOffset = t.first;
  let prevTime = 0;
  for (let i = 0; i < n; i++) {
    putVarint(body, t.offsets[i] - prevOffset);
    putVarint(body, t.times[i] - prevTime);
    prevOffset = t.offsets[i];
    prevTime = t.times[i];
  }
  const out = new Uint8Array(HEAD_BYTES + body.length + 4);
  const view = new DataView(out.buffer);
  out.set(TIMES_MAGIC, 0);
  out[4] = TIMES_VERSION;
  view.setBigUint64(8, BigInt(t.first));
  view.setUint32(16, n);
  out.set(body, HEAD_BYTES);
  view.setUint32(out.length - 4, crc32(out.subarray(0, out.length - 4)) >>> 0);
  return out;
}

/**
 * Decodes an index file; damage (size, magic, version, checksum, a run out
 * of order) throws `ChunkCorruptError` naming `name` and what was wrong.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { decodeTimes, encodeTimes } from "./times.ts";
 * const bytes = encodeTimes({ first: 1, offsets: [1], times: [7] });
 * bytes[0] = 0;
 * throws(() => decodeTimes(bytes, "x.times"), { name: "ChunkCorruptError" });
 * ```
 */
export function decodeTimes(bytes: Uint8Array, name: string): ChunkTimes {
  if (bytes.length < HEAD_BYTES + 4) {
    throw new ChunkCorruptError(name, `time index of ${bytes.length} bytes is too short`);
  }
  for (let i = 0; i < 4; i++) {
    if (bytes[i] !== TIMES_MAGIC[i]) throw new ChunkCorruptError(name, "bad time index magic");
  }
  if (bytes[4] !== TIMES_VERSION) {
    throw new ChunkCorruptError(name, `time index version ${bytes[4]} is not ${TIMES_VERSION}`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const end = bytes.length - 4;
  const sum = crc32(bytes.subarray(0, end)) >>> 0;
  if (view.getUint32(end) !== sum) {
    throw new ChunkCorruptError(name, "time index checksum does not match");
  }
  const first = Number(view.getBigUint64(8));
  const n = view.getUint32(16);
  const offsets: number[] = [];
  const times: number[] = [];
  let pos = HEAD_BYTES;
  const varint = (): number => {
    let v = 0;
    let scale = 1;
    while (true) {
      if (pos >= end || scale > 2 ** 56) {
        throw new ChunkCorruptError(name, `time index run ${offsets.length} is cut short`);
      }
      const b = bytes[pos++];
      v += (b & 127) * scale;
      if (b < 128) return v;
      scale *= 128;
    }
  };
  let offset = first;
  let time = 0;
  for (let i = 0; i < n; i++) {
    const dOffset = varint();
    const dTime = varint();
    if (i > 0 && (dOffset === 0 || dTime === 0)) {
      throw new ChunkCorruptError(name, `time index run ${i} does not move forward`);
    }
    offset += dOffset;
    time += dTime;
    offsets.push(offset);
    times.push(time);
  }
  if (n === 0 || pos !== end) {
    throw new ChunkCorruptError(name, `time index holds ${end - pos} bytes past ${n} runs`);
  }
  return { first, offsets, times };
}

/**
 * Why index `t` cannot be the index of chunk `c` (its first and last times,
 * its offsets), or `null` when it can.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { checkTimes } from "./times.ts";
 * const c = { first: 1, last: 9, rows: 9, bytes: 1, sha256: "", first_ts: 10, last_ts: 20 };
 * equal(checkTimes({ first: 1, offsets: [1, 4], times: [10, 20] }, c), null);
 * ```
 */
export function checkTimes(t: ChunkTimes, c: ChunkEntry): string | null {
  const n = t.offsets.length;
  if (t.first !== c.first || t.offsets[0] !== c.first || t.offsets[n - 1] > c.last) {
    return `time index offsets ${t.offsets[0]}..${
      t.offsets[n - 1]
    } are not within the chunk's ${c.first}..${c.last}`;
  }
  if (t.times[0] !== c.first_ts || t.times[n - 1] !== c.last_ts) {
    return `time index times ${t.times[0]}..${
      t.times[n - 1]
    } are not the chunk's ${c.first_ts}..${c.last_ts}`;
  }
  return null;
}

/**
 * Reads and checks the index of chunk `c` in log folder `dir`: `null` when
 * there is none; damage, or an index that is not this chunk's, throws
 * `ChunkCorruptError` naming the file.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readChunkTimes } from "./times.ts";
 * const c = { first: 1, last: 1, rows: 1, bytes: 1, sha256: "00", first_ts: 1, last_ts: 1 };
 * const dir = await Deno.makeTempDir();
 * equal(await readChunkTimes(dir, c), null);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readChunkTimes(dir: string, c: ChunkEntry): Promise<ChunkTimes | null> {
  const path = timesPath(dir, c.sha256);
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
  const t = decodeTimes(bytes, path);
  const wrong = checkTimes(t, c);
  if (wrong) throw new ChunkCorruptError(path, wrong);
  return t;
}

/**
 * The first run whose time is at or after `sinceUs` (a binary search), or
 * `null` when every run is older.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { seekRuns } from "./times.ts";
 * const t = { first: 1, offsets: [1, 4, 8], times: [10, 20, 30] };
 * deepStrictEqual(seekRuns(t, 15), { offset: 4, ts: 20 });
 * deepStrictEqual(seekRuns(t, 20), { offset: 4, ts: 20 });
 * equal(seekRuns(t, 31), null);
 * ```
 */
export function seekRuns(t: ChunkTimes, sinceUs: number): { offset: number; ts: number } | null {
  let lo = 0;
  let hi = t.times.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (t.times[mid] >= sinceUs) hi = mid;
    else lo = mid + 1;
  }
  return lo < t.times.length ? { offset: t.offsets[lo], ts: t.times[lo] } : null;
}

/**
 * The index of chunks merged in offset order: the runs concatenated, a
 * source's first run joined to the previous source's last when they share
 * a time.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { mergeTimes } from "./times.ts";
 * const a = { first: 1, offsets: [1, 3], times: [10, 20] };
 * const b = { first: 5, offsets: [5, 6], times: [20, 30] };
 * deepStrictEqual(mergeTimes([a, b]), { first: 1, offsets: [1, 3, 6], times: [10, 20, 30] });
 * ```
 */
export function mergeTimes(parts: readonly ChunkTimes[]): ChunkTimes {
  const b = new TimesBuilder();
  for (const p of parts) {
    for (let i = 0; i < p.offsets.length; i++) b.add(p.offsets[i], p.times[i]);
  }
  return b.runs();
}
