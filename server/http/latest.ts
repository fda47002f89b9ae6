/**
 * `GET /{name}/latest` (`/_/latest` for the unnamed stream): a keyed
 * stream's snapshot at its committed end — the latest row of every key, in
 * offset order, as NDJSON `[offset,row]` lines, with the header
 * `Streamcast-End` (the offset after the last row it holds the state of);
 * `where=` keeps the keys whose row it matches, as a subscribe's does.
 * `?key=V` (one per key column, in order) answers that key's one line, or
 * 404 `{"error":"no_such_key"}`. 404 for a stream without a key; 503
 * `{"error":"snapshot_unavailable","why":"too_many_keys"}` past its key
 * limit; 400 for a bad parameter (an unknown or repeated one too). Access is checked by the handler as for
 * `/head`; a row-level grant's filter (`grantFilter`) is ANDed with
 * `where=`, and a key whose row it leaves out is not found.
 *
 * @module
 */

import { bothFilters, compileFilter, type Filter, FilterError } from "../../wire/filter.ts";
import type { Stream } from "../stream/stream.ts";
import { json } from "./_respond.ts";

// Parameters /latest reads (access_token is the handler's, for clients that cannot set headers).
const LATEST_PARAMS: ReadonlySet<string> = new Set(["where", "key", "access_token"]);

/** The header naming the snapshot's end. */
export const END_HEADER = "Streamcast-End";

const NDJSON = "application/x-ndjson; charset=utf-8";

/**
 * Answers `GET /{name}/latest` for `stream`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Stream } from "../stream/stream.ts";
 * import { latestResponse } from "./latest.ts";
 * const root = await Deno.makeTempDir();
 * const s = await Stream.open("px", {
 *   root,
 *   schema: { type: "object", properties: { sym: { type: "string" }, px: { type: "number" } }, required: ["sym", "px"] },
 *   key: ["sym"],
 * });
 * await s.sendMany([{ sym: "a", px: 1 }, { sym: "a", px: 2 }]);
 * const res = latestResponse(s, new URL("http://x/px/latest"));
 * equal(res.headers.get("streamcast-end"), "3");
 * equal(await res.text(), '[2,{"sym":"a","px":2}]\n');
 * await s.close();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export function latestResponse(
  stream: Stream,
  url: URL,
  grantFilter: Filter | null = null,
): Response {
  for (const key of url.searchParams.keys()) {
    if (!LATEST_PARAMS.has(key)) {
      return json({ error: "bad_request", detail: `unknown parameter ${key.slice(0, 40)}` }, 400);
    }
  }
  // As on the socket: a second where= is refused, not ignored.
  if (url.searchParams.getAll("where").length > 1) {
    return json({ error: "bad_request", detail: "repeated parameter where" }, 400);
  }
  const columns = stream.key;
  if (columns === null) {
    return json({ error: "not_found", detail: "the stream has no key" }, 404);
  }
  const values = url.searchParams.getAll("key");
  const where = url.searchParams.get("where");
  if (values.length > 0) {
    if (where !== null) {
      return json({ error: "bad_request", detail: "give key or where, not both" }, 400);
    }
    const found = stream.latest(values);
    if (found === null) {
      return json({ error: "not_found", detail: "the stream has no key" }, 404);
    }
    if ("problem" in found) return json({ error: "bad_request", detail: found.problem }, 400);
    const { entry, end } = found;
    if (
      entry === undefined || (grantFilter !== null && !grantFilter.test(JSON.parse(entry.json)))
    ) {
      return json({ error: "no_such_key" }, 404);
    }
    return new Response(`[${entry.offset},${entry.json}]\n`, {
      headers: { "content-type": NDJSON, [END_HEADER]: String(end) },
    });
  }
  let filter = null;
  if (where !== null) {
    try {
      filter = compileFilter(where, stream.schema.json);
    } catch (err) {
      if (!(err instanceof FilterError)) throw err;
      return json({ error: "bad_request", detail: err.detail }, 400);
    }
  }
  const rows = grantFilter === null
    ? filter
    : filter === null
    ? grantFilter
    : bothFilters(grantFilter, filter);
  const snap = stream.snapshot(rows);
  if (snap === "too_many_keys") {
    return json({ error: "snapshot_unavailable", why: "too_many_keys" }, 503);
  }
  const body = snap!.lines.length === 0 ? "" : snap!.lines.join("\n") + "\n";
  return new Response(body, {
    headers: { "content-type": NDJSON, [END_HEADER]: String(snap!.end) },
  });
}
