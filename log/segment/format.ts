/**
 * The segment file format. Every number is big-endian.
 *
 * A segment file is a 128-byte header followed by a *logical stream* of framed
 * records (and, once sealed, an end mark). Beacons are laid over that stream at
 * every multiple of the beacon interval of the *file*, splitting a record where
 * one crosses the boundary; a reader strips them to get the logical stream back.
 *
 * ```text
 * file:  | header 128 | logical bytes ... | beacon 40 | logical bytes ... | beacon 40 | ...
 *        0            128                 I           I+40                2I          2I+40
 *
 * header (128 bytes)
 *   0   4  magic "SCSG"
 *   4   2  format version (1)
 *   6   2  flags (0)
 *   8  16  stream id (128 random bits)
 *  24   8  first offset of this segment
 *  32   8  created at, µs since the Unix epoch
 *  40   4  beacon interval I in bytes
 *  44   1  stream name length n (0..64)
 *  45  64  stream name, UTF-8, zero padded
 * 109  15  reserved (zero)
 * 124   4  CRC-32 of bytes 0..124
 *
 * record (25 + n bytes, n ≤ 2^32 - 1)
 *   0   8  offset
 *   8   8  append time, µs since the Unix epoch
 *  16   4  payload length n
 *  20   n  payload (the row's JSON text exactly as sent on the wire)
 *  20+n 4  CRC-32 of bytes 0..20+n
 *  24+n 1  0x0D
 *
 * beacon (40 bytes, at file position k·I for k ≥ 1, written lazily just before
 * the first byte that goes past the boundary)
 *   0   4  magic "SCBN"
 *   4   4  remaining: logical bytes of the record (or end mark) split by this
 *          beacon that follow it (0 when the beacon falls between records)
 *   8   8  offset of the last record completed before the beacon (0: none)
 *  16   8  append time of that record (0: none)
 *  24   4  running checksum of the records completed before the beacon
 *  28   4  CRC-32 of the split record (0 when none), so a reader starting
 *          here knows the running checksum after it
 *  32   4  what is split: 0 nothing, 1 a record, 2 the end mark
 *  36   4  CRC-32 of bytes 0..36
 *
 * end mark (24 bytes, in the logical stream after the last record of a sealed
 * segment; its first byte 0x53 can never start a record, whose offset < 2^53)
 *   0   4  magic "SCEN"
 *   4   8  offset of the last record (0: none)
 *  12   4  running checksum of all records
 *  16   4  number of records
 *  20   4  CRC-32 of bytes 0..20
 * ```
 *
 * The running checksum folds each record's CRC-32 in turn:
 * `r = Math.imul(r ^ crc, 16777619) >>> 0`, starting from 2166136261. It lets a
 * beacon or end mark vouch for the whole sequence of records before it (a
 * removed or reordered record changes it), at no cost per byte.
 *
 * Invariants: offsets within one segment are contiguous (a fence starts a new
 * segment); a segment is named by its first offset; only the last segment may
 * lack an end mark or end in a torn record.
 *
 * The checksum is CRC-32 (IEEE) from `node:zlib`: native and measured at
 * 2.6× the speed of a table-driven CRC-32C in JavaScript for a 175-byte record.
 *
 * @module
 */

import { crc32 } from "node:zlib";

/** Size of the segment header in bytes. */
export const HEADER_BYTES = 128;
/** Size of a beacon in bytes. */
export const BEACON_BYTES = 40;
/** Bytes of a record around its payload (20 before, 5 after). */
export const RECORD_OVERHEAD = 25;
/** Bytes of a record before its payload. */
export const RECORD_HEAD_BYTES = 20;
/** Size of the end mark in bytes. */
export const END_MARK_BYTES = 24;
/** The format version written in headers. */
export const FORMAT_VERSION = 1;
/** The record terminator byte. */
export const TERMINATOR = 0x0d;
/** Default beacon interval: 1 MiB. */
export const DEFAULT_BEACON_INTERVAL = 1 << 20;
/** Smallest beacon interval accepted. */
export const MIN_BEACON_INTERVAL = 1024;
/** Starting value of the running checksum. */
export const RUNNING_SEED = 2166136261;

const HEADER_MAGIC = 0x53435347; // "SCSG"
const BEACON_MAGIC = 0x5343424e; // "SCBN"
/** The end mark's magic ("SCEN") as a u32. */
export const END_MAGIC = 0x5343454e;
const TWO_32 = 0x1_0000_0000;

