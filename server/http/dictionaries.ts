/**
 * `GET /{name}/dictionaries/{id}` (compress=zstd-dict, docs/SPEC.md §2.6): the
 * stream's zstd dictionary named in a greeting, immutable like a chunk
 * (`ETag: "id"`, `Cache-Control: immutable`, `If-None-Match` answered 304).
 * Access is checked as for chunks before this is reached.
 *
 * @module
 */

import type { Stream } from "../stream/stream.ts";
import { notFound } from "./_respond.ts";

/**
 * The dictionary `id` of `stream`: its bytes, 304, or 404 for an id the
 * stream does not serve.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Stream } from "../stream/stream.ts";
 * import { dictionaryResponse } from "./dictionaries.ts";
 * const s = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const res = dictionaryResponse(new Request("http://x/"), s, "ab");
 * equal(res.status, 404);
 * await res.body?.cancel();
 * ```
 */
export function dictionaryResponse(req: Request, stream: Stream, id: string): Response {
  const d = /^[0-9a-f]{32}$/.test(id) ? stream.dictionaryById(id) : null;
  if (!d) {
    return notFound(`no dictionary ${JSON.stringify(id)} on stream ${JSON.stringify(stream.name)}`);
  }
  const etag = `"${d.id}"`;
  const headers: Record<string, string> = {
    "content-type": "application/octet-stream",
    "etag": etag,
    "cache-control": "public, max-age=31536000, immutable",
  };
  const inm = req.headers.get("if-none-match");
  if (inm && inm.split(",").some((t) => t.trim() === etag || t.trim() === "*")) {
    return new Response(null, { status: 304, headers });
  }
  headers["content-length"] = String(d.bytes.length);
  return new Response(req.method === "HEAD" ? null : d.bytes.slice(), { headers });
}
