/**
 * The chunk worker's steps for one log, run by `host.ts` (in the
 * process's `Worker`, or on the log's thread with an I/O seam for tests).
 * Every change on disk goes through the log's {@linkcode LogIo}.
 *
 * Every step is idempotent and resumes from what is on disk:
 * 1. a chunk file is written (temp file, fsync, rename, fsync dir);
 * 2. its time index (`times.ts`, the segment's append times) is
 *    written the same way;
 * 3. the manifest listing it is written the same way;
 * 4. the writer is told, and deletes the sealed segment.
 * A crash after 1 or 2 leaves an orphan chunk (and index), deleted on the
 * next open (or written again, byte for byte, when the segment is chunked
 * again); after 3, the segment is found already listed and deleted. A merge
 * keeps the same order (merged chunk, its index, manifest). An index goes
 * with its chunk: deleted beside it, and an orphan when its chunk is.
 * Retention writes the manifest first, then deletes the files it dropped.
 *
 * Segments are chunked in offset order, none skipped: one whose step fails
 * (a full disk) is tried again before any later one (`host.ts`), or a
 * later chunk listed past it could be merged across its offsets and it then
 * be taken for listed and deleted. A change to the manifest takes effect
 * in the worker only once written: a failed write leaves the one on disk in
 * force.
 *
 * @module
 */

import { join } from "node:path";
import {
  type ChunkEntry,
  chunkPath,
  CHUNKS_DIR,
  compress,
  emptyManifest,
  LineWriter,
  type Manifest,
  MANIFEST_FILE,
  mergeChunkFiles,
  sha256Hex,
} from "./chunk.ts";
import type { ChunkPolicy, FromWorker, SealedSegment } from "./protocol.ts";
import {
  type ChunkTimes,
  encodeTimes,
  mergeTimes,
  readChunkTimes,
  TimesBuilder,
  timesPath,
} from "./times.ts";
import { Layout } from "../segment/format.ts";
import { adoptedList } from "./adoption.ts";
import { exists, writeFileAtomic } from "../disk/fs.ts";
import { readManifest, writeManifest } from "./manifest_file.ts";
import type { LogIo } from "../disk/io.ts";
import { readHeader, SegmentCursor, segmentStart } from "../segment/reader.ts";
import { crashStep } from "./crash_hook.ts";
import { planMerge } from "./merge_plan.ts";

/**
 * What the worker keeps of one log.
 */
export interface ChunkLogState {
  /** The log folder. */
  dir: string;
  /** The stream name. */
  stream: string;
  /** The manifest as last written. */
  manifest: Manifest;
  /** How chunks are merged and retained. */
  policy: ChunkPolicy;
  /** Where every change on disk goes. */
  io: LogIo;
  /** Sends a message to the log. */
  post(msg: FromWorker): void;
  /** The log's archiver, when it has an archive. */
  archive: {
    /** Asks it to upload what changed. */
    kick(): void;
    /** Chunks the archive holds (null: not listed yet). */
    readonly uploaded: Set<string> | null;
    /** The archive's manifest as last read or written (null: none yet). */
    readonly archived: Manifest | null;
  } | null;
}

// Writes `next` (a changed copy of the manifest) as the next generation, and
// only once it is written makes it the worker's manifest: a write that fails
// leaves the one on disk in force, so that nothing is taken for listed (and
// its segment deleted) before a manifest lists it. `step` names the crash
// hook between the write and the report.
async function saveManifest(st: ChunkLogState, next: Manifest, step?: string): Promise<void> {
  next.generation = st.manifest.generation + 1;
  const c = next.chunks;
  next.through = c.length ? c[c.length - 1].last : st.manifest.through;
  await writeManifest(st.dir, next, st.io);
  if (step !== undefined) crashStep(step);
  st.manifest = next;
  st.post({ type: "manifest", dir: st.dir, manifest: structuredClone(next) });
  st.archive?.kick();
}

async function loadManifest(dir: string, stream: string, streamId: string): Promise<Manifest> {
  const m = await readManifest(dir) ?? emptyManifest(stream, streamId);
  if (m.stream_id !== streamId) {
    throw new Error(`${join(dir, MANIFEST_FILE)}: stream id ${m.stream_id} is not the log's`);
  }
  return m;
}