/** Folds one record checksum into a running checksum. */
export function foldRunning(running: number, recordCrc: number): number {
  return Math.imul(running ^ recordCrc, 16777619) >>> 0;
}

/** CRC-32 of `bytes` (node:zlib). */
export function checksum(bytes: Uint8Array): number {
  return crc32(bytes) >>> 0;
}

/** Reads a u64 that is known to be below 2^53. */
export function getU64(view: DataView, at: number): number {
  return view.getUint32(at) * TWO_32 + view.getUint32(at + 4);
}

/** Writes a u64 below 2^53. */
export function setU64(view: DataView, at: number, value: number): void {
  view.setUint32(at, Math.floor(value / TWO_32));
  view.setUint32(at + 4, value >>> 0);
}

/** The decoded segment header. */
export interface SegmentHeader {
  /** Format version. */
  version: number;
  /** Stream id, 32 lowercase hex characters. */
  streamId: string;
  /** First offset of the segment. */
  firstOffset: number;
  /** Creation time, µs since the epoch. */
  createdUs: number;
  /** Beacon interval in bytes. */
  beaconInterval: number;
  /** Stream name. */
  name: string;
}

function hexToBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function bytesToHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

/** Encodes a segment header into 128 bytes. */
export function encodeHeader(h: SegmentHeader): Uint8Array {
  const buf = new Uint8Array(HEADER_BYTES);
  const view = new DataView(buf.buffer);
  view.setUint32(0, HEADER_MAGIC);
  view.setUint16(4, h.version);
  view.setUint16(6, 0);
  buf.set(hexToBytes(h.streamId), 8);
  setU64(view, 24, h.firstOffset);
  setU64(view, 32, h.createdUs);
  view.setUint32(40, h.beaconInterval);
  const name = new TextEncoder().encode(h.name);
  if (name.length > 64) throw new RangeError(`stream name is ${name.length} bytes; at most 64`);
  buf[44] = name.length;
  buf.set(name, 45);
  view.setUint32(124, checksum(buf.subarray(0, 124)));
  return buf;
}

/** Decodes a header; returns an error string when it is not a valid one. */
export function decodeHeader(buf: Uint8Array): SegmentHeader | string {
  if (buf.length < HEADER_BYTES) return `header is ${buf.length} bytes, expected ${HEADER_BYTES}`;
  const view = new DataView(buf.buffer, buf.byteOffset, HEADER_BYTES);
  if (view.getUint32(0) !== HEADER_MAGIC) return "not a streamcast segment (bad magic)";
  if (view.getUint32(124) !== checksum(buf.subarray(0, 124))) return "header checksum mismatch";
  const version = view.getUint16(4);
  if (version !== FORMAT_VERSION) return `unsupported format version ${version}`;
  const nameLen = buf[44];
  if (nameLen > 64) return `bad name length ${nameLen}`;
  const beaconInterval = view.getUint32(40);
  if (beaconInterval < MIN_BEACON_INTERVAL) return `bad beacon interval ${beaconInterval}`;
  return {
    version,
    streamId: bytesToHex(buf.subarray(8, 24)),
    firstOffset: getU64(view, 24),
    createdUs: getU64(view, 32),
    beaconInterval,
    name: new TextDecoder().decode(buf.subarray(45, 45 + nameLen)),
  };
}

/** A decoded beacon. */
export interface Beacon {
  /** Logical bytes of the split record that follow the beacon. */
  remaining: number;
  /** Last record completed before the beacon (0: none). */
  lastOffset: number;
  /** Its append time in µs (0: none). */
  lastTimeUs: number;
  /** Running checksum of the records completed before it. */
  running: number;
  /** CRC-32 of the split record (0: none). */
  splitCrc: number;
  /** What the beacon splits: 0 nothing, 1 a record, 2 the end mark. */
  split: 0 | 1 | 2;
}

/** Encodes a beacon into `out` at `at` (40 bytes). */
export function encodeBeacon(out: Uint8Array, at: number, b: Beacon): void {
  const view = new DataView(out.buffer, out.byteOffset + at, BEACON_BYTES);
  view.setUint32(0, BEACON_MAGIC);
  view.setUint32(4, b.remaining);
  setU64(view, 8, b.lastOffset);
  setU64(view, 16, b.lastTimeUs);
  view.setUint32(24, b.running);
  view.setUint32(28, b.splitCrc);
  view.setUint32(32, b.split);
  view.setUint32(36, checksum(out.subarray(at, at + 36)));
}

