/**
 * Feeding rows into a stream from outside: NDJSON lines (`serve --stdin NAME`)
 * or the text frames of an upstream WebSocket (`serve --upstream NAME=URL`,
 * optionally through `--handler MODULE.ts`).
 *
 * Invariants this module keeps:
 * - rows reach the sink in input order, and a bad line or frame is reported
 *   (log, `onReject`, counted) in input order — nothing is skipped silently;
 * - a row the sink refuses with {@linkcode RowError} (the schema) or
 *   `RangeError` (too big to store) is a reject and ingest goes on; any other
 *   refusal (disk full…) stops ingest and is thrown once every row already
 *   sent has settled;
 * - memory is bounded: at most `maxInFlight` rows are awaiting the sink, one
 *   line holds at most `maxLineBytes` (a longer one is rejected without being
 *   buffered whole), and an upstream queue longer than `maxQueuedFrames`
 *   disconnects rather than grows;
 * - every timer and socket is released when the `signal` aborts.
 *
 * The parts, one job each: `lines.ts` (NDJSON input), `upstream.ts` (a
 * WebSocket with reconnect), `handler.ts` (handler modules),
 * `reject_file.ts` (`rejects.ndjson`), `options.ts` (the sink, options,
 * stats and the {@linkcode IngestEvent}s every ingest reports); privately
 * `_line_splitter.ts`, `_decode.ts` and `_feeder.ts` (the in-order,
 * in-flight-bounded pipeline to the sink).
 *
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { type IngestEvent, ingestLines, type IngestSink } from "./mod.ts";
 * import { RowError } from "../stream/row_error.ts";
 *
 * const rows: unknown[] = [];
 * const sink: IngestSink = {
 *   name: "trades",
 *   send(row) {
 *     if (typeof (row as { x?: unknown })?.x !== "number") {
 *       return Promise.reject(new RowError("trades", "/x: must be number"));
 *     }
 *     return Promise.resolve(rows.push(row));
 *   },
 * };
 * const events: IngestEvent[] = [];
 * const input = new Blob(['{"x":1}\n{"x":"no"}\n{"x":2}\n']).stream();
 * const stats = await ingestLines(input, sink, { onEvent: (e) => events.push(e) });
 * deepStrictEqual(stats, { lines: 3, accepted: 2, rejected: 1 });
 * deepStrictEqual(events.map((e) => e.event), ["reject", "end_of_input"]);
 * ```
 *
 * @module
 */

export * from "./options.ts";
export * from "./lines.ts";
export * from "./upstream.ts";
export * from "./handler.ts";
export * from "./reject_file.ts";