/**
 * Opens a log's chunks: reads its manifest (or starts an empty one) and
 * deletes chunk files and time indexes it neither lists nor retires.
 */
export async function loadChunks(st: ChunkLogState, streamId: string): Promise<void> {
  const dir = st.dir;
  const manifest = await loadManifest(dir, st.stream, streamId);
  await st.io.mkdir(join(dir, CHUNKS_DIR));
  // Chunks (and time indexes) neither listed nor retired are left by a crash
  // before their manifest was written: nothing refers to them.
  const known = new Set([
    ...manifest.chunks.map((c) => c.sha256),
    ...manifest.retired.map((r) => r.sha256),
  ]);
  for await (const e of Deno.readDir(join(dir, CHUNKS_DIR))) {
    const sha = /^([0-9a-f]{64})(?:\.ndjson\.zst|\.times)$/.exec(e.name)?.[1];
    if (!e.isFile || (sha && known.has(sha))) continue;
    await st.io.remove(join(dir, CHUNKS_DIR, e.name)).catch(() => {});
  }
  st.manifest = manifest;
  st.post({ type: "manifest", dir, manifest: structuredClone(manifest) });
}

/**
 * Turns the sealed segment `seg` into a chunk, its time index and a manifest
 * entry, in that order (see the module doc); tells the log once listed.
 */
export async function chunkSegment(st: ChunkLogState, seg: SealedSegment): Promise<void> {
  const m = st.manifest;
  const last = seg.firstOffset + seg.count - 1;
  if (seg.count === 0 || m.chunks.some((c) => c.first <= seg.firstOffset && c.last >= last)) {
    st.post({ type: "chunked", dir: st.dir, segmentPath: seg.path, sha256: null });
    return;
  }
  // A replica's chunks are the primary's (adopted): it makes none of its own.
  if (st.policy.replica) return;
  // Where the chunk goes: after the last chunk, or (a segment left behind by
  // an older version that chunked out of order) into the gap it fills.
  let at = m.chunks.length;
  if (m.through >= seg.firstOffset) {
    at = m.chunks.findIndex((c) => c.first > last);
    const before = at < 0 ? m.chunks.at(-1) : m.chunks[at - 1];
    if (at < 0 || (before && before.last >= seg.firstOffset)) {
      throw new Error(
        `segment ${seg.path} (${seg.firstOffset}..${last}) overlaps the chunks of the manifest`,
      );
    }
  }
  const file = await Deno.open(seg.path, { read: true });
  const lines = new LineWriter();
  const times = new TimesBuilder();
  let firstTs = 0;
  let lastTs = 0;
  try {
    const header = await readHeader(file, seg.path);
    const size = (await file.stat()).size;
    const cursor = new SegmentCursor(
      file,
      seg.path,
      new Layout(header.beaconInterval),
      segmentStart(header),
      {
        maxPayloadBytes: 0xffff_ff00,
        blockBytes: 4 << 20,
      },
    );
    while (!cursor.endMark) {
      const b = await cursor.read(size);
      if (b.count === 0) break;
      if (firstTs === 0) firstTs = b.times[0];
      lastTs = b.times[b.count - 1];
      lines.addBatch(b);
      times.addBatch(b);
    }
    if (!cursor.endMark) throw new Error(`segment ${seg.path} is not sealed`);
    if (cursor.nextOffset - 1 !== last) {
      throw new Error(`segment ${seg.path} ends at ${cursor.nextOffset - 1}, expected ${last}`);
    }
  } finally {
    file.close();
  }
  const zipped = compress(lines.bytes());
  const sha = sha256Hex(zipped);
  const path = chunkPath(st.dir, sha);
  if (!(await exists(path))) await writeFileAtomic(path, zipped, st.io);
  crashStep("chunk-written");
  await writeTimes(st, sha, times.runs());
  crashStep("times-written");
  const entry: ChunkEntry = {
    first: seg.firstOffset,
    last,
    rows: seg.count,
    bytes: zipped.length,
    sha256: sha,
    first_ts: firstTs,
    last_ts: lastTs,
  };
  const next = structuredClone(m);
  next.chunks.splice(at, 0, entry);
  await saveManifest(st, next);
  crashStep("manifest-written");
  st.post({ type: "chunked", dir: st.dir, segmentPath: seg.path, sha256: sha });
}

