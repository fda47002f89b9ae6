// The records of a log read that a `where=` filter matches, as a record batch
// over the same bytes (no payload is copied): what an export writes when it
// is given a filter. Each payload is decoded and parsed once.
import type { Filter } from "../wire/filter.ts";
import type { RecordBatch } from "../log/mod.ts";

const decoder = new TextDecoder();

/**
 * The records of `batch` whose rows `filter` matches (`batch` itself when all do).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { selectRecords } from "./_select_records.ts";
 * import { compileFilter } from "../wire/filter.ts";
 * const f = compileFilter({ a: 2 }, { type: "object", properties: { a: { type: "integer" } } });
 * const buf = new TextEncoder().encode('{"a":1}{"a":2}');
 * const batch = {
 *   buf, count: 2, offsets: new Float64Array([5, 6]), times: new Float64Array(2),
 *   starts: new Int32Array([0, 7]), lengths: new Int32Array([7, 7]),
 * };
 * deepStrictEqual(selectRecords(batch, f).offsets, new Float64Array([6]));
 * ```
 */
export function selectRecords(batch: RecordBatch, filter: Filter): RecordBatch {
  const test = filter.test;
  const keep: number[] = [];
  const { buf, starts, lengths } = batch;
  for (let i = 0; i < batch.count; i++) {
    const s = starts[i];
    const row = JSON.parse(decoder.decode(buf.subarray(s, s + lengths[i])));
    if (test(row)) keep.push(i);
  }
  if (keep.length === batch.count) return batch;
  const n = keep.length;
  const out = {
    buf,
    count: n,
    offsets: new Float64Array(n),
    times: new Float64Array(n),
    starts: new Int32Array(n),
    lengths: new Int32Array(n),
  };
  for (let k = 0; k < n; k++) {
    const i = keep[k];
    out.offsets[k] = batch.offsets[i];
    out.times[k] = batch.times[i];
    out.starts[k] = starts[i];
    out.lengths[k] = lengths[i];
  }
  return out;
}
