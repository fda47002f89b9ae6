/**
 * A mirror's sealed history: the primary's manifest (`GET /{name}/manifest`)
 * and its chunks (`GET /{name}/chunks/{sha256}`, with the `.times` side file
 * beside it) — or the same from the primary's S3 archive — each checked against its SHA-256 before it is kept; a chunk
 * that arrives damaged is refused and fetched again. The chunks are then
 * adopted by the replica's log (same names, bytes and manifest entries).
 *
 * @module
 */

import type { ChunkEntry, Log, Manifest } from "../../log/mod.ts";
import { checkManifest } from "../../log/chunk/chunk.ts";
import type { ArchiveStore } from "../../log/chunk/archive.ts";
import { ChunkDigestError, storeAdoptedChunk } from "../../log/chunk/adoption.ts";
import { maxTimesBytes } from "../../log/chunk/times.ts";
import { progressGet, readBounded } from "./_progress_get.ts";

/** Where a mirror reads the primary's sealed history: its HTTP routes, or its S3 archive. */
export interface HistorySource {
  /** What to call it in messages. */
  readonly name: string;
  /** The manifest; null when there is none (the primary keeps no chunks). */
  manifest(): Promise<Manifest | null>;
  /**
   * A chunk's bytes, as a stream (read once, to a file: a merged chunk can
   * be hundreds of MB); null when it is not there (any more).
   */
  chunk(sha256: string): Promise<ReadableStream<Uint8Array> | null>;
  /**
   * A chunk's time index; null when there is none. One of more than
   * `maxBytes` is refused (`RangeError`) without being read whole.
   */
  times(sha256: string, maxBytes: number): Promise<Uint8Array | null>;
}

/** Options of {@linkcode httpSource}. */
export interface HttpSourceOptions {
  /** Headers of every request (the bearer token). @default {} */
  headers?: HeadersInit;
  /** The fetch to use. @default fetch */
  fetch?: typeof fetch;
  /** Aborts every request (the mirror closing). */
  signal: AbortSignal;
  /** Longest wait for an answer's headers, then for each piece of its body, ms. */
  idleMs: number;
  /** Largest manifest read; a larger one fails the request. */
  maxManifestBytes: number;
}

/**
 * The primary's HTTP routes: `GET {base}/manifest`, `{base}/chunks/{sha256}`
 * and `{base}/chunks/{sha256}.times`. Each request is bounded by progress
 * (`idleMs` of silence fails it; a slow but moving body takes as long as it
 * needs) and each body by size: the manifest by `maxManifestBytes`, a time
 * index by what its chunk's rows allow, a chunk by its entry's `bytes`
 * (checked as it is stored).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { httpSource } from "./_fetch_history.ts";
 * const src = httpSource("http://127.0.0.1:8765/trades", {
 *   signal: new AbortController().signal,
 *   idleMs: 30_000,
 *   maxManifestBytes: 1 << 20,
 * });
 * equal(src.name, "http://127.0.0.1:8765/trades");
 * ```
 */
export function httpSource(base: string, options: HttpSourceOptions): HistorySource {
  const maxManifestBytes = options.maxManifestBytes;
  const get = async (path: string): Promise<Response | null> => {
    const res = await progressGet(`${base}/${path}`, {
      headers: options.headers ?? {},
      fetch: options.fetch ?? fetch,
      signal: options.signal,
      idleMs: options.idleMs,
    });
    if (res.status === 404) {
      await res.body?.cancel();
      return null;
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new Error(`GET ${base}/${path} answered ${res.status}`);
    }
    return res;
  };
  return {
    name: base,
    async manifest() {
      const res = await get("manifest");
      if (!res) return null;
      const what = `GET ${base}/manifest (--follow-max-manifest-bytes)`;
      const bytes = await readBounded(res.body, maxManifestBytes, what);
      let m: Manifest;
      try {
        m = JSON.parse(new TextDecoder().decode(bytes)) as Manifest;
      } catch {
        throw new Error(`GET ${base}/manifest is not JSON`);
      }
      const bad = checkManifest(m);
      if (bad !== null) throw new Error(`GET ${base}/manifest is not a manifest: ${bad}`);
      return m;
    },
    chunk: async (sha) => {
      const res = await get(`chunks/${sha}`);
      return res?.body ?? (res ? new Blob([]).stream() : null);
    },
    times: async (sha, maxBytes) => {
      const res = await get(`chunks/${sha}.times`);
      return res ? await readBounded(res.body, maxBytes, "the time index") : null;
    },
  };
}

