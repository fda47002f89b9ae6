/**
 * Filtered frames (`where=`): the rows of a replayed batch or of a commit
 * that a filter matches, as the very frames an unfiltered subscriber gets
 * for those offsets (byte-identical: they are those frames, picked out).
 *
 * Each row is parsed once (`JSON.parse` of its frame) per batch or commit,
 * however many filters test it; each distinct filter tests it once.
 *
 * @module
 */

import type { Filter } from "../../wire/filter.ts";
import type { RecordBatch } from "../../log/mod.ts";
import { renderBatch } from "../frames/text_frames.ts";

/**
 * The frames of a replayed batch whose rows `filter` matches, in offset
 * order, and the work done (bytes rendered and parsed, for the pacer).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { filterBatch } from "./filtered_frames.ts";
 * import { compileFilter } from "../../wire/filter.ts";
 * const f = compileFilter({ a: 2 }, { type: "object", properties: { a: { type: "integer" } } });
 * const buf = new TextEncoder().encode('{"a":1}{"a":2}');
 * const batch = {
 *   buf, count: 2, offsets: new Float64Array([5, 6]), times: new Float64Array(2),
 *   starts: new Int32Array([0, 7]), lengths: new Int32Array([7, 7]),
 * };
 * deepStrictEqual(filterBatch(batch, f).lines, ['[6,{"a":2}]']);
 * ```
 */
export function filterBatch(batch: RecordBatch, filter: Filter): { lines: string[]; cost: number } {
  const test = filter.test;
  const lines: string[] = [];
  let cost = 0;
  for (let i = 0; i < batch.count;) {
    const { text, rows } = renderBatch(batch, i, batch.count - i, Infinity);
    if (rows === 0) break;
    i += rows;
    cost += text.length;
    // A frame never holds a raw newline (JSON escapes it).
    for (const line of text.split("\n")) {
      if (test((JSON.parse(line) as [number, Record<string, unknown>])[1])) lines.push(line);
    }
  }
  return { lines, cost };
}

/**
 * The rows of a commit (their JSON), parsed once for every filter to test.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { parseRows } from "./filtered_frames.ts";
 * equal(parseRows(['{"a":1}'])[0].a, 1);
 * ```
 */
export function parseRows(jsons: readonly string[]): Record<string, unknown>[] {
  const rows: Record<string, unknown>[] = new Array(jsons.length);
  for (let i = 0; i < jsons.length; i++) rows[i] = JSON.parse(jsons[i]);
  return rows;
}

/**
 * The frames of a commit whose rows `filter` matches (the same strings,
 * picked out; `frames` itself when every row matches).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { pickFrames } from "./filtered_frames.ts";
 * import { compileFilter } from "../../wire/filter.ts";
 * const f = compileFilter({ a: 1 }, { type: "object", properties: { a: { type: "integer" } } });
 * deepStrictEqual(pickFrames(['[1,{"a":1}]', '[2,{"a":2}]'], [{ a: 1 }, { a: 2 }], f), ['[1,{"a":1}]']);
 * ```
 */
export function pickFrames(
  frames: readonly string[],
  rows: readonly Record<string, unknown>[],
  filter: Filter,
): readonly string[] {
  const test = filter.test;
  let out: string[] | null = null;
  for (let i = 0; i < rows.length; i++) {
    if (test(rows[i])) {
      if (out !== null) out.push(frames[i]);
    } else if (out === null) {
      out = frames.slice(0, i) as string[];
    }
  }
  return out ?? frames;
}
