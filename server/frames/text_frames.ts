/**
 * Building data frames. A frame is `[offset,msg]` where `msg` is the row's JSON
 * exactly as stored, so a frame built from the log is byte-identical to the
 * live frame for the same offset. Batched frames join such lines with `\n`.
 *
 * @module
 */

import type { RecordBatch } from "../../log/mod.ts";

/**
 * Most rows in one batched frame.
 */
export const MAX_BATCH_ROWS = 4096;
/**
 * Largest batched frame built from the log, in bytes (about: each row is
 * counted as its payload plus 20 bytes, and a frame holds at least one row).
 */
export const MAX_BATCH_BYTES = 1 << 20;

/**
 * The live frame for a row.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { liveFrame } from "./text_frames.ts";
 * equal(liveFrame(7, '{"a":1}'), '[7,{"a":1}]');
 * ```
 */
export function liveFrame(offset: number | null, json: string): string {
  return "[" + offset + "," + json + "]";
}

/**
 * The offset of a data frame `[offset,msg]` (durable streams).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { frameOffset } from "./text_frames.ts";
 * equal(frameOffset('[42,{"a":1}]'), 42);
 * ```
 */
export function frameOffset(frame: string): number {
  return Number(frame.slice(1, frame.indexOf(",")));
}

const decoder = new TextDecoder();
let scratch = new Uint8Array(1 << 20);

// The decimal digits of `digitsOf`, right-aligned in `digits` from
// `digitsAt`. Replayed offsets mostly follow each other, so the next one's
// digits are the last one's plus one, carried in place: no division per digit.
// Module state is safe to share between subscribers: it is keyed by the
// offset it holds, so any offset that does not follow it is written in full.
const digits = new Uint8Array(16); // offsets are integers in [0, 2^53): at most 16 digits
let digitsAt = 15;
let digitsOf = 0;
digits[15] = 48;

function setDigits(n: number): void {
  if (n === digitsOf + 1 && n <= Number.MAX_SAFE_INTEGER) {
    let k = 15;
    while (k >= digitsAt && digits[k] === 57) digits[k--] = 48; // 9 carries
    if (k < digitsAt) digits[digitsAt = k] = 49; // 99 + 1: one digit more
    else digits[k]++;
  } else if (n !== digitsOf) {
    if (!Number.isSafeInteger(n) || n < 0) {
      throw new RangeError(`Cannot render offset ${n}: not an integer in [0, 2^53)`);
    }
    let k = 16;
    let x = n;
    do {
      const q = Math.floor(x / 10);
      digits[--k] = 48 + (x - q * 10);
      x = q;
    } while (x > 0);
    digitsAt = k;
  }
  digitsOf = n;
}

// When the batch's bytes already hold the frames (a chunk's `[offset,msg]\n`
// lines), returns where they start in `batch.buf`, else -1. Checks every
// byte that is not payload, so the text is byte-identical to a copied one.
function framesInPlace(batch: RecordBatch, from: number, last: number): number {
  const src = batch.buf;
  const starts = batch.starts;
  const lengths = batch.lengths;
  const offsets = batch.offsets;
  let first = -1;
  let prevEnd = 0;
  for (let i = from; i < last; i++) {
    setDigits(offsets[i]);
    const s = starts[i];
    let d = s - 1 - (16 - digitsAt); // where the digits must be
    if (d < 1 || src[s - 1] !== 44 || src[d - 1] !== 91) return -1; // `[` digits `,`
    if (i === from) first = d - 1;
    else if (d - 3 !== prevEnd || src[prevEnd] !== 93 || src[prevEnd + 1] !== 10) return -1;
    for (let k = digitsAt; k < 16; k++) if (src[d++] !== digits[k]) return -1;
    prevEnd = s + lengths[i];
  }
  return prevEnd < src.length && src[prevEnd] === 93 ? first : -1;
}

// Room before the first payload for its `[digits,` (at most 18 bytes).
const LEAD = 24;