/**
 * The primary's S3 archive (`--archive` on a mirror): the archived
 * manifest and chunks; archives keep no time index.
 *
 * @example
 * ```ts ignore
 * const src = archiveSource(new ArchiveStore({ uri: "s3://market-data/prod" }, "trades"));
 * ```
 */
export function archiveSource(store: ArchiveStore): HistorySource {
  return {
    name: store.uri,
    manifest: () => store.getManifest(),
    chunk: (sha) => store.getChunk(sha),
    times: () => Promise.resolve(null),
  };
}

/** What one sync of the history did. */
export interface HistoryReport {
  /** Chunks fetched and kept. */
  fetched: number;
  /** Copies refused (damaged), each fetched again. */
  refused: number;
  /** Chunks listed after the sync. */
  listed: number;
}

/** How many times a chunk whose copy is refused is fetched again before the sync fails. */
export const CHUNK_ATTEMPTS = 5;

/**
 * Fetches chunk `e` (and its time index when the primary has one), checks
 * and keeps it in the replica's folder; a damaged copy is refused
 * (`onRefused`) and fetched again, up to {@linkcode CHUNK_ATTEMPTS} times.
 */
async function fetchChunk(
  src: HistorySource,
  dir: string,
  e: ChunkEntry,
  onRefused: (err: ChunkDigestError) => void,
): Promise<void> {
  for (let attempt = 1;; attempt++) {
    try {
      // The time index first (small: bounded by the entry's rows), then the
      // chunk streamed to its file (bounded by the entry's bytes).
      const times = await src.times(e.sha256, maxTimesBytes(e.rows)).catch((err) => {
        if (!(err instanceof RangeError)) throw err;
        throw new ChunkDigestError(e.sha256, `${err.message}, more than ${e.rows} rows can take`);
      });
      const body = await src.chunk(e.sha256);
      if (body === null) throw new Error(`${src.name} no longer has chunk ${e.sha256}`);
      await storeAdoptedChunk(dir, e, body, times);
      return;
    } catch (err) {
      if (!(err instanceof ChunkDigestError)) throw err;
      onRefused(err);
      if (attempt >= CHUNK_ATTEMPTS) throw err;
    }
  }
}

/** How many fetched chunks are listed at once (one manifest write). */
const ADOPT_BATCH = 16;

/**
 * Brings the replica's chunks up to the primary's manifest `m`: every chunk
 * of the primary at or above the replica's earliest row that it does not
 * list yet is fetched, checked and adopted. With `live`, only chunks whose
 * rows the replica already holds (last < its end): the tail is being
 * written, and must not be fenced under it. Without, the replica's next
 * offset moves past the chunks adopted (the tail then starts after them).
 *
 * @example
 * ```ts ignore
 * const report = await syncHistory(log, src, manifest, { live: false, onRefused: () => {} });
 * ```
 */
export async function syncHistory(
  log: Log,
  src: HistorySource,
  m: Manifest,
  options: { live: boolean; onRefused: (err: ChunkDigestError) => void },
): Promise<HistoryReport> {
  const floor = log.earliest ?? log.endOffset;
  const end = log.endOffset;
  const have = new Set((log.chunks.manifest?.chunks ?? []).map((c) => c.sha256));
  const wanted = m.chunks.filter((c) => c.last >= floor && (!options.live || c.last < end));
  const report: HistoryReport = { fetched: 0, refused: 0, listed: 0 };
  if (wanted.every((c) => have.has(c.sha256))) {
    report.listed = log.chunks.manifest?.chunks.length ?? 0;
    return report;
  }
  const onRefused = (err: ChunkDigestError) => {
    report.refused++;
    options.onRefused(err);
  };
  let batch: ChunkEntry[] = [];
  for (const c of wanted) {
    if (!have.has(c.sha256)) {
      await fetchChunk(src, log.dir, c, onRefused);
      report.fetched++;
    }
    batch.push(c);
    if (batch.length >= ADOPT_BATCH) {
      await log.adoptChunks(batch);
      batch = [];
    }
  }
  await log.adoptChunks(batch);
  report.listed = log.chunks.manifest?.chunks.length ?? 0;
  return report;
}
