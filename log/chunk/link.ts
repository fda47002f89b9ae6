/**
 * One log's side of the chunk worker: it hands sealed segments over in offset
 * order, takes the manifests and archive reports back, deletes a segment once
 * a listed chunk holds its rows, and waits for the worker when asked.
 *
 * @module
 */

import { join } from "node:path";
import { type ChunkEntry, type Manifest, MANIFEST_FILE } from "./chunk.ts";
import { readManifest } from "./manifest_file.ts";
import { coveredBy } from "./adoption.ts";
import type { ArchiveState, ChunkPolicy, FromWorker } from "./protocol.ts";
import type { ArchiveStore } from "./archive.ts";
import { type ChunkPort, InlineChunkWorker, sharedChunkWorker } from "./client.ts";
import { REAL_IO } from "../disk/io.ts";
import { DEFAULT_CHUNK_POLICY, type ResolvedOptions } from "../options.ts";
import { nowUs, type Segment } from "../segment/state.ts";

/** The log a link serves. */
export interface LinkedLog {
  dir: string;
  name: string;
  streamId: string;
  /** The log's segments (shared: the link removes chunked ones). */
  segments: Segment[];
  /** Resolves once what was appended so far is committed. */
  flush(): Promise<void>;
  /**
   * The end of the rows shown (a replicated log's commit index): a sealed
   * segment is chunked only once all its rows are below it, so chunks hold
   * committed rows only and a cut of the uncommitted tail never meets one.
   */
  shownEnd(): number;
}

