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
// What joins payloads encoded together: the tail of one record and the head
// of the next, overwritten once they are encoded.
const GAP = "\0".repeat(RECORD_OVERHEAD);
// After a run that was not ASCII, this many appendMany calls go one by one.
const SKIP_AFTER_MISS = 16;

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
  #view: DataView;
  // The buffer handed out by the last take(), reused by the next one: the log
  // has written it by then (see take()).
  #spare: Uint8Array;
  #scratch: Uint8Array = new Uint8Array(4096);
  // appendMany calls left that skip the in-place encoding (after a run that
  // was not ASCII: a text of two-byte characters encodes slowly).
  #skipRuns = 0;

  /** A writer continuing from `state` in a segment with beacon interval `interval`. */
  constructor(interval: number, state: WriterState) {
    this.#interval = interval;
    this.#state = { ...state };
    this.#out = new Uint8Array(64 * 1024);
    this.#view = new DataView(this.#out.buffer);
    this.#spare = new Uint8Array(64 * 1024);
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
   * Encodes one record. It is written straight into the output buffer (a
   * string payload as UTF-8, no intermediate copy; the caller has checked its
   * size); only a record that starts at or crosses a beacon boundary, once
   * per interval, is laid out again around its beacon. Nothing is allocated
   * per record but the views the encoder and the checksum take.
   */
  append(offset: number, timeUs: number, payload: Uint8Array | string): void {
    const most = typeof payload === "string" ? payload.length * 3 : payload.length;
    this.#reserve(most + RECORD_OVERHEAD);
    const out = this.#out;
    const view = this.#view;
    const at = this.#len;
    let n: number;
    if (typeof payload === "string") {
      n = utf8.encodeInto(payload, out.subarray(at + RECORD_HEAD_BYTES)).written;
    } else {
      n = payload.length;
      out.set(payload, at + RECORD_HEAD_BYTES);
    }
    const size = n + RECORD_OVERHEAD;
    setU64(view, at, offset);
    setU64(view, at + 8, timeUs);
    view.setUint32(at + 16, n);
    const crc = checksum(out.subarray(at, at + RECORD_HEAD_BYTES + n));
    view.setUint32(at + RECORD_HEAD_BYTES + n, crc);
    out[at + RECORD_HEAD_BYTES + n + 4] = TERMINATOR;
    const s = this.#state;
    const inInterval = s.physEnd % this.#interval;
    if (inInterval !== 0 && inInterval + size <= this.#interval) {
      // No beacon before or inside it: the bytes are in place.
      this.#len += size;
      s.physEnd += size;
    } else {
      if (this.#scratch.length < size) this.#scratch = new Uint8Array(size * 2);
      const rec = this.#scratch.subarray(0, size);
      rec.set(out.subarray(at, at + size));
      this.#emit(rec, 1, crc);
    }
    s.lastOffset = offset;
    s.lastTimeUs = timeUs;
    s.running = foldRunning(s.running, crc);
    s.count++;
  }

  /**
   * Encodes records `first`, `first + 1`, … of `payloads`, all at `timeUs`:
   * the same bytes as one `append` each. A run of ASCII strings that lies
   * between two beacons is encoded with one call: joined with a gap of
   * record overhead between them, so that each payload lands where its
   * record puts it, and the heads and tails are filled in around them.
   */
  appendMany(first: number, timeUs: number, payloads: readonly (Uint8Array | string)[]): void {
    let i = 0;
    if (this.#skipRuns > 0) {
      this.#skipRuns--;
      for (; i < payloads.length; i++) this.append(first + i, timeUs, payloads[i]);
      return;
    }
    while (i < payloads.length) {
      const to = this.#runEnd(payloads, i);
      if (to - i >= 2) {
        if (this.#inPlace(first, timeUs, payloads, i, to)) {
          i = to;
          continue;
        }
        // Not ASCII: a wasted encode, so the next calls go one by one.
        this.#skipRuns = SKIP_AFTER_MISS;
        for (; i < payloads.length; i++) this.append(first + i, timeUs, payloads[i]);
        return;
      }
      // A record at a beacon, a lone string, or bytes.
      this.append(first + i, timeUs, payloads[i]);
      i++;
    }
  }

  // The end of the run of strings from `from` on whose records, if each is
  // ASCII (a byte a character), lie after the next beacon and before the one
  // after it.
  #runEnd(payloads: readonly (Uint8Array | string)[], from: number): number {
    const inInterval = this.#state.physEnd % this.#interval;
    if (inInterval === 0) return from;
    const room = this.#interval - inInterval;
    let used = 0;
    let k = from;
    for (; k < payloads.length && used < room; k++) {
      const p = payloads[k];
      if (typeof p !== "string" || used + p.length + RECORD_OVERHEAD > room) break;
      used += p.length + RECORD_OVERHEAD;
    }
    return k;
  }

  // Encodes the strings `payloads[from..to)` in one call into their places;
  // false (nothing kept) if they are not all ASCII.
  #inPlace(
    first: number,
    timeUs: number,
    payloads: readonly (Uint8Array | string)[],
    from: number,
    to: number,
  ): boolean {
    const joined = payloads.slice(from, to).join(GAP);
    const total = joined.length + RECORD_OVERHEAD;
    this.#reserve(total);
    const out = this.#out;
    const view = this.#view;
    const at = this.#len;
    const start = at + RECORD_HEAD_BYTES;
    const { read, written } = utf8.encodeInto(
      joined,
      out.subarray(start, start + joined.length),
    );
    if (read !== joined.length || written !== joined.length) return false;
    const s = this.#state;
    let running = s.running;
    let p = at;
    for (let k = from; k < to; k++) {
      const n = (payloads[k] as string).length;
      setU64(view, p, first + k);
      setU64(view, p + 8, timeUs);
      view.setUint32(p + 16, n);
      const crc = checksum(out.subarray(p, p + RECORD_HEAD_BYTES + n));
      view.setUint32(p + RECORD_HEAD_BYTES + n, crc);
      out[p + RECORD_HEAD_BYTES + n + 4] = TERMINATOR;
      running = foldRunning(running, crc);
      p += n + RECORD_OVERHEAD;
    }
    this.#len = p;
    s.physEnd += p - at;
    s.lastOffset = first + to - 1;
    s.lastTimeUs = timeUs;
    s.running = running;
    s.count += to - from;
    return true;
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
   * Takes the encoded bytes: a view valid until the next `take()` (the log
   * writes them across an await while new appends keep encoding, into the
   * other of two buffers that take turns; the commit loop takes again only
   * once the last write is done). No copy and no new buffer per commit.
   */
  take(): Uint8Array {
    const out = this.#out;
    const taken = out.subarray(0, this.#len);
    this.#out = this.#spare;
    this.#view = new DataView(this.#out.buffer);
    this.#spare = out;
    this.#len = 0;
    return taken;
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
    this.#view = new DataView(next.buffer);
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