// Writes chunk `sha`'s time index (atomically and durably), unless it is
// there already: a chunk made again is the same bytes, and so is its index.
async function writeTimes(
  st: ChunkLogState,
  sha: string,
  runs: ChunkTimes | null,
): Promise<void> {
  if (runs === null || runs.offsets.length === 0) return;
  const path = timesPath(st.dir, sha);
  if (!(await exists(path))) await writeFileAtomic(path, encodeTimes(runs), st.io);
}

// The merged chunk's index from its sources': none when a source has none
// (an older chunk, one restored from the archive) or a damaged one.
async function mergedTimes(dir: string, run: ChunkEntry[]): Promise<ChunkTimes | null> {
  const parts: ChunkTimes[] = [];
  for (const e of run) {
    const t = await readChunkTimes(dir, e).catch(() => null);
    if (t === null) return null;
    parts.push(t);
  }
  return mergeTimes(parts);
}

// Until when chunk `e`, replaced now (by a merge, or by adopted chunks), stays
// on disk for readers part way through an older manifest: the grace period,
// but no longer than retention by age would have kept its rows (their copy
// in the chunk that replaced it goes then, and a reader below it is refused
// anyway) — else, with a short `retainAgeMs`, the replaced chunks would hold
// far more history than the bound.
function retiredUntilUs(policy: ChunkPolicy, e: ChunkEntry, nowUs: number): number {
  const grace = nowUs + policy.graceMs * 1000;
  if (policy.retainAgeMs === null) return grace;
  return Math.min(grace, Math.max(nowUs, e.last_ts + policy.retainAgeMs * 1000));
}

// Merges chunks as `merge_plan.ts` plans, one run at a time, until none is
// left to merge: each run becomes one chunk (decompressed and compressed
// again as one frame), and the chunks it replaces are retired.
/** Merges chunks by the size-tiered rule of the log's policy (`merge_plan.ts`). */
export async function compactChunks(st: ChunkLogState, nowUs: number): Promise<void> {
  const { fanIn } = st.policy;
  // A replica's merges are the primary's, adopted like its other chunks.
  if (st.policy.replica) return;
  while (true) {
    const c = st.manifest.chunks;
    const at = planMerge(c, st.policy);
    if (at < 0) return;
    const run = c.slice(at, at + fanIn);
    const tmp = join(st.dir, CHUNKS_DIR, `merge.tmp-${crypto.randomUUID().slice(0, 8)}`);
    let merged: { sha256: string; bytes: number };
    try {
      merged = await mergeChunkFiles(run.map((e) => chunkPath(st.dir, e.sha256)), tmp, st.io);
    } catch (err) {
      // A full disk, say: what was written of it would only keep the disk full.
      await st.io.remove(tmp).catch(() => {});
      throw err;
    }
    const sha = merged.sha256;
    const path = chunkPath(st.dir, sha);
    if (await exists(path)) await st.io.remove(tmp);
    else {
      await st.io.rename(tmp, path);
      await st.io.syncDir(join(st.dir, CHUNKS_DIR));
    }
    crashStep("merge-written");
    await writeTimes(st, sha, await mergedTimes(st.dir, run));
    crashStep("merge-times-written");
    const entry: ChunkEntry = {
      first: run[0].first,
      last: run[run.length - 1].last,
      rows: run.reduce((n, e) => n + e.rows, 0),
      bytes: merged.bytes,
      sha256: sha,
      first_ts: run[0].first_ts,
      last_ts: run[run.length - 1].last_ts,
    };
    const next = structuredClone(st.manifest);
    next.chunks.splice(at, fanIn, entry);
    for (const e of run) {
      next.retired.push({
        sha256: e.sha256,
        bytes: e.bytes,
        until_us: retiredUntilUs(st.policy, e, nowUs),
      });
    }
    await saveManifest(st, next);
    crashStep("merge-manifest-written");
  }
}

