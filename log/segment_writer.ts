/**
 * Encodes records for the active segment into the exact bytes to append to the
 * file, beacons included. It does no I/O: the log writes what it returns.
 *
 * @module
 */

import {
  BEACON_BYTES,
  checksum,
  encodeBeacon,
  encodeEndMark,
  foldRunning,
  RECORD_HEAD_BYTES,
  RECORD_OVERHEAD,
  setU64,
  TERMINATOR,
} from "./format.ts";

const utf8 = new TextEncoder();

/** Where the writer stands in its segment. */
export interface WriterState {
  /** Physical file size: where the next byte goes. */
  physEnd: number;
  /** Last record offset written (0: none yet). */
  lastOffset: number;
  /** Its append time in µs. */
  lastTimeUs: number;
  /** Running checksum of the records written. */
  running: number;
  /** Number of records in the segment. */
  count: number;
}

/** Builds the bytes of records (and beacons) to append to one segment. */
export class SegmentWriter {
  readonly #interval: number;
  #state: WriterState;
  #out: Uint8Array;
  #len = 0;
  #scratch: Uint8Array = new Uint8Array(4096);
  #scratchView: DataView = new DataView(this.#scratch.buffer);

  /** A writer continuing from `state` in a segment with beacon interval `interval`. */
  constructor(interval: number, state: WriterState) {
    this.#interval = interval;
    this.#state = { ...state };
    this.#out = new Uint8Array(64 * 1024);
  }

  /** The state including encoded but not yet taken bytes. */
  get state(): Readonly<WriterState> {
    return this.#state;
  }

  /** Bytes encoded and not yet taken. */
  get pendingBytes(): number {
    return this.#len;
  }

  /**
   * Encodes one record. A string payload is written as UTF-8 straight into
   * the record (no intermediate copy); the caller has checked its size.
   */
  append(offset: number, timeUs: number, payload: Uint8Array | string): void {
    const most = typeof payload === "string" ? payload.length * 3 : payload.length;
    if (this.#scratch.length < most + RECORD_OVERHEAD) {
      this.#scratch = new Uint8Array(Math.max(most + RECORD_OVERHEAD, this.#scratch.length * 2));
      this.#scratchView = new DataView(this.#scratch.buffer);
    }
    const rec = this.#scratch;
    const view = this.#scratchView;
    let n: number;
    if (typeof payload === "string") {
      n = utf8.encodeInto(payload, rec.subarray(RECORD_HEAD_BYTES)).written;
    } else {
      n = payload.length;
      rec.set(payload, RECORD_HEAD_BYTES);
    }
    const size = n + RECORD_OVERHEAD;
    setU64(view, 0, offset);
    setU64(view, 8, timeUs);
    view.setUint32(16, n);
    const crc = checksum(rec.subarray(0, RECORD_HEAD_BYTES + n));
    view.setUint32(RECORD_HEAD_BYTES + n, crc);
    rec[RECORD_HEAD_BYTES + n + 4] = TERMINATOR;
    this.#emit(rec.subarray(0, size), 1, crc);
    const s = this.#state;
    s.lastOffset = offset;
    s.lastTimeUs = timeUs;
    s.running = foldRunning(s.running, crc);
    s.count++;
  }

  /** Encodes the end mark that seals the segment. */
  seal(): void {
    const s = this.#state;
    this.#emit(
      encodeEndMark({ lastOffset: s.lastOffset, running: s.running, count: s.count }),
      2,
      0,
    );
  }

  /**
   * Takes the encoded bytes. A copy: the log writes them across an await
   * while new appends keep encoding into the buffer.
   */
  take(): Uint8Array {
    const out = this.#out.slice(0, this.#len);
    this.#len = 0;
    return out;
  }

  /** Drops pending bytes and returns to `state` (after a failed write). */
  reset(state: WriterState): void {
    this.#len = 0;
    this.#state = { ...state };
  }

  #reserve(extra: number): void {
    const need = this.#len + extra;
    if (need <= this.#out.length) return;
    let cap = this.#out.length * 2;
    while (cap < need) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.#out.subarray(0, this.#len));
    this.#out = next;
  }

  // Copies logical bytes to the output, laying a beacon at each interval
  // boundary they cross; `remaining` tells a reader how much of the record
  // continues after the beacon.
  #emit(bytes: Uint8Array, kind: 1 | 2, crc: number): void {
    const s = this.#state;
    const interval = this.#interval;
    this.#reserve(bytes.length + BEACON_BYTES * (2 + Math.ceil(bytes.length / interval)));
    let done = 0;
    while (done < bytes.length) {
      if (s.physEnd % interval === 0) {
        const split = done > 0;
        encodeBeacon(this.#out, this.#len, {
          remaining: split ? bytes.length - done : 0,
          lastOffset: s.lastOffset,
          lastTimeUs: s.lastTimeUs,
          running: s.running,
          splitCrc: split ? crc : 0,
          split: split ? kind : 0,
        });
        this.#len += BEACON_BYTES;
        s.physEnd += BEACON_BYTES;
      }
      const room = interval - (s.physEnd % interval);
      const take = Math.min(room, bytes.length - done);
      this.#out.set(bytes.subarray(done, done + take), this.#len);
      this.#len += take;
      s.physEnd += take;
      done += take;
    }
  }
}
