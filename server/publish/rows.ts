/**
 * The rows of a publish, checked and encoded before anything is stored: each
 * row is validated by the stream's schema and encoded by its encoder (the
 * bytes stored and sent), and must fit the log's row limit. The first row
 * refused refuses the whole publish, naming its position.
 *
 * @module
 */

import type { Stream } from "../stream/stream.ts";

/**
 * Rows checked: their encoded JSON, or the first refused one (0-based `index`) and why.
 *
 * @example
 * ```ts
 * import type { EncodedRows } from "./rows.ts";
 * const e: EncodedRows = { ok: false, index: 2, detail: "px must be number" };
 * console.log(e.ok || e.index); // 2
 * ```
 */
export type EncodedRows =
  | { ok: true; jsons: string[] }
  | { ok: false; index: number; detail: string };

const enc = new TextEncoder();

/**
 * Validates and encodes `rows` for `stream`; nothing is stored.
 *
 * @example
 * ```ts
 * import { Stream } from "../stream/stream.ts";
 * import { encodeRows } from "./rows.ts";
 * const s = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * console.log(encodeRows(s, [{ v: 1 }]), encodeRows(s, [{ v: 1 }, { v: "x" }]).ok); // { ok: true, jsons: [ '{"v":1}' ] } false
 * ```
 */
export function encodeRows(stream: Stream, rows: readonly unknown[]): EncodedRows {
  const max = stream.log?.maxPayloadBytes ?? Infinity;
  const jsons: string[] = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const problem = stream.schema.validate(rows[i]);
    if (problem !== null) return { ok: false, index: i, detail: problem };
    const json = stream.schema.encode(rows[i] as Record<string, unknown>);
    // A string's UTF-8 size is at most three times its length.
    if (json.length * 3 > max) {
      const bytes = enc.encode(json).length;
      if (bytes > max) {
        return { ok: false, index: i, detail: `row is ${bytes} bytes; the limit is ${max}` };
      }
    }
    jsons[i] = json;
  }
  return { ok: true, jsons };
}
