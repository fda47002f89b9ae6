/**
 * The chunk worker: a Deno `Worker` that turns sealed segments into chunks,
 * keeps the manifest, merges small chunks, deletes replaced ones after a grace
 * period and applies retention — off the writer's thread. One worker serves
 * every log of a process; it talks to the logs only through the typed
 * messages of `chunk_protocol.ts` and holds no state shared with them.
 *
 * Every step is idempotent and resumes from what is on disk:
 * 1. a chunk file is written (temp file, fsync, rename, fsync dir);
 * 2. its time index (`chunk_times.ts`, the segment's append times) is
 *    written the same way;
 * 3. the manifest listing it is written the same way;
 * 4. the writer is told, and deletes the sealed segment.
 * A crash after 1 or 2 leaves an orphan chunk (and index), deleted on the
 * next open (or written again, byte for byte, when the segment is chunked
 * again); after 3, the segment is found already listed and deleted. A merge
 * keeps the same order (merged chunk, its index, manifest). An index goes
 * with its chunk: deleted beside it, and an orphan when its chunk is.
 *
 * @module
 */

/// <reference lib="deno.worker" />

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
import type {
  ArchiveState,
  ChunkPolicy,
  FromWorker,
  SealedSegment,
  ToWorker,
} from "./chunk_protocol.ts";
import type { ArchiveStore } from "./archive.ts";
import {
  type ChunkTimes,
  encodeTimes,
  mergeTimes,
  readChunkTimes,
  TimesBuilder,
  timesPath,
} from "./chunk_times.ts";
import { Layout } from "./format.ts";
import { PRODUCERS_FILE } from "./producer_journal.ts";
import { adoptedList } from "./adoption.ts";
import { backoffDelay } from "../common/backoff.ts";
import { exists, readManifest, syncDir, writeFileAtomic, writeManifest } from "./fs.ts";
import { readHeader, SegmentCursor, segmentStart } from "./segment_reader.ts";

interface LogState {
  dir: string;
  stream: string;
  manifest: Manifest;
  policy: ChunkPolicy;
  queue: Promise<void>;
  archive: Archiver | null;
}

// Uploads a log's chunks, then its manifest, retrying with backoff; runs
// beside the chunking queue so that a slow or absent store delays only the
// archive.
class Archiver {
  readonly st: LogState;
  store: ArchiveStore | null = null;
  uploaded: Set<string> | null = null;
  archived: Manifest | null = null;
  state: ArchiveState;
  #dirty = false;
  #running: Promise<void> | null = null;
  // Failed syncs in a row (0: not backing off).
  #failures = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #wakeSleep: (() => void) | null = null;
  closed = false;

  constructor(st: LogState) {
    this.st = st;
    this.state = {
      uri: st.policy.archive!.uri,
      through: 0,
      manifest: null,
      uploadedChunks: 0,
      uploadedBytes: 0,
      errors: 0,
      lastError: null,
      syncedUs: 0,
    };
  }

