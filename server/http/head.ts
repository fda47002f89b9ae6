/**
 * `GET /{name}/head` (`/_/head` for the unnamed stream) and `GET /_/streams`:
 * a stream's head, and the heads of every stream the caller may read.
 *
 * @module
 */

import type { StreamHead } from "../../client/wire.ts";
import type { Stream } from "../stream.ts";
import { json } from "./_respond.ts";

/**
 * The head of `stream`.
 *
 * @example
 * ```ts
 * import { Stream } from "../stream.ts";
 * import { headResponse } from "./head.ts";
 * const s = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * console.log((await headResponse(s).json()).durable); // false
 * ```
 */
export function headResponse(stream: Stream): Response {
  return json(stream.head());
}

/**
 * The heads of the `streams` that `mayRead`.
 *
 * @example
 * ```ts
 * import { Stream } from "../stream.ts";
 * import { readableHeads } from "./head.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const streams = [Stream.ephemeral("a", { schema }), Stream.ephemeral("b", { schema })];
 * console.log(readableHeads(streams, (name) => name === "b").map((h) => h.stream)); // ["b"]
 * ```
 */
export function readableHeads(
  streams: Iterable<Stream>,
  mayRead: (name: string) => boolean,
): StreamHead[] {
  const out: StreamHead[] = [];
  for (const s of streams) if (mayRead(s.name)) out.push(s.head());
  return out;
}

/**
 * `GET /_/streams`: the heads of the `streams` that `mayRead`, as a JSON array.
 *
 * @example
 * ```ts
 * import { Stream } from "../stream.ts";
 * import { streamsResponse } from "./head.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const res = streamsResponse([Stream.ephemeral("a", { schema })], () => true);
 * console.log((await res.json()).length); // 1
 * ```
 */
export function streamsResponse(
  streams: Iterable<Stream>,
  mayRead: (name: string) => boolean,
): Response {
  return json(readableHeads(streams, mayRead));
}
