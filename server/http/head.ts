/**
 * `GET /{name}/head` (`/_/head` for the unnamed stream) and `GET /_/streams`:
 * a stream's head, and the heads of every stream the caller may read.
 *
 * @module
 */

import type { StreamHead } from "../../client/wire.ts";
import type { Stream } from "../stream/stream.ts";
import { json } from "./_respond.ts";

/**
 * The head of `stream`.
 *
 * @example
 * ```ts
 * import { Stream } from "../stream/stream.ts";
 * import { headResponse } from "./head.ts";
 * const s = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * console.log((await headResponse(s).json()).durable); // false
 * ```
 */
export function headResponse(stream: Stream, publish = false): Response {
  return json(headOf(stream, publish));
}

// --- schema_versions (issue 19) ------------------------------------------

/**
 * `stream.head()` with the schema history: `schema_versions`, every version
 * with the first offset it applies from (`[{"from":1,"schema":{…}},
 * {"from":5001,"schema":{…}}]`; `from` null on an ephemeral stream), and
 * `publish`: whether the stream takes rows over the publish routes (`publish`
 * is the caller's knowledge of that: the server's `--publish` set).
 *
 * @example
 * ```ts
 * import { Stream } from "../stream/stream.ts";
 * import { headOf } from "./head.ts";
 * const s = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * console.log(headOf(s).schema_versions); // [ { from: null, schema: { … } } ]
 * ```
 */
export function headOf(stream: Stream, publish = false): StreamHead {
  return { ...stream.head(), schema_versions: stream.schemaVersions, publish };
}

/**
 * The heads of the `streams` that `mayRead`; `publishable` says which take
 * rows over the publish routes (none by default).
 *
 * @example
 * ```ts
 * import { Stream } from "../stream/stream.ts";
 * import { readableHeads } from "./head.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const streams = [Stream.ephemeral("a", { schema }), Stream.ephemeral("b", { schema })];
 * console.log(readableHeads(streams, (name) => name === "b").map((h) => h.stream)); // ["b"]
 * ```
 */
export function readableHeads(
  streams: Iterable<Stream>,
  mayRead: (name: string) => boolean,
  publishable: (stream: Stream) => boolean = () => false,
): StreamHead[] {
  const out: StreamHead[] = [];
  for (const s of streams) if (mayRead(s.name)) out.push(headOf(s, publishable(s)));
  return out;
}

/**
 * `GET /_/streams`: the heads of the `streams` that `mayRead`, as a JSON array.
 *
 * @example
 * ```ts
 * import { Stream } from "../stream/stream.ts";
 * import { streamsResponse } from "./head.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const res = streamsResponse([Stream.ephemeral("a", { schema })], () => true);
 * console.log((await res.json()).length); // 1
 * ```
 */
export function streamsResponse(
  streams: Iterable<Stream>,
  mayRead: (name: string) => boolean,
  publishable: (stream: Stream) => boolean = () => false,
): Response {
  return json(readableHeads(streams, mayRead, publishable));
}