/**
 * The link between a log and the process's chunk worker.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../mod.ts";
 * // A log that keeps chunks talks to the worker through its link.
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { chunks: true, timers: false });
 * await log.append("{}");
 * await log.roll();
 * await log.chunks.settled();
 * equal(log.chunks.manifest?.chunks.length, 1);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class ChunkLink {
  readonly #log: LinkedLog;
  readonly #opts: ResolvedOptions;
  #policy: ChunkPolicy;
  #worker: ChunkPort | null = null;
  #manifest: Manifest | null = null;
  #workerError: string | null = null;
  #workerErrors = 0;
  // What said the worker's thread stopped (null: it runs): nothing asked of
  // it is answered after that, and whoever waits for an answer gets this.
  #stopped: FromWorker | null = null;
  #lastMaintain = 0;
  #syncId = 0;
  // Sealed segments are handed to the chunk worker in offset order, each once:
  // the first offset not handed over yet.
  #handedFrom = 0;
  #handing = false;
  #archiveState: ArchiveState | null = null;
  #retainedRows = 0;
  #archiveStore: ArchiveStore | null = null;
  #waiters: { test: (m: FromWorker) => boolean; resolve: (m: FromWorker) => void }[] = [];
  // Deletions of chunked segments under way (settled() waits for them).
  readonly #removing = new Set<Promise<void>>();

  /** A link for `log` (not started). */
  constructor(log: LinkedLog, opts: ResolvedOptions, policy: ChunkPolicy) {
    this.#log = log;
    this.#opts = opts;
    this.#policy = policy;
  }

  /** The manifest the worker reported last (null before the first). */
  get manifest(): Manifest | null {
    return this.#manifest;
  }

  /** How far the archive has got, as last reported. */
  get archiveState(): ArchiveState | null {
    return this.#archiveState;
  }

  /** The archive to replay from (when replay from the archive is on). */
  get archiveStore(): ArchiveStore | null {
    return this.#archiveStore;
  }

  /** Rows retention dropped since the log was opened. */
  get retainedRows(): number {
    return this.#retainedRows;
  }

  /** The last error the worker reported. */
  get error(): string | null {
    return this.#workerError;
  }

  /** Whether the worker's thread has stopped: nothing is chunked until the log is opened again. */
  get stopped(): boolean {
    return this.#stopped !== null;
  }

  /** The archive's URI, or null. */
  get archiveUri(): string | null {
    return this.#policy.archive?.uri ?? null;
  }

  /** Whether the link is started and not closed. */
  get running(): boolean {
    return this.#worker !== null;
  }

  /** Starts the link: the worker opens the log's chunks; sealed segments are handed over. */
  async start(): Promise<void> {
    const policy = this.#policy;
    const log = this.#log;
    if (policy.archive && this.#opts.replayArchive) {
      // Loaded only when needed: the S3 SDK is large.
      const { ArchiveStore } = await import("./archive.ts");
      this.#archiveStore = new ArchiveStore(policy.archive, log.name);
    }
    const io = this.#opts.io;
    const worker = io === REAL_IO ? sharedChunkWorker() : new InlineChunkWorker(io);
    this.#worker = worker;
    this.#lastMaintain = this.#opts.clock();
    worker.register(log.dir, (m) => this.#fromWorker(m));
    const first = this.#wait((m) => m.type === "manifest" || m.type === "error");
    worker.post({ type: "open", dir: log.dir, stream: log.name, streamId: log.streamId, policy });
    const m = await first;
    if (m.type === "error") throw new Error(`cannot open the chunks of ${log.dir}: ${m.message}`);
    if (policy.archive && this.#opts.replayArchive && !this.#archiveState) {
      // Serving from the archive needs to know what it holds: wait (bounded)
      // for its first report, so that the first subscribers are not refused.
      const reported = this.#wait((x) => x.type === "archive");
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([reported, new Promise((r) => (timer = setTimeout(r, 10_000)))]);
      clearTimeout(timer);
      if (!(this.#archiveState as ArchiveState | null)?.manifest) {
        this.#opts.logger.warn(
          "archive_not_answered",
          { dir: log.dir },
          `streamcast: the archive of ${log.dir} has not answered yet; serving local rows`,
        );
      }
    }
    // Sealed segments not yet chunked (or chunked but not yet deleted, after
    // a crash): hand them over again; the worker knows which is which.
    this.#handing = true;
    this.handOver();
  }

  /**
   * Hands every sealed segment not handed over yet to the chunk worker, oldest
   * first. Only once the worker has its manifest: until then a segment sealed
   * by the timer (the tail left by a crash, say) would reach the worker before
   * the older sealed segments, and chunks must be made in offset order.
   */
  handOver(): void {
    if (!this.#worker || !this.#handing) return;
    if (this.#policy.replica) {
      this.#dropCovered();
      return;
    }
    const shown = this.#log.shownEnd();
    for (const s of this.#log.segments) {
      const info = s.info;
      if (!info.sealed || info.firstOffset < this.#handedFrom) continue;
      if (info.firstOffset + info.count > shown) break; // chunks are made in offset order
      this.#handedFrom = info.firstOffset + info.count;
      this.#worker.post({
        type: "seal",
        dir: this.#log.dir,
        segment: { path: info.path, firstOffset: info.firstOffset, count: info.count },
        nowUs: nowUs(this.#opts.clock),
      });
    }
  }

  /** Asks for a maintenance round when one is due. */
  tick(): void {
    const now = this.#opts.clock();
    if (this.#worker && now - this.#lastMaintain >= this.#opts.maintainEveryMs) {
      this.#lastMaintain = now;
      this.#worker.post({ type: "maintain", dir: this.#log.dir, nowUs: nowUs(this.#opts.clock) });
    }
  }

  /** Changes how chunks are merged and retained. */
  setPolicy(policy: Partial<ChunkPolicy>): ChunkPolicy {
    this.#policy = { ...this.#policy, ...policy };
    this.#worker?.post({ type: "policy", dir: this.#log.dir, policy: this.#policy });
    return this.#policy;
  }

  /**
   * Resolves once the worker has done everything asked of it so far (with
   * `maintain`, a maintenance round now) and the log has taken the results
   * in, the segments now chunked deleted.
   */
  async settled(maintain = false): Promise<void> {
    if (!this.#worker) return;
    await this.#log.flush();
    const dir = this.#log.dir;
    if (maintain) {
      this.#worker.post({ type: "maintain", dir, nowUs: nowUs(this.#opts.clock) });
    }
    const id = ++this.#syncId;
    const done = this.#wait((m) => m.type === "synced" && m.id === id);
    this.#worker.post({ type: "sync", dir, id });
    await done;
    await Promise.all(this.#removing);
  }

  /** Resolves once the archive holds everything chunked so far (or after `ms`). */
  async archiveSettled(ms: number): Promise<boolean> {
    if (!this.#worker || !this.archiveUri) return true;
    await this.settled();
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      const a = this.#archiveState;
      const m = this.#manifest;
      if (a && m && a.lastError === null && a.through >= m.through) return true;
      await new Promise((r) => setTimeout(r, 20));
    }
    return false;
  }

  /** Lets the worker finish what it was asked for this log, then lets go of it. */
  async close(): Promise<void> {
    const worker = this.#worker;
    if (worker) {
      const closed = this.#wait((m) => m.type === "closed");
      worker.post({
        type: "close",
        dir: this.#log.dir,
        archiveWaitMs: this.archiveUri ? this.#opts.archiveWaitMs : 0,
      });
      await closed;
      worker.release(this.#log.dir);
      this.#worker = null;
    }
    await Promise.all(this.#removing);
    this.#archiveStore?.close();
  }

  // Replicas (mirrors) adopt the primary's chunks (see adoption.ts).

  /**
   * Lists `chunks` (their files checked and in place) in the manifest, in
   * place of the chunks they overlap; resolves once the worker has written
   * it and the covered sealed segments are deleted.
   */
  async adopt(chunks: ChunkEntry[]): Promise<void> {
    if (!this.#worker) throw new Deno.errors.BadResource(`log ${this.#log.dir} is closed`);
    const dir = this.#log.dir;
    if (this.#stopped) throw new Error(`cannot adopt chunks in ${dir}: ${this.#workerError}`);
    const before = this.#workerErrors;
    this.#worker.post({ type: "adopt", dir, chunks, nowUs: nowUs(this.#opts.clock) });
    const id = ++this.#syncId;
    const done = this.#wait((m) => m.type === "synced" && m.id === id);
    this.#worker.post({ type: "sync", dir, id });
    await done;
    if (this.#workerErrors !== before) {
      throw new Error(`cannot adopt chunks in ${dir}: ${this.#workerError}`);
    }
  }

  // A replica's sealed segments whose rows its (adopted) chunks hold are no
  // longer the copy: deleted, as a chunked segment is.
  #dropCovered(): void {
    const chunks = this.#manifest?.chunks ?? [];
    const segs = this.#log.segments;
    for (let i = segs.length - 1; i >= 0; i--) {
      const info = segs[i].info;
      if (!info.sealed) continue;
      if (
        info.count > 0 && !coveredBy(chunks, info.firstOffset, info.firstOffset + info.count - 1)
      ) {
        continue;
      }
      this.#fromWorker({
        type: "chunked",
        dir: this.#log.dir,
        segmentPath: info.path,
        sha256: null,
      });
    }
  }

  // The next message from the worker that passes `test` — or, once its
  // thread has stopped, the message that said so: a log whose worker is gone
  // still closes (and opens again, on a new thread).
  #wait(test: (m: FromWorker) => boolean): Promise<FromWorker> {
    if (this.#stopped) return Promise.resolve(this.#stopped);
    return new Promise((resolve) => this.#waiters.push({ test, resolve }));
  }

  #fromWorker(m: FromWorker): void {
    switch (m.type) {
      case "manifest":
        this.#manifest = m.manifest;
        if (this.#policy.replica && this.#handing) this.#dropCovered();
        break;
      case "chunked": {
        // The chunk is durable and listed: the segment is no longer the copy.
        const segs = this.#log.segments;
        const i = segs.findIndex((s) => s.info.path === m.segmentPath);
        if (i >= 0 && segs[i].info.sealed) {
          segs.splice(i, 1);
          const removed: Promise<void> = this.#opts.io.remove(m.segmentPath).catch((err) => {
            if (!(err instanceof Deno.errors.NotFound)) {
              this.#opts.logger.warn(
                "segment_delete_failed",
                { path: m.segmentPath, error: err },
                `streamcast: cannot delete ${m.segmentPath}: ${err}`,
              );
            }
          }).finally(() => this.#removing.delete(removed));
          this.#removing.add(removed);
        }
        break;
      }
      case "error":
        this.#workerError = m.message;
        this.#workerErrors++;
        this.#opts.logger.error(
          "chunk_worker_error",
          { dir: this.#log.dir, message: m.message },
          `streamcast: chunk worker: ${m.message}`,
        );
        if (m.stopped) {
          this.#stopped = m;
          const waiters = this.#waiters;
          this.#waiters = [];
          for (const w of waiters) w.resolve(m);
          return;
        }
        break;
      case "archive":
        this.#archiveState = m.state;
        break;
      case "retained":
        this.#retainedRows += m.rows;
        // At debug: at steady state every seal drops a chunk (the metric counts them).
        this.#opts.logger.debug(
          "retention_dropped",
          { dir: this.#log.dir, rows: m.rows, bytes: m.bytes },
          `streamcast: retention dropped the ${m.rows} oldest rows (${m.bytes} bytes of chunks) of ${this.#log.dir}`,
        );
        break;
      case "closed":
      case "synced":
        break;
    }
    const keep = [];
    for (const w of this.#waiters) {
      if (w.test(m)) w.resolve(m);
      else keep.push(w);
    }
    this.#waiters = keep;
  }
}

/**
 * The chunk link of a log being opened, started; null when the log keeps
 * no chunks. A log that already keeps chunks (it has a manifest) is read
 * through them whatever `opts` asked, unless `mayTurnOn` is false (the
 * caller said `chunks: false`): its history would otherwise look evicted.
 * A damaged manifest is named here, as `LogCorruptError`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * // Log.open starts its link here; a log without chunks has none.
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { timers: false });
 * equal(log.chunks.manifest, null);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function openChunkLink(
  log: LinkedLog,
  opts: ResolvedOptions,
  mayTurnOn: boolean,
): Promise<ChunkLink | null> {
  if (!opts.chunks && mayTurnOn) {
    const has = await Deno.stat(join(log.dir, MANIFEST_FILE)).then(() => true, () => false);
    if (has) opts.chunks = { ...DEFAULT_CHUNK_POLICY };
  }
  if (!opts.chunks) return null;
  await readManifest(log.dir);
  const link = new ChunkLink(log, opts, opts.chunks);
  await link.start();
  return link;
}
