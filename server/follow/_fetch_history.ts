/**
 * A follower's sealed history: the primary's manifest (`GET /{name}/manifest`)
 * and its chunks (`GET /{name}/chunks/{sha256}`, with the `.times` side file
 * beside it), each checked against its SHA-256 before it is kept; a chunk
 * that arrives damaged is refused and fetched again. The chunks are then
 * adopted by the replica's log (same names, bytes and manifest entries).
 *
 * @module
 */

import type { ChunkEntry, Log, Manifest } from "../../log/mod.ts";
import { ChunkDigestError, storeAdoptedChunk } from "../../log/adoption.ts";

/** Where and how a follower reads the primary over HTTP. */
export interface HistorySource {
  /** The stream's HTTP base, `http://HOST:PORT/NAME` (`/_` for the unnamed stream). */
  base: string;
  /** Headers for every request (the bearer token). */
  headers: HeadersInit;
  /** The fetch to use. */
  fetch: typeof fetch;
  /** Aborts requests when the follower stops. */
  signal: AbortSignal;
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

async function get(src: HistorySource, path: string): Promise<Response> {
  return await src.fetch(`${src.base}/${path}`, { headers: src.headers, signal: src.signal });
}

/**
 * The primary's manifest; null when it keeps no chunks (404).
 *
 * @example
 * ```ts ignore
 * const m = await fetchPrimaryManifest(src);
 * console.log(m?.through);
 * ```
 */
export async function fetchPrimaryManifest(src: HistorySource): Promise<Manifest | null> {
  const res = await get(src, "manifest");
  if (res.status === 404) {
    await res.body?.cancel();
    return null;
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`GET ${src.base}/manifest answered ${res.status}`);
  }
  const m = await res.json() as Manifest;
  if (!m || typeof m !== "object" || !Array.isArray(m.chunks)) {
    throw new Error(`GET ${src.base}/manifest is not a manifest`);
  }
  return m;
}

async function fetchBytes(src: HistorySource, path: string): Promise<Uint8Array | null> {
  const res = await get(src, path);
  if (res.status === 404) {
    await res.body?.cancel();
    return null;
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`GET ${src.base}/${path} answered ${res.status}`);
  }
  return new Uint8Array(await res.arrayBuffer());
}

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
    const bytes = await fetchBytes(src, `chunks/${e.sha256}`);
    if (bytes === null) throw new Error(`the primary no longer has chunk ${e.sha256}`);
    const times = await fetchBytes(src, `chunks/${e.sha256}.times`);
    try {
      await storeAdoptedChunk(dir, e, bytes, times);
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
  const have = new Set((log.manifest?.chunks ?? []).map((c) => c.sha256));
  const wanted = m.chunks.filter((c) => c.last >= floor && (!options.live || c.last < end));
  const report: HistoryReport = { fetched: 0, refused: 0, listed: 0 };
  if (wanted.every((c) => have.has(c.sha256))) {
    report.listed = log.manifest?.chunks.length ?? 0;
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
  report.listed = log.manifest?.chunks.length ?? 0;
  return report;
}
