/**
 * `GET /{name}/at?since=T` (`/_/at` for the unnamed stream): where a time
 * starts in a stream's log — `{"offset":N,"ts":µs}`, the first row whose
 * append time is at or after `T` (RFC 3339 or µs since the epoch), or
 * `{"offset":end_offset,"ts":null}` when every row is older. The lookup is
 * the log's own (`Log.offsetAt`, O(log n)); a subscribe with `since=T`
 * starts at the same offset. 400 with a JSON error for a missing or bad `T`
 * (or another parameter); 404 for an ephemeral stream, which has no offsets.
 * Access is checked by the handler as for `/head`. A holder of a row-level
 * grant gets the offset with `ts` null: the row there may be one it is not
 * granted, and its append time is that row's.
 *
 * @module
 */

import { parseSince } from "../../wire/since.ts";
import type { Stream } from "../stream/stream.ts";
import { json } from "./_respond.ts";

// Parameters /at reads (access_token is the handler's, for clients that cannot set headers).
const AT_PARAMS: ReadonlySet<string> = new Set(["since", "access_token"]);

/**
 * Answers `GET /{name}/at` for `stream`; `showTs` false answers `ts` null
 * (for a holder of a row-level grant on it).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Stream } from "../stream/stream.ts";
 * import { atResponse } from "./at.ts";
 * const s = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * equal((await atResponse(s, new URL("http://x/t/at?since=0"))).status, 404);
 * ```
 */
export async function atResponse(stream: Stream, url: URL, showTs = true): Promise<Response> {
  for (const key of url.searchParams.keys()) {
    if (!AT_PARAMS.has(key)) {
      return json({ error: "bad_request", detail: `unknown parameter ${key.slice(0, 40)}` }, 400);
    }
  }
  const text = url.searchParams.get("since");
  if (text === null) {
    return json({ error: "bad_request", detail: "since is missing (RFC 3339 or µs)" }, 400);
  }
  let since: number;
  try {
    since = parseSince(text);
  } catch (err) {
    return json({ error: "bad_request", detail: (err as Error).message }, 400);
  }
  const log = stream.log;
  if (!log) {
    return json({ error: "not_found", detail: "an ephemeral stream has no offsets" }, 404);
  }
  const at = await log.offsetAt(since);
  return json({ offset: at.offset, ts: showTs ? at.ts : null });
}
