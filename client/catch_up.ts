/**
 * Catching up over HTTP: when a subscribe is refused for reaching too far back
 * (`too_old`, or `evicted` with an archive to read), the client reads the gap
 * from the server's chunks (`GET /{name}/manifest`, `GET /{name}/chunks/{sha256}`)
 * — or from the archive for rows the server no longer holds — with no socket
 * open, then subscribes where the chunks ended. Every chunk is checked against
 * its SHA-256 before a line of it is used.
 *
 * Web APIs only, except that zstd must be decoded: pass `decompress`, or rely
 * on the default, which loads `node:zlib` where it exists (Deno, Node).
 *
 * @module
 */

import { describe } from "./_describe.ts";
import { headUrl } from "./head.ts";
import { NotReplayable } from "./errors.ts";
import {
  type Greeting,
  PROTOCOL_VERSION,
  ROW_LEVEL_DETAIL,
  type StreamHead,
} from "../wire/subscribe.ts";

/** One chunk as a manifest lists it. */
export interface ChunkInfo {
  /** First offset. */
  first: number;
  /** Last offset. */
  last: number;
  /** Rows. */
  rows: number;
  /** Compressed bytes. */
  bytes: number;
  /** SHA-256 of the compressed bytes (its name). */
  sha256: string;
  /** Append time of its first row, µs (manifests written since append times were recorded). */
  first_ts?: number;
  /** Append time of its last row, µs. */
  last_ts?: number;
}

/** A stream's chunk manifest, as served at `/{name}/manifest`. */
export interface ManifestInfo {
  /** The stream id. */
  stream_id: string;
  /** Last offset the chunks cover. */
  through: number;
  /** The chunks, in offset order. */
  chunks: ChunkInfo[];
}

/** Somewhere else to read older chunks from (an S3 archive, say). */
export interface ChunkSource {
  /** A name for messages (e.g. the `s3://` URI). */
  readonly name: string;
  /** The source's manifest, or `null` when it has none. */
  manifest(): Promise<ManifestInfo | null>;
  /** A chunk's compressed bytes. */
  chunk(sha256: string): Promise<Uint8Array>;
}

/** Options of catch-up. */
export interface CatchUpOptions {
  /** zstd decoder. @default `node:zlib`'s, where it exists */
  decompress?: (bytes: Uint8Array) => Uint8Array | Promise<Uint8Array>;
  /** Where to read chunks the server no longer holds (see `client/s3.ts`). @default none */
  archive?: ChunkSource | null;
  /** The fetch to use. @default globalThis.fetch */
  fetch?: typeof fetch;
}

const CATCH_UP_KEYS: ReadonlySet<string> = new Set(["decompress", "archive", "fetch"]);

/**
 * Checks {@linkcode CatchUpOptions} as a caller passed them: a `TypeError`
 * naming `where`, the option and what was seen for an unknown key or a wrong
 * type (`archive` must be a {@linkcode ChunkSource}).
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { checkCatchUpOptions } from "./catch_up.ts";
 * checkCatchUpOptions({ decompress: (b: Uint8Array) => b }, "catchUp");
 * try {
 *   checkCatchUpOptions({ archive: "s3://market-data/prod" }, "catchUp");
 * } catch (err) {
 *   ok(err instanceof TypeError);
 * }
 * ```
 */
export function checkCatchUpOptions(value: unknown, where: string): CatchUpOptions {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(`${where} must be an object, got ${describe(value)}`);
  }
  const o = value as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!CATCH_UP_KEYS.has(key)) throw new TypeError(`${where}: unknown option ${key}`);
  }
  for (const key of ["decompress", "fetch"]) {
    if (o[key] !== undefined && typeof o[key] !== "function") {
      throw new TypeError(`${where}.${key} must be a function, got ${describe(o[key])}`);
    }
  }
  const a = o.archive as Partial<ChunkSource> | null | undefined;
  if (
    a !== undefined && a !== null &&
    (typeof a !== "object" || typeof a.manifest !== "function" ||
      typeof a.chunk !== "function" || typeof a.name !== "string")
  ) {
    throw new TypeError(
      `${where}.archive must be a ChunkSource (name, manifest(), chunk(); e.g. an ` +
        `S3ChunkSource from client/s3.ts), got ${describe(o.archive)}`,
    );
  }
  return o as CatchUpOptions;
}