/**
 * Whether the rows of `entry` are in the archive `a`: its chunk was uploaded
 * (by this log), or the archive's manifest lists chunks that cover every
 * one of its offsets (uploaded by another writer: a cluster's leader, whose
 * chunks are cut elsewhere, or a mirror's primary).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { inArchive } from "./steps.ts";
 * const c = (first: number, last: number, sha256 = "ab") =>
 *   ({ first, last, rows: last - first + 1, bytes: 1, sha256, first_ts: 0, last_ts: 0 });
 * const archived = { stream: "t", stream_id: "0".repeat(32), generation: 1, through: 80,
 *   chunks: [c(1, 50), c(51, 80)], retired: [] };
 * const a = { uploaded: new Set<string>(), archived };
 * equal(inArchive(a, c(40, 70, "cd")), true);
 * equal(inArchive(a, c(70, 90, "cd")), false);
 * ```
 */
export function inArchive(
  a: { readonly uploaded: Set<string> | null; readonly archived: Manifest | null },
  entry: ChunkEntry,
): boolean {
  if (a.uploaded?.has(entry.sha256)) return true;
  let next = entry.first;
  for (const c of a.archived?.chunks ?? []) {
    if (c.last < next) continue;
    if (c.first > next) return false;
    next = c.last + 1;
    if (next > entry.last) return true;
  }
  return false;
}

/**
 * Applies retention (the oldest chunks past the policy's bytes or age; with
 * an archive, only chunks whose rows it holds: {@linkcode inArchive}) and
 * deletes retired chunks past their grace period: the manifest first, then
 * the files. Tells the log what it dropped.
 */
export async function retainChunks(st: ChunkLogState, nowUs: number): Promise<void> {
  const { retainBytes, retainAgeMs } = st.policy;
  const next = structuredClone(st.manifest);
  const c = next.chunks;
  let total = c.reduce((n, e) => n + e.bytes, 0);
  const drop: ChunkEntry[] = [];
  while (c.length > 0) {
    const old = retainAgeMs !== null && c[0].last_ts < nowUs - retainAgeMs * 1000;
    const big = retainBytes !== null && total > retainBytes;
    if (!old && !big) break;
    // Never drop the only copy: with an archive, a chunk goes once archived.
    if (st.archive && !inArchive(st.archive, c[0])) break;
    total -= c[0].bytes;
    drop.push(c.shift()!);
  }
  // Retired (merged-away) chunks past their grace period.
  const keep = next.retired.filter((r) => r.until_us > nowUs);
  const expired = next.retired.filter((r) => r.until_us <= nowUs);
  if (drop.length === 0 && expired.length === 0) return;
  next.retired = keep;
  await saveManifest(st, next);
  crashStep("retain-manifest-written");
  if (drop.length > 0) {
    st.post({
      type: "retained",
      dir: st.dir,
      rows: drop.reduce((n, e) => n + e.rows, 0),
      bytes: drop.reduce((n, e) => n + e.bytes, 0),
    });
  }
  const listed = new Set(c.map((e) => e.sha256));
  for (const e of [...drop, ...expired]) {
    if (listed.has(e.sha256)) continue; // a merge reproduced the same bytes
    for (const path of [chunkPath(st.dir, e.sha256), timesPath(st.dir, e.sha256)]) {
      await st.io.remove(path).catch((err) => {
        if (!(err instanceof Deno.errors.NotFound)) throw err;
      });
    }
  }
}

/**
 * Lists a replica's adopted chunks `incoming` (in place, checked) in its
 * manifest in place of those they overlap, then applies retention.
 */
export async function adoptChunks(
  st: ChunkLogState,
  incoming: ChunkEntry[],
  nowUs: number,
): Promise<void> {
  for (const e of incoming) {
    if (!(await exists(chunkPath(st.dir, e.sha256)))) {
      throw new Error(`chunk ${e.sha256} to adopt is not in ${join(st.dir, CHUNKS_DIR)}`);
    }
  }
  const { chunks, removed } = adoptedList(st.manifest.chunks, incoming);
  const same = removed.length === 0 && chunks.length === st.manifest.chunks.length;
  if (!same) {
    const next = structuredClone(st.manifest);
    next.chunks = chunks;
    for (const e of removed) {
      next.retired.push({
        sha256: e.sha256,
        bytes: e.bytes,
        until_us: retiredUntilUs(st.policy, e, nowUs),
      });
    }
    // The crash hook between the write and the report that lets the log
    // delete the covered segments.
    await saveManifest(st, next, "adopt-manifest-written");
  }
  await retainChunks(st, nowUs);
}
