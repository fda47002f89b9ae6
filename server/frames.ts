/**
 * Building data frames. A frame is `[offset,msg]` where `msg` is the row's JSON
 * exactly as stored, so a frame built from the log is byte-identical to the
 * live frame for the same offset. Batched frames join such lines with `\n`.
 *
 * @module
 */

import type { RecordBatch } from "../log/mod.ts";

/** Most rows in one batched frame. */
export const MAX_BATCH_ROWS = 4096;
/** Largest batched frame built from the log, in bytes (about). */
export const MAX_BATCH_BYTES = 1 << 20;

/**
 * The live frame for a row.
 *
 * @example
 * ```ts
 * import { liveFrame } from "./frames.ts";
 * console.log(liveFrame(7, '{"a":1}')); // [7,{"a":1}]
 * ```
 */
export function liveFrame(offset: number | null, json: string): string {
  return "[" + offset + "," + json + "]";
}

const decoder = new TextDecoder();
let scratch = new Uint8Array(1 << 20);

function writeDigits(buf: Uint8Array, at: number, n: number): number {
  // Offsets are positive integers below 2^53.
  if (n < 10) {
    buf[at] = 48 + n;
    return at + 1;
  }
  let len = 0;
  for (let x = n; x >= 1; x = Math.floor(x / 10)) len++;
  let x = n;
  for (let i = len - 1; i >= 0; i--) {
    const q = Math.floor(x / 10);
    buf[at + i] = 48 + (x - q * 10);
    x = q;
  }
  return at + len;
}

/**
 * Renders records `[from, from + rows)` of a batch as `\n`-joined frames,
 * stopping at `maxRows` rows or about `maxBytes` bytes. Returns the text and
 * how many records it holds.
 *
 * @example
 * ```ts
 * import { renderBatch } from "./frames.ts";
 * const buf = new TextEncoder().encode('{"a":1}{"a":2}');
 * const batch = {
 *   buf, count: 2, offsets: new Float64Array([5, 6]), times: new Float64Array(2),
 *   starts: new Int32Array([0, 7]), lengths: new Int32Array([7, 7]),
 * };
 * console.log(renderBatch(batch, 0).text); // [5,{"a":1}]\n[6,{"a":2}]
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
  if (scratch.length < size) scratch = new Uint8Array(Math.max(size, scratch.length * 2));
  const out = scratch;
  const src = batch.buf;
  let o = 0;
  for (let i = from; i < last; i++) {
    if (i > from) out[o++] = 10; // \n
    out[o++] = 91; // [
    o = writeDigits(out, o, batch.offsets[i]);
    out[o++] = 44; // ,
    const s = batch.starts[i];
    out.set(src.subarray(s, s + batch.lengths[i]), o);
    o += batch.lengths[i];
    out[o++] = 93; // ]
  }
  return { text: decoder.decode(out.subarray(0, o)), rows: last - from };
}