/** Decodes a beacon at `at`; returns `null` when the bytes are not a valid beacon. */
export function decodeBeacon(buf: Uint8Array, at: number): Beacon | null {
  if (at + BEACON_BYTES > buf.length) return null;
  const view = new DataView(buf.buffer, buf.byteOffset + at, BEACON_BYTES);
  if (view.getUint32(0) !== BEACON_MAGIC) return null;
  if (view.getUint32(36) !== checksum(buf.subarray(at, at + 36))) return null;
  const split = view.getUint32(32);
  if (split > 2) return null;
  return {
    remaining: view.getUint32(4),
    lastOffset: getU64(view, 8),
    lastTimeUs: getU64(view, 16),
    running: view.getUint32(24),
    splitCrc: view.getUint32(28),
    split: split as 0 | 1 | 2,
  };
}

/** A decoded end mark. */
export interface EndMark {
  /** Last record offset of the segment (0: none). */
  lastOffset: number;
  /** Running checksum of every record. */
  running: number;
  /** Number of records. */
  count: number;
}

/** Encodes an end mark (24 bytes). */
export function encodeEndMark(m: EndMark): Uint8Array {
  const out = new Uint8Array(END_MARK_BYTES);
  const view = new DataView(out.buffer);
  view.setUint32(0, END_MAGIC);
  setU64(view, 4, m.lastOffset);
  view.setUint32(12, m.running);
  view.setUint32(16, m.count);
  view.setUint32(20, checksum(out.subarray(0, 20)));
  return out;
}

/** Decodes an end mark at `at`; returns `null` when invalid. */
export function decodeEndMark(buf: Uint8Array, at: number): EndMark | null {
  if (at + END_MARK_BYTES > buf.length) return null;
  const view = new DataView(buf.buffer, buf.byteOffset + at, END_MARK_BYTES);
  if (view.getUint32(0) !== END_MAGIC) return null;
  if (view.getUint32(20) !== checksum(buf.subarray(at, at + 20))) return null;
  return { lastOffset: getU64(view, 4), running: view.getUint32(12), count: view.getUint32(16) };
}

/**
 * Maps positions between the file (physical) and the logical stream (the
 * file without its header and beacons), for one beacon interval.
 */
export class Layout {
  /** The beacon interval. */
  readonly interval: number;
  readonly #first: number;
  readonly #rest: number;

  /** A layout for beacon interval `interval`. */
  constructor(interval: number) {
    if (!Number.isInteger(interval) || interval < MIN_BEACON_INTERVAL) {
      throw new RangeError(`beacon interval must be an integer >= ${MIN_BEACON_INTERVAL}`);
    }
    this.interval = interval;
    this.#first = interval - HEADER_BYTES;
    this.#rest = interval - BEACON_BYTES;
  }

  /** Physical position of logical byte `l` (a region start maps past its beacon). */
  toPhysical(l: number): number {
    if (l < this.#first) return HEADER_BYTES + l;
    const k = 1 + Math.floor((l - this.#first) / this.#rest);
    return k * this.interval + BEACON_BYTES + (l - this.#first - (k - 1) * this.#rest);
  }

  /** Physical end (exclusive) of logical bytes `[0, l)`: a region end stays before its beacon. */
  toPhysicalEnd(l: number): number {
    return l === 0 ? HEADER_BYTES : this.toPhysical(l - 1) + 1;
  }

  /** Logical position of physical byte `p`, which must hold data (not header or beacon). */
  toLogical(p: number): number {
    const k = Math.floor(p / this.interval);
    if (k === 0) return p - HEADER_BYTES;
    return this.#first + (k - 1) * this.#rest + (p - k * this.interval - BEACON_BYTES);
  }

  /** Logical size of a file whose physical size is `p` (p never ends inside a beacon). */
  logicalSize(p: number): number {
    if (p <= HEADER_BYTES) return 0;
    const k = Math.floor(p / this.interval);
    const within = p - k * this.interval;
    if (k === 0) return p - HEADER_BYTES;
    if (within < BEACON_BYTES) return this.#first + (k - 1) * this.#rest;
    return this.toLogical(p - 1) + 1;
  }
}

/** Zero-padded file name of the segment starting at `firstOffset`. */
export function segmentFileName(firstOffset: number): string {
  return `${String(firstOffset).padStart(20, "0")}.seg`;
}

/** Parses a segment file name; `null` if it is not one. */
export function parseSegmentFileName(name: string): number | null {
  const m = /^(\d{20})\.seg$/.exec(name);
  return m ? Number(m[1]) : null;
}
