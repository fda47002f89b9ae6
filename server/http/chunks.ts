/**
 * `GET /{name}/manifest` and `GET /{name}/chunks/{sha256}`: a stream's chunk
 * manifest (`ETag` of its generation, `no-cache`), and a chunk's bytes as
 * stored (`ETag: "sha256"`, immutable, `Range`, `If-None-Match`). Only chunks
 * the manifest names (live or retired) are served.
 *
 * @module
 */

import { chunkPath, type Log } from "../../log/mod.ts";
import { timesPath } from "../../log/chunk/times.ts";
import type { Stream } from "../stream/stream.ts";
import { json, notFound } from "./_respond.ts";

const CHUNK = /^([0-9a-f]{64})$/;
const TIMES = /^([0-9a-f]{64})\.times$/;

// `GET /{name}/chunks/{sha256}.times`: the time index kept beside a listed
// chunk (immutable like it), or 404 when the chunk has none.
async function timesResponse(req: Request, log: Log, sha: string): Promise<Response> {
  const m = log.chunks.manifest;
  if (!m?.chunks.some((c) => c.sha256 === sha)) return notFound(`no chunk ${sha}`);
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(timesPath(log.dir, sha));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return notFound(`chunk ${sha} has no time index`);
    throw err;
  }
  const headers = {
    "content-type": "application/octet-stream",
    "etag": `"${sha}.times"`,
    "cache-control": "public, max-age=31536000, immutable",
  };
  if (req.headers.get("if-none-match") === headers.etag) {
    return new Response(null, { status: 304, headers });
  }
  return new Response(req.method === "HEAD" ? null : bytes as Uint8Array<ArrayBuffer>, { headers });
}

/**
 * The manifest of `stream`, or 404 when its log keeps no chunks.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Stream } from "../stream/stream.ts";
 * import { manifestResponse } from "./chunks.ts";
 * const s = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const res = manifestResponse(s);
 * equal(res.status, 404);
 * await res.body?.cancel();
 * ```
 */
export function manifestResponse(stream: Stream): Response {
  const m = stream.log?.chunks.manifest;
  if (!m) return notFound(`stream ${JSON.stringify(stream.name)} keeps no chunks`);
  return json(m, 200, { "cache-control": "no-cache", etag: `"g${m.generation}"` });
}

/**
 * `GET /{name}/chunks/{file}` of `stream`: the chunk `{sha256}`, or its time
 * index `{sha256}.times`; 404 for any other file, a chunk its manifest does
 * not name, or a stream with no log.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Stream } from "../stream/stream.ts";
 * import { chunkResponse } from "./chunks.ts";
 * const s = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const res = await chunkResponse(new Request("http://x/"), s, "0".repeat(64));
 * equal(res.status, 404);
 * await res.body?.cancel();
 * ```
 */
export function chunkResponse(
  req: Request,
  stream: Stream,
  file: string,
): Promise<Response> | Response {
  const log = stream.log;
  // A chunk's time index (mirrors copy it with the chunk): see timesResponse.
  const times = TIMES.exec(file);
  if (times && log) return timesResponse(req, log, times[1]);
  const chunk = CHUNK.exec(file);
  if (!chunk || !log) return notFound(`no chunk ${JSON.stringify(file.slice(0, 80))}`);
  const sha = chunk[1];
  const m = log.chunks.manifest;
  const known = m &&
    (m.chunks.some((c) => c.sha256 === sha) || m.retired.some((c) => c.sha256 === sha));
  if (!known) return notFound(`no chunk ${sha}`);
  return serveChunk(req, chunkPath(log.dir, sha), sha);
}

/**
 * Serves a chunk file: whole, or the byte range asked for; 304 when the
 * client's `If-None-Match` names it (a chunk's bytes never change).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { serveChunk } from "./chunks.ts";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/c`, "0123456789");
 * const sha = "0".repeat(64);
 * const req = new Request("http://x/", { headers: { range: "bytes=2-4" } });
 * const res = await serveChunk(req, `${dir}/c`, sha);
 * equal(res.status, 206);
 * equal(await res.text(), "234");
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function serveChunk(req: Request, path: string, sha: string): Promise<Response> {
  const etag = `"${sha}"`;
  const base: Record<string, string> = {
    "content-type": "application/zstd",
    "etag": etag,
    "cache-control": "public, max-age=31536000, immutable",
    "accept-ranges": "bytes",
  };
  const inm = req.headers.get("if-none-match");
  if (inm && inm.split(",").some((t) => t.trim() === etag || t.trim() === "*")) {
    return new Response(null, { status: 304, headers: base });
  }
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return notFound(`no chunk ${sha}`);
    throw err;
  }
  const size = (await file.stat()).size;
  let start = 0;
  let end = size - 1;
  let status = 200;
  const range = req.headers.get("range");
  if (range) {
    const m = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
    if (m && (m[1] !== "" || m[2] !== "")) {
      if (m[1] === "") {
        start = Math.max(0, size - Number(m[2]));
      } else {
        start = Number(m[1]);
        if (m[2] !== "") end = Math.min(end, Number(m[2]));
      }
      if (start > end || start >= size) {
        file.close();
        return new Response(null, {
          status: 416,
          headers: { ...base, "content-range": `bytes */${size}` },
        });
      }
      status = 206;
      base["content-range"] = `bytes ${start}-${end}/${size}`;
    }
    // A range we do not understand (several ranges, say) gets the whole chunk.
  }
  const length = end - start + 1;
  base["content-length"] = String(length);
  if (req.method === "HEAD") {
    file.close();
    return new Response(null, { status, headers: base });
  }
  await file.seek(start, Deno.SeekMode.Start);
  let left = length;
  const body = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const buf = new Uint8Array(Math.min(left, 256 * 1024));
        const n = await file.read(buf);
        if (n === null || n === 0) {
          file.close();
          ctrl.close();
          return;
        }
        left -= n;
        ctrl.enqueue(buf.subarray(0, n));
        if (left <= 0) {
          file.close();
          ctrl.close();
        }
      } catch (err) {
        file.close();
        ctrl.error(err);
      }
    },
    cancel() {
      file.close();
    },
  });
  return new Response(body, { status, headers: base });
}