/** A chunk whose bytes do not match its SHA-256 name. */
export class CorruptChunk extends Error {
  /** The chunk's name. */
  readonly sha256: string;
  /** Makes the error. */
  constructor(sha256: string, where: string) {
    super(`chunk ${sha256} from ${where} does not match its SHA-256: refusing to use it`);
    this.name = "CorruptChunk";
    this.sha256 = sha256;
  }
}

async function defaultDecompress(bytes: Uint8Array): Promise<Uint8Array> {
  // A computed specifier, so that browser bundles leave it alone.
  const spec = "node:zlib";
  let zlib: { zstdDecompressSync(b: Uint8Array): Uint8Array };
  try {
    zlib = await import(spec);
  } catch {
    throw new TypeError(
      "catch-up needs a zstd decoder in this runtime: pass catchUp: { decompress }",
    );
  }
  return zlib.zstdDecompressSync(bytes);
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The base HTTP URL of a stream's routes (`…/NAME` or `…/_` for the unnamed one). */
export function streamHttpBase(streamUrl: string | URL): string {
  return headUrl(streamUrl).replace(/\/head$/, "");
}

/**
 * The server refused the chunks to this token: a row-level grant reads
 * only through the socket, which filters its rows (403 `row-level grant`).
 */
export class ChunksForbidden extends Error {
  /** Makes the error for the stream at `streamUrl`. */
  constructor(streamUrl: string | URL) {
    super(`GET manifest of ${streamUrl}: 403 ${ROW_LEVEL_DETAIL}`);
    this.name = "ChunksForbidden";
  }
}

/**
 * Fetches the server's manifest for a stream; `null` when it keeps no
 * chunks. Throws {@linkcode ChunksForbidden} for a row-level grant.
 */
export async function fetchManifest(
  streamUrl: string | URL,
  f: typeof fetch = fetch,
): Promise<ManifestInfo | null> {
  const res = await f(`${streamHttpBase(streamUrl)}/manifest`);
  if (res.status === 404) {
    await res.body?.cancel();
    return null;
  }
  if (res.status === 403) {
    const body = await res.json().catch(() => null);
    if (body?.detail === ROW_LEVEL_DETAIL) throw new ChunksForbidden(streamUrl);
    throw new Error(`GET manifest of ${streamUrl}: HTTP 403`);
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`GET manifest of ${streamUrl}: HTTP ${res.status}`);
  }
  return await res.json();
}

/** What a catch-up produced: lines in pieces, and where to subscribe after. */
export interface CatchUp {
  /** `[offset,msg]` lines, in offset order, a chunk at a time. */
  lines: AsyncIterableIterator<string[]>;
  /** The offset to subscribe at once `lines` is exhausted. */
  next(): number;
}

function lineOffset(line: string): number {
  const comma = line.indexOf(",");
  return Number(line.slice(1, comma));
}

/**
 * Where a `since` (µs) starts in a chunk source's history: the first offset of
 * the first chunk whose last row was appended at or after it. Chunk-grained —
 * archived chunks carry no time index — so rows of that chunk from before the
 * time come too. `null` when no chunk of the source reaches the time.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { archiveOffsetAt, type ChunkSource } from "./catch_up.ts";
 * const source: ChunkSource = {
 *   name: "example",
 *   manifest: () => Promise.resolve({ stream_id: "0".repeat(32), through: 20, chunks: [
 *     { first: 1, last: 10, rows: 10, bytes: 1, sha256: "a", first_ts: 1, last_ts: 5 },
 *     { first: 11, last: 20, rows: 10, bytes: 1, sha256: "b", first_ts: 6, last_ts: 9 },
 *   ] }),
 *   chunk: () => Promise.resolve(new Uint8Array()),
 * };
 * equal(await archiveOffsetAt(source, 7), 11);
 * ```
 */
export async function archiveOffsetAt(
  source: ChunkSource,
  sinceUs: number,
): Promise<number | null> {
  const manifest = await source.manifest();
  const chunk = manifest?.chunks.find((c) => (c.last_ts ?? Infinity) >= sinceUs);
  return chunk ? chunk.first : null;
}