  /** Asks for a sync (coalesced). */
  kick(): void {
    this.#dirty = true;
    if (this.#wakeSleep && this.#failures === 0) this.#wakeSleep();
    this.#running ??= this.#loop().finally(() => (this.#running = null));
  }

  /** Resolves when nothing is left to upload (or after `ms`). */
  async idle(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (this.#running && Date.now() < deadline) {
      // Retry now rather than after the backoff: we are waiting on it.
      this.#failures = 0;
      this.#wakeSleep?.();
      await Promise.race([this.#running, new Promise((r) => setTimeout(r, 50))]);
    }
  }

  async #loop(): Promise<void> {
    while (this.#dirty && !this.closed) {
      this.#dirty = false;
      try {
        await this.#sync();
        this.#failures = 0;
      } catch (err) {
        const { s3ErrorMessage } = await import("./archive.ts");
        this.state.errors++;
        this.state.lastError = s3ErrorMessage(err);
        this.#post();
        this.#dirty = true;
        const delay = backoffDelay(++this.#failures, 250, 30_000);
        await new Promise<void>((r) => {
          this.#wakeSleep = r;
          this.#timer = setTimeout(r, delay);
        });
        clearTimeout(this.#timer);
        this.#wakeSleep = null;
      }
    }
  }

  async #sync(): Promise<void> {
    const st = this.st;
    if (!this.store) {
      const { ArchiveStore } = await import("./archive.ts");
      this.store = new ArchiveStore(st.policy.archive!, st.stream);
    }
    const store = this.store;
    if (!this.uploaded) {
      this.archived = await store.getManifest();
      if (this.archived && this.archived.stream_id !== st.manifest.stream_id) {
        throw new Error(
          `${store.uri} holds stream ${this.archived.stream_id}, not ${st.manifest.stream_id}`,
        );
      }
      this.uploaded = await store.listChunks();
    }
    const local = structuredClone(st.manifest);
    for (const c of local.chunks) {
      if (this.uploaded.has(c.sha256)) continue;
      let bytes: Uint8Array;
      try {
        bytes = await Deno.readFile(chunkPath(st.dir, c.sha256));
      } catch (err) {
        // Merged away since the snapshot: the next sync has the new list.
        if (err instanceof Deno.errors.NotFound) {
          this.#dirty = true;
          return;
        }
        throw err;
      }
      await store.putChunk(c.sha256, bytes);
      step("archive-chunk-put");
      this.uploaded.add(c.sha256);
      this.state.uploadedChunks++;
      this.state.uploadedBytes += bytes.length;
    }
    const { mergeManifests } = await import("./archive.ts");
    const merged = mergeManifests(this.archived, local);
    const same = this.archived && this.archived.through === merged.through &&
      JSON.stringify(this.archived.chunks) === JSON.stringify(merged.chunks);
    if (!same) {
      // The producer journal first (log/producers.ts): it then holds a record
      // for every producer commit the manifest's chunks hold, so a restore
      // keeps the producer table (restore.ts keeps the records it covers).
      const journal = await Deno.readFile(join(st.dir, PRODUCERS_FILE)).catch((err) => {
        if (err instanceof Deno.errors.NotFound) return null;
        throw err;
      });
      if (journal !== null) await store.putFile(PRODUCERS_FILE, journal);
      await store.putManifest(merged);
      this.archived = merged;
    }
    this.state.through = this.archived?.through ?? 0;
    this.state.manifest = this.archived;
    this.state.lastError = null;
    this.state.syncedUs = Date.now() * 1000;
    this.#post();
  }

  #post(): void {
    post({ type: "archive", dir: this.st.dir, state: structuredClone(this.state) });
  }

  close(): void {
    this.closed = true;
    this.#wakeSleep?.();
    this.store?.close();
  }
}

const logs = new Map<string, LogState>();

function post(msg: FromWorker): void {
  self.postMessage(msg);
}

// Test hook: STREAMCAST_CRASH_AT names a step at which the process is killed,
// so that crash recovery can be tested at every step for real.
const crashAt = (() => {
  try {
    return Deno.env.get("STREAMCAST_CRASH_AT") ?? "";
  } catch {
    return "";
  }
})();
function step(name: string): void {
  if (crashAt === name) Deno.kill(Deno.pid, "SIGKILL");
}

async function saveManifest(st: LogState): Promise<void> {
  st.manifest.generation++;
  const c = st.manifest.chunks;
  st.manifest.through = c.length ? c[c.length - 1].last : st.manifest.through;
  await writeManifest(st.dir, st.manifest);
  post({ type: "manifest", dir: st.dir, manifest: structuredClone(st.manifest) });
  st.archive?.kick();
}

async function loadManifest(dir: string, stream: string, streamId: string): Promise<Manifest> {
  const m = await readManifest(dir) ?? emptyManifest(stream, streamId);
  if (m.stream_id !== streamId) {
    throw new Error(`${join(dir, MANIFEST_FILE)}: stream id ${m.stream_id} is not the log's`);
  }
  return m;
}

async function load(st: LogState, stream: string, streamId: string): Promise<void> {
  const dir = st.dir;
  const manifest = await loadManifest(dir, stream, streamId);
  await Deno.mkdir(join(dir, CHUNKS_DIR), { recursive: true });
  // Chunks (and time indexes) neither listed nor retired are left by a crash
  // before their manifest was written: nothing refers to them.
  const known = new Set([
    ...manifest.chunks.map((c) => c.sha256),
    ...manifest.retired.map((r) => r.sha256),
  ]);
  for await (const e of Deno.readDir(join(dir, CHUNKS_DIR))) {
    const sha = /^([0-9a-f]{64})(?:\.ndjson\.zst|\.times)$/.exec(e.name)?.[1];
    if (!e.isFile || (sha && known.has(sha))) continue;
    await Deno.remove(join(dir, CHUNKS_DIR, e.name)).catch(() => {});
  }
  st.manifest = manifest;
  post({ type: "manifest", dir, manifest: structuredClone(manifest) });
  if (st.policy.archive) {
    st.archive = new Archiver(st);
    st.archive.kick();
  }
}

async function chunkSegment(st: LogState, seg: SealedSegment): Promise<void> {
  const m = st.manifest;
  const last = seg.firstOffset + seg.count - 1;
  if (seg.count === 0 || m.chunks.some((c) => c.first <= seg.firstOffset && c.last >= last)) {
    post({ type: "chunked", dir: st.dir, segmentPath: seg.path, sha256: null });
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
  if (!(await exists(path))) await writeFileAtomic(path, zipped);
  step("chunk-written");
  await writeTimes(st.dir, sha, times.runs());
  step("times-written");
  const entry: ChunkEntry = {
    first: seg.firstOffset,
    last,
    rows: seg.count,
    bytes: zipped.length,
    sha256: sha,
    first_ts: firstTs,
    last_ts: lastTs,
  };
  m.chunks.splice(at, 0, entry);
  await saveManifest(st);
  step("manifest-written");
  post({ type: "chunked", dir: st.dir, segmentPath: seg.path, sha256: sha });
}

// Writes chunk `sha`'s time index (atomically and durably), unless it is
// there already: a chunk made again is the same bytes, and so is its index.
async function writeTimes(dir: string, sha: string, runs: ChunkTimes | null): Promise<void> {
  if (runs === null || runs.offsets.length === 0) return;
  const path = timesPath(dir, sha);
  if (!(await exists(path))) await writeFileAtomic(path, encodeTimes(runs));
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

function sizeClass(bytes: number): number {
  return Math.floor(Math.log(Math.max(1, bytes / 65536)) / Math.log(4));
}

// Size-tiered merging: the oldest run of `fanIn` adjacent chunks of one size
// class becomes one chunk (decompressed and compressed again as one frame), up
// to `maxChunkBytes`. With a steady feed, the chunk count grows logarithmically.
async function compact(st: LogState, nowUs: number): Promise<void> {
  const { fanIn, maxChunkBytes, graceMs } = st.policy;
  // A replica's merges are the primary's, adopted like its other chunks.
  if (st.policy.replica) return;
  while (true) {
    const c = st.manifest.chunks;
    let at = -1;
    for (let i = 0; i + fanIn <= c.length; i++) {
      const cls = sizeClass(c[i].bytes);
      let total = 0;
      let same = true;
      for (let k = i; k < i + fanIn; k++) {
        total += c[k].bytes;
        if (sizeClass(c[k].bytes) !== cls) same = false;
      }
      if (same && total <= maxChunkBytes) {
        at = i;
        break;
      }
    }
    if (at < 0) return;
    const run = c.slice(at, at + fanIn);
    const tmp = join(st.dir, CHUNKS_DIR, `merge.tmp-${crypto.randomUUID().slice(0, 8)}`);
    const merged = await mergeChunkFiles(run.map((e) => chunkPath(st.dir, e.sha256)), tmp);
    const sha = merged.sha256;
    const path = chunkPath(st.dir, sha);
    if (await exists(path)) await Deno.remove(tmp);
    else {
      await Deno.rename(tmp, path);
      await syncDir(join(st.dir, CHUNKS_DIR));
    }
    step("merge-written");
    await writeTimes(st.dir, sha, await mergedTimes(st.dir, run));
    step("merge-times-written");
    const entry: ChunkEntry = {
      first: run[0].first,
      last: run[run.length - 1].last,
      rows: run.reduce((n, e) => n + e.rows, 0),
      bytes: merged.bytes,
      sha256: sha,
      first_ts: run[0].first_ts,
      last_ts: run[run.length - 1].last_ts,
    };
    c.splice(at, fanIn, entry);
    const until = nowUs + graceMs * 1000;
    for (const e of run) {
      st.manifest.retired.push({ sha256: e.sha256, bytes: e.bytes, until_us: until });
    }
    await saveManifest(st);
    step("merge-manifest-written");
  }
}

async function retain(st: LogState, nowUs: number): Promise<void> {
  const { retainBytes, retainAgeMs } = st.policy;
  const c = st.manifest.chunks;
  let total = c.reduce((n, e) => n + e.bytes, 0);
  const drop: ChunkEntry[] = [];
  while (c.length > 0) {
    const old = retainAgeMs !== null && c[0].last_ts < nowUs - retainAgeMs * 1000;
    const big = retainBytes !== null && total > retainBytes;
    if (!old && !big) break;
    // Never drop the only copy: with an archive, a chunk goes once uploaded.
    if (st.archive && !st.archive.uploaded?.has(c[0].sha256)) break;
    total -= c[0].bytes;
    drop.push(c.shift()!);
  }
  // Retired (merged-away) chunks past their grace period.
  const keep = st.manifest.retired.filter((r) => r.until_us > nowUs);
  const expired = st.manifest.retired.filter((r) => r.until_us <= nowUs);
  if (drop.length === 0 && expired.length === 0) return;
  st.manifest.retired = keep;
  await saveManifest(st);
  step("retain-manifest-written");
  const listed = new Set(c.map((e) => e.sha256));
  for (const e of [...drop, ...expired]) {
    if (listed.has(e.sha256)) continue; // a merge reproduced the same bytes
    for (const path of [chunkPath(st.dir, e.sha256), timesPath(st.dir, e.sha256)]) {
      await Deno.remove(path).catch((err) => {
        if (!(err instanceof Deno.errors.NotFound)) throw err;
      });
    }
  }
}

// Replicas (followers) adopt the primary's chunks (see adoption.ts).

async function adopt(st: LogState, incoming: ChunkEntry[], nowUs: number): Promise<void> {
  for (const e of incoming) {
    if (!(await exists(chunkPath(st.dir, e.sha256)))) {
      throw new Error(`chunk ${e.sha256} to adopt is not in ${join(st.dir, CHUNKS_DIR)}`);
    }
  }
  const { chunks, removed } = adoptedList(st.manifest.chunks, incoming);
  const same = removed.length === 0 && chunks.length === st.manifest.chunks.length;
  if (!same) {
    st.manifest.chunks = chunks;
    const until = nowUs + st.policy.graceMs * 1000;
    for (const e of removed) {
      st.manifest.retired.push({ sha256: e.sha256, bytes: e.bytes, until_us: until });
    }
    // saveManifest, with the crash hook between the write and the report that
    // lets the log delete the covered segments.
    st.manifest.generation++;
    st.manifest.through = chunks.length ? chunks[chunks.length - 1].last : st.manifest.through;
    await writeManifest(st.dir, st.manifest);
    step("adopt-manifest-written");
    post({ type: "manifest", dir: st.dir, manifest: structuredClone(st.manifest) });
  }
  await retain(st, nowUs);
}

function enqueue(dir: string, work: (st: LogState) => Promise<void>): void {
  const st = logs.get(dir);
  if (!st) {
    post({ type: "error", dir, message: `log ${dir} is not open in the chunk worker` });
    return;
  }
  st.queue = st.queue.then(() => work(st)).catch((err) => {
    post({ type: "error", dir, message: err instanceof Error ? err.message : String(err) });
  });
}

self.onmessage = (e: MessageEvent<ToWorker>) => {
  const msg = e.data;
  switch (msg.type) {
    case "open": {
      // Registered at once, so that messages sent right after "open" queue
      // behind the loading of the manifest.
      const st: LogState = {
        dir: msg.dir,
        stream: msg.stream,
        manifest: emptyManifest(msg.stream, msg.streamId),
        policy: msg.policy,
        queue: Promise.resolve(),
        archive: null,
      };
      logs.set(msg.dir, st);
      enqueue(msg.dir, (s) => load(s, msg.stream, msg.streamId));
      break;
    }
    case "seal":
      enqueue(msg.dir, async (st) => {
        await chunkSegment(st, msg.segment);
        await compact(st, msg.nowUs);
        await retain(st, msg.nowUs);
      });
      break;
    case "maintain":
      enqueue(msg.dir, async (st) => {
        await compact(st, msg.nowUs);
        await retain(st, msg.nowUs);
        st.archive?.kick();
      });
      break;
    case "policy":
      enqueue(msg.dir, (st) => {
        st.policy = msg.policy;
        st.archive?.kick();
        return Promise.resolve();
      });
      break;
    case "adopt":
      enqueue(msg.dir, (st) => adopt(st, msg.chunks, msg.nowUs));
      break;
    case "sync":
      enqueue(msg.dir, (st) => {
        post({ type: "synced", dir: st.dir, id: msg.id });
        return Promise.resolve();
      });
      break;
    case "close":
      if (!logs.has(msg.dir)) {
        post({ type: "closed", dir: msg.dir });
        break;
      }
      enqueue(msg.dir, async (st) => {
        if (st.archive) {
          // A planned stop ships what it can (bounded), then lets go.
          await st.archive.idle(msg.archiveWaitMs ?? 0);
          st.archive.close();
        }
        logs.delete(st.dir);
        post({ type: "closed", dir: st.dir });
      });
      break;
  }
};