// Builds the frames in `scratch` by copying the payloads' whole span once and
// moving each payload left over the bytes between them (a segment read's
// record heads and checksums), writing `]\n[digits,` into the room freed:
// one memmove per row and no per-row view. Returns the frames' length, or -1
// when the payloads lie too close together for that (the caller then copies
// row by row from the batch, which this never changes).
function framesCompacted(batch: RecordBatch, from: number, last: number): number {
  const starts = batch.starts;
  const lengths = batch.lengths;
  const offsets = batch.offsets;
  const a = starts[from];
  const b = starts[last - 1] + lengths[last - 1];
  if (b < a) return -1;
  const need = LEAD + b - a + 1; // the last `]` may land just past the last payload byte
  if (scratch.length < need) scratch = new Uint8Array(Math.max(need, scratch.length * 2));
  const out = scratch;
  out.set(batch.buf.subarray(a, b), LEAD);
  const shift = LEAD - a; // batch.buf[p] is now out[p + shift]
  let o = 0;
  let read = LEAD; // bytes of `out` before this are consumed
  for (let i = from; i < last; i++) {
    setDigits(offsets[i]);
    const s = starts[i] + shift;
    const n = lengths[i];
    // Writing the prefix must not reach this payload, and payloads must come
    // in order without overlapping, or unread bytes would be overwritten.
    if (s < read || o + (16 - digitsAt) + 3 > s) return -1;
    if (i > from) out[o++] = 10; // \n
    out[o++] = 91; // [
    for (let k = digitsAt; k < 16; k++) out[o++] = digits[k];
    out[o++] = 44; // ,
    if (o !== s) out.copyWithin(o, s, s + n);
    o += n;
    read = s + n;
    out[o++] = 93; // ]
  }
  return o;
}

/**
 * Renders records `[from, from + rows)` of a batch as `\n`-joined frames,
 * stopping at `maxRows` rows or about `maxBytes` bytes. Returns the text and
 * how many records it holds (0 when `from` is past the last record).
 *
 * The text is byte for byte the live frames of the same rows joined with
 * `\n`. When the batch's bytes already hold exactly that text (the lines of a
 * chunk), it is decoded where it lies; otherwise the frames are assembled in
 * a scratch buffer (the payloads copied once, then moved into place) and
 * decoded once.
 *
 * @throws {RangeError} If a record's offset is not an integer in [0, 2^53).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { renderBatch } from "./text_frames.ts";
 * const buf = new TextEncoder().encode('{"a":1}{"a":2}');
 * const batch = {
 *   buf, count: 2, offsets: new Float64Array([5, 6]), times: new Float64Array(2),
 *   starts: new Int32Array([0, 7]), lengths: new Int32Array([7, 7]),
 * };
 * deepStrictEqual(renderBatch(batch, 0), { text: '[5,{"a":1}]\n[6,{"a":2}]', rows: 2 });
 * ```
 */
export function renderBatch(
  batch: RecordBatch,
  from: number,
  maxRows: number = MAX_BATCH_ROWS,
  maxBytes: number = MAX_BATCH_BYTES,
): { text: string; rows: number } {
  const end = Math.min(batch.count, from + maxRows);
  let size = 0;
  let last = from;
  for (; last < end; last++) {
    const add = batch.lengths[last] + 20;
    if (size > 0 && size + add > maxBytes) break;
    size += add;
  }
  if (last === from) return { text: "", rows: 0 };
  const at = framesInPlace(batch, from, last);
  const starts = batch.starts;
  const lengths = batch.lengths;
  if (at >= 0) {
    const end = starts[last - 1] + lengths[last - 1] + 1;
    return { text: decoder.decode(batch.buf.subarray(at, end)), rows: last - from };
  }
  const compacted = framesCompacted(batch, from, last);
  if (compacted >= 0) {
    return { text: decoder.decode(scratch.subarray(0, compacted)), rows: last - from };
  }
  if (scratch.length < size) scratch = new Uint8Array(Math.max(size, scratch.length * 2));
  const out = scratch;
  const src = batch.buf;
  const offsets = batch.offsets;
  let o = 0;
  for (let i = from; i < last; i++) {
    if (i > from) out[o++] = 10; // \n
    out[o++] = 91; // [
    setDigits(offsets[i]);
    for (let k = digitsAt; k < 16; k++) out[o++] = digits[k];
    out[o++] = 44; // ,
    const s = starts[i];
    const n = lengths[i];
    out.set(src.subarray(s, s + n), o);
    o += n;
    out[o++] = 93; // ]
  }
  return { text: decoder.decode(out.subarray(0, o)), rows: last - from };
}