/**
 * Reads `[from, …]` from the server's chunks (and the archive for what the
 * server dropped), checking each chunk's SHA-256. Throws `NotReplayable`
 * (`evicted`) when neither holds `from`, or `other_stream` when the chunks
 * belong to another stream id than `streamId`.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { catchUp } from "./catch_up.ts";
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("ticks", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * await stream.sendMany([{ v: 1 }, { v: 2 }]);
 * await stream.log!.roll(); // seal the segment, so that it becomes a chunk
 * await stream.log!.chunks.settled();
 * const c = await catchUp(`${server.url}/ticks`, 1, null);
 * const lines: string[] = [];
 * for await (const batch of c.lines) lines.push(...batch);
 * deepStrictEqual(lines, ['[1,{"v":1}]', '[2,{"v":2}]']);
 * equal(c.next(), 3); // where to subscribe for the rest
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export async function catchUp(
  streamUrl: string,
  from: number,
  streamId: string | null,
  options: CatchUpOptions = {},
): Promise<CatchUp> {
  const f = options.fetch ?? fetch;
  const decompress = options.decompress ?? defaultDecompress;
  const manifest = await fetchManifest(streamUrl, f);
  const archived = options.archive ? await options.archive.manifest() : null;
  const idOf = manifest?.stream_id ?? archived?.stream_id ?? null;
  if (streamId !== null && idOf !== null && idOf !== streamId) {
    throw new NotReplayable(streamUrl, { why: "other_stream", offset: from, streamId });
  }
  // The server's chunks from `from` on; older ones from the archive.
  const local = (manifest?.chunks ?? []).filter((c) => c.last >= from);
  const localFirst = local[0]?.first ?? Infinity;
  const older = (archived?.chunks ?? []).filter((c) => c.last >= from && c.first < localFirst);
  const plan: { chunk: ChunkInfo; where: "server" | "archive" }[] = [
    ...older.map((chunk) => ({ chunk, where: "archive" as const })),
    ...local.map((chunk) => ({ chunk, where: "server" as const })),
  ];
  const first = plan[0]?.chunk.first ?? Infinity;
  if (plan.length === 0 || first > from) {
    const earliest = Number.isFinite(first) ? first : null;
    // Rows in [from, first) are in no chunk we can reach. If none are missing
    // (a fence gap), go on; else refuse like the server would.
    const maxThrough = Math.max(manifest?.through ?? 0, archived?.through ?? 0);
    if (plan.length === 0 && from > maxThrough) {
      return { lines: (async function* () {})(), next: () => from };
    }
    if (!options.archive || earliest === null) {
      throw new NotReplayable(streamUrl, {
        why: "evicted",
        offset: from,
        earliest: earliest ?? undefined,
      });
    }
  }
  let next = from;
  const base = streamHttpBase(streamUrl);
  async function* lines(): AsyncIterableIterator<string[]> {
    for (const { chunk, where } of plan) {
      let bytes: Uint8Array;
      if (where === "archive") {
        bytes = await options.archive!.chunk(chunk.sha256);
      } else {
        const res = await f(`${base}/chunks/${chunk.sha256}`);
        if (!res.ok) {
          await res.body?.cancel();
          throw new Error(`GET chunk ${chunk.sha256}: HTTP ${res.status}`);
        }
        bytes = new Uint8Array(await res.arrayBuffer());
      }
      if ((await sha256Hex(bytes)) !== chunk.sha256) {
        throw new CorruptChunk(chunk.sha256, where === "archive" ? options.archive!.name : base);
      }
      const text = new TextDecoder().decode(await decompress(bytes));
      const all = text.split("\n");
      all.pop(); // every line, the last included, ends with \n
      let i = 0;
      while (i < all.length && lineOffset(all[i]) < next) i++;
      const out = i === 0 ? all : all.slice(i);
      if (out.length > 0) {
        next = lineOffset(out[out.length - 1]) + 1;
        yield out;
      }
      next = Math.max(next, chunk.last + 1);
    }
  }
  return { lines: lines(), next: () => next };
}

/**
 * The greeting a subscription shows while it reads chunks over HTTP from
 * `from` on (no socket is open): made from the stream's head.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { catchUpGreeting } from "./catch_up.ts";
 * import type { StreamHead } from "../wire/subscribe.ts";
 * const head = {
 *   stream: "trades",
 *   stream_id: "0123456789abcdef0123456789abcdef",
 *   end_offset: 500,
 *   archive: null,
 *   schema: {},
 * } as unknown as StreamHead;
 * deepStrictEqual(catchUpGreeting(head, 10).replay, [10, 500]);
 * ```
 */
export function catchUpGreeting(head: StreamHead, from: number): Greeting {
  return {
    streamcast: PROTOCOL_VERSION,
    stream: head.stream,
    stream_id: head.stream_id,
    end_offset: head.end_offset,
    replay: head.end_offset !== null && from < head.end_offset ? [from, head.end_offset] : null,
    log: { name: head.stream, archive: head.archive },
    durable: true,
    schema: head.schema,
    frames: "batch",
  };
}
