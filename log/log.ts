/**
 * The durable, segmented, append-only log of one stream: the façade over its
 * parts — options (`options.ts`), recovery on open (`recovery.ts`), group
 * commit (`committer.ts`), the tier lookup (`read/tier_lookup.ts`), fencing
 * (`fence.ts`) and the link to the chunk worker (`chunk/link.ts`). Appends,
 * reads and the log's ends are members of its own; what only some owners ask
 * about is one object per role: `chunks` and `archive` (`chunk/log_chunks.ts`),
 * `producers` (`producer/log_producers.ts`) and `replication`.
 *
 * Invariants this module keeps:
 * - offsets start at 1 (or at a fence) and only increase; within a segment they
 *   are contiguous;
 * - `append` assigns offsets synchronously in call order; one committer writes
 *   everything pending with one write and one `syncData`, then advances the
 *   durable end, tells its listener, and resolves the callers — never before;
 * - only the last segment may be unsealed or end in a torn record; opening
 *   truncates such a tail and refuses any other damage, naming file and byte;
 * - one writer per log on a host: a lock file held with `flock`.
 *
 * @module
 */

import { type CursorStart, seekStart, segmentStart } from "./segment/reader.ts";
import { claimLogFolder, LOCK_FILE, type WriterLock } from "./disk/writer_lock.ts";
import { readManifest } from "./chunk/manifest_file.ts";
import { META_FILE } from "./log_meta.ts";
import { type Located, LogReader, type ReaderSource } from "./read/log_reader.ts";
import { type ChunkEntry, chunkPath } from "./chunk/chunk.ts";
import { appendAt } from "./replica/append_at.ts";
import { LogArchive, LogChunks } from "./chunk/log_chunks.ts";
import { type LogIo, type LogOptions, type ResolvedOptions, resolveOptions } from "./options.ts";
import type { Logger } from "../common/logger.ts";
import { Committer, type ProducerTag } from "./committer.ts";
import type { ProducerJournal, ProducerRecord } from "./producer/journal.ts";
import type { ProducerState, ProducerTable, PublishResult } from "./producer/table.ts";
import { LogProducers } from "./producer/log_producers.ts";
import { type Recovered, recoverWithProducers } from "./producer/recovery.ts";
import { type ChunkLink, openChunkLink } from "./chunk/link.ts";
import type { LogListener } from "./log_listener.ts";
import { Replication } from "./replica/replication.ts";
import { cutOpenLog } from "./replica/truncate.ts";
import { fenceSegment } from "./fence.ts";
import type { Segment, SegmentInfo } from "./segment/state.ts";
import { earliestOffset, locateOffset, rowsBetween, type Tiers } from "./read/tier_lookup.ts";
import { type LookupStats, offsetAtTime, type TimeLookup } from "./read/time_seek.ts";

export { META_FILE };
export type { SegmentInfo };
export type { LookupStats, TimeLookup };
export type { ProducerState, ProducerTag, PublishResult };
export {
  DEFAULT_CHUNK_POLICY,
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_SEAL_EVERY_MS,
  DEFAULT_SEGMENT_BYTES,
  type LogIo,
  type LogOptions,
} from "./options.ts";

export { LOCK_FILE };

/**
 * A stream's durable log: a folder of segment files, appended with group
 * commit and read by any number of {@linkcode LogReader}s.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "./log.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(`${dir}/trades`);
 * const offset = await log.append(new TextEncoder().encode('{"price":1}'));
 * equal(offset, 1);
 * equal(log.endOffset, 2);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class Log {
  /** The log folder. */
  readonly dir: string;
  /** The stream name kept in the headers. */
  readonly name: string;
  /** The stream id: 32 hex characters, for the whole life of the log. */
  readonly streamId: string;
  /** The first offset this log was created with: what `offset=0` asks for. */
  readonly firstOffset: number;
  /** Its chunks: how far they reach, the manifest, the chunk worker (see `chunk/log_chunks.ts`). */
  readonly chunks: LogChunks;
  /** Its archive in S3: how far it has got (see `chunk/log_chunks.ts`). */
  readonly archive: LogArchive;
  /** Its producers: what each last committed (see `producer/log_producers.ts`). */
  readonly producers: LogProducers;
  readonly #opts: ResolvedOptions;
  readonly #lock: WriterLock;
  readonly #segments: Segment[];
  readonly #committer: Committer;
  #link: ChunkLink | null = null;
  #closed = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  #readers = new Set<LogReader>();
  readonly #source: ReaderSource;
  // Both replaced when a replicated log's tail is cut in place.
  readonly #p: { table: ProducerTable; journal: ProducerJournal };
  #listener: LogListener | null = null;
  #rep: Replication | null = null;
  #cutting: Promise<void> | null = null;
  // Producer records a failed write put back that are not in the journal yet.
  #owed: ProducerRecord[] = [];

  private constructor(
    dir: string,
    recovered: Recovered,
    opts: ResolvedOptions,
    lock: WriterLock,
    producers: { table: ProducerTable; journal: ProducerJournal },
  ) {
    const { meta, segments, active } = recovered;
    this.dir = dir;
    this.name = meta.name;
    this.streamId = meta.stream_id;
    this.firstOffset = meta.first_offset ?? 1;
    this.#opts = opts;
    this.#lock = lock;
    this.#segments = segments;
    this.#p = producers;
    this.chunks = new LogChunks(dir, opts, () => this.#link);
    this.archive = new LogArchive(opts, () => this.#link);
    // A replicated log: settled once committed in the cluster too.
    this.producers = new LogProducers(producers, async (settled, end) => {
      await (this.#rep ? this.#rep.committed(settled, end) : settled);
    });
    this.#committer = new Committer(this, opts, segments, active, {
      committed: (first, end, tags, runs) => {
        if (tags !== null) this.#p.table.committed(tags);
        const rep = this.#rep;
        if (rep === null) return this.#listener?.committed?.(first, end);
        if (tags !== null) rep.recorded(tags);
        if (runs !== null) rep.onDurable?.({ first, end, runs, records: tags ? [...tags] : [] });
        rep.durable(end); // shown (the listener's committed) once committed too
      },
      // A replicated log's commit, taken and not yet written: the leader
      // ships it now, so that its followers write and sync while it does.
      taken: (first, end, tags, runs) => {
        const hand = this.#rep?.onTaken;
        if (!hand) return false;
        hand({ first, end, runs, records: tags ? [...tags] : [] });
        return true;
      },
      wake: () => {
        for (const r of this.#readers) r._wake();
      },
      sealed: () => {
        this.#link?.handOver();
        this.#listener?.sealed?.();
      },
      discarded: (from, cause) => {
        this.#rollBackProducers(from);
        this.#listener?.discarded?.(from, cause);
        const failed = this.#committer.failed;
        if (failed !== null && this.#rep) this.#rep.onStopped?.(failed);
      },
      // A commit with producer records writes and syncs them first; one
      // without waits only while the journal is being put back after a
      // failure. A replicated log's commit writes them, and its mark
      // (`through`), beside its rows.
      journalWrite: (tags, through) =>
        tags !== null || through !== null || this.#owed.length > 0 || this.#p.journal.busy
          ? this.#journalFirst(tags, through)
          : null,
      // A stream's paced fan-out.
      writeGate: () => this.#listener?.beforeCommit?.() ?? null,
    });
    const end = () => this.endOffset;
    this.#source = {
      get endOffset() {
        return end();
      },
      maxPayloadBytes: opts.maxPayloadBytes,
      locate: (offset) => this.#locate(offset),
      seek: (seg, file, offset) => this.#seek(seg, file, offset),
      cutting: () => this.#cutting,
    };
    if (opts.timers && (opts.sealEveryMs > 0 || opts.chunks)) {
      const every = Math.min(1000, (opts.sealEveryMs || 4000) / 4);
      const timer = setInterval(() => this.tick(), every);
      Deno.unrefTimer(timer);
      this.#timer = timer;
    }
  }

  /** Sets the log's one listener (see `log_listener.ts`); a second call throws `TypeError`. */
  listen(listener: LogListener): void {
    if (this.#listener !== null) throw new TypeError(`log ${this.dir} has a listener already`);
    this.#listener = listener;
  }

  /**
   * Opens the log in `dir`, creating it if it does not exist (unless
   * `create: false`), recovering a torn tail, and taking the writer's lock.
   *
   * @throws {LogLockedError} when another writer holds the log.
   * @throws {LogCorruptError} on damage other than a torn tail.
   */
  static async open(dir: string, options: LogOptions = {}): Promise<Log> {
    const opts = resolveOptions(options);
    const lock = await claimLogFolder(dir, options.create ?? true);
    try {
      const [recovered, producers] = await recoverWithProducers(dir, options, opts);
      const log = new Log(dir, recovered, opts, lock, producers);
      if (options.replicated) await log.#replicate(options);
      // Rows already chunked (their segments deleted) still set the floor of
      // the next append time.
      const kept = await readManifest(dir).catch(() => null);
      log.#committer.seedTime(kept?.chunks.at(-1)?.last_ts ?? 0);
      try {
        log.#link = await openChunkLink(
          {
            dir,
            name: log.name,
            streamId: log.streamId,
            segments: log.#segments,
            flush: () => log.flush(),
            shownEnd: () => log.endOffset,
          },
          opts,
          options.chunks !== false,
        );
      } catch (err) {
        await log.close();
        throw err;
      }
      return log;
    } catch (err) {
      lock.close(); // the log may have closed it already: a second close does nothing
      throw err;
    }
  }

  /**
   * The durable end: the next offset to be made durable (exclusive end). In
   * a replicated log, the end of the rows committed in the cluster (and
   * durable here): what readers and the fan-out see.
   */
  get endOffset(): number {
    return this.#rep?.gate.end ?? this.#committer.end;
  }

  /** A replicated log's side of the cluster (`replicated: true`), else null. */
  get replication(): Replication | null {
    return this.#rep;
  }

  /** The next offset `append` will assign. */
  get nextOffset(): number {
    return this.#committer.next;
  }

  /** Duration of the last commit's write + sync, ms (for metrics). */
  get lastCommitMs(): number {
    return this.#committer.lastCommitMs;
  }

  // What the tier lookup is given: the segments, the chunks, the archive.
  #tiers(): Tiers {
    const archived = this.#opts.replayArchive && this.#link?.archiveStore
      ? this.#link.archiveState?.manifest?.chunks ?? []
      : [];
    return {
      // SegmentInfo carries firstOffset, count, sealed and lastTimeUs.
      segments: this.#segments.map((s) => s.info),
      chunks: this.#link?.manifest?.chunks ?? [],
      archived,
      end: this.#committer.end,
    };
  }

  /** The earliest offset the log holds, or `null` when it holds no row. */
  get earliest(): number | null {
    return earliestOffset(this.#tiers());
  }

  /** Whether commits are synced to disk before they are acknowledged. */
  get fsync(): boolean {
    return this.#opts.fsync;
  }

  /** The largest payload accepted. */
  get maxPayloadBytes(): number {
    return this.#opts.maxPayloadBytes;
  }

  /** The I/O seam its changes on disk go through (the `io` option): an owner's files in its folder use it too. */
  get io(): LogIo {
    return this.#opts.io;
  }

  /** Where it reports what it cannot tell a caller (the `logger` option). */
  get logger(): Logger {
    return this.#opts.logger;
  }

  /** The segments, oldest first (a snapshot). */
  segments(): SegmentInfo[] {
    return this.#segments.map((s) => ({ ...s.info }));
  }

  /** Rows the log holds in `[from, to)`. Offsets skipped by a fence are not rows. */
  rowsBetween(from: number, to: number): number {
    return rowsBetween(this.#tiers(), from, to);
  }

  /**
   * Where `sinceUs` (µs since the epoch) starts: the first offset whose
   * append time is at or after it, or the durable end when every row is
   * older — in O(log n): a binary search over the chunks' and segments'
   * times, then over one segment's beacons, then at most about two beacon
   * intervals of records (see `read/time_seek.ts`). `stats` counts the reads.
   *
   * @example
   * ```ts
   * import { equal } from "node:assert/strict";
   * import { Log } from "./log.ts";
   * let now = 1000;
   * const dir = await Deno.makeTempDir();
   * const log = await Log.open(dir, { clock: () => now });
   * await log.append("{}");
   * now = 2000;
   * await log.append("{}");
   * equal((await log.offsetAt(1_500_000)).offset, 2);
   * equal((await log.offsetAt(3_000_000)).ts, null);
   * await log.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  offsetAt(sinceUs: number, stats?: LookupStats): Promise<TimeLookup> {
    const c = this.#committer;
    return offsetAtTime(
      {
        dir: this.dir,
        firstOffset: this.firstOffset,
        lastTimeUs: c.lastTimeUs,
        maxPayloadBytes: this.#opts.maxPayloadBytes,
        tiers: () => ({ ...this.#tiers(), end: this.endOffset }),
        segments: this.#segments,
      },
      sinceUs,
      stats,
    );
  }

  /** Total durable bytes of the segments. */
  get sizeBytes(): number {
    let n = 0;
    for (const s of this.#segments) n += s.info.size;
    return n;
  }

  /**
   * Appends one payload. The offset is assigned now, in call order; the
   * promise resolves with it once the row is durable.
   *
   * @throws {RangeError} (synchronously) for a payload over the size limit.
   */
  append(payload: Uint8Array | string): Promise<number> {
    const rep = this.#rep;
    if (rep === null) return this.#committer.append(payload);
    rep.checkWritable();
    return rep.committed(this.#committer.append(payload), (o) => o + 1);
  }

  /**
   * Appends payloads in one commit; resolves with the first offset once all
   * are durable (they are consecutive).
   */
  appendMany(payloads: readonly (Uint8Array | string)[]): Promise<number> {
    const rep = this.#rep;
    if (rep === null) return this.#committer.appendMany(payloads);
    rep.checkWritable();
    return rep.committed(this.#committer.appendMany(payloads), (f) => f + payloads.length);
  }

  /** Seals the active segment now if it holds rows (after what is pending). */
  async roll(): Promise<void> {
    await this.#committer.roll();
  }

  // Idempotent publishing by producers (see `producer/table.ts`).

  /**
   * Appends `payloads` in one commit as `tag`'s sequence (see
   * `producer/table.ts`): synchronously decides whether it is stored (offsets
   * assigned now), a duplicate of the producer's last seq, or stale. Without
   * a tag it is `appendMany`. Throws like `appendMany` (nothing stored).
   *
   * @example
   * ```ts
   * import { deepStrictEqual } from "node:assert/strict";
   * import { Log } from "./log.ts";
   * const dir = await Deno.makeTempDir();
   * const log = await Log.open(dir);
   * const a = log.publish(["{}", "{}"], { producer: "p", seq: 1 });
   * const b = log.publish(["{}", "{}"], { producer: "p", seq: 1 });
   * await (a.status === "stored" ? a.done : null);
   * deepStrictEqual([a.status, b.status, log.endOffset], ["stored", "duplicate", 3]);
   * await log.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  publish(payloads: readonly (Uint8Array | string)[], tag: ProducerTag | null): PublishResult {
    const rep = this.#rep;
    if (rep === null) return this.#publish(payloads, tag);
    rep.checkWritable();
    const r = this.#publish(payloads, tag);
    // Answered (stored or a duplicate) only once committed in the cluster.
    return r.status === "stored" || r.status === "duplicate"
      ? { ...r, done: rep.committed(r.done, () => r.last + 1) }
      : r;
  }

  #publish(payloads: readonly (Uint8Array | string)[], tag: ProducerTag | null): PublishResult {
    const c = this.#committer;
    if (tag === null) {
      const first = c.next;
      const done = c.appendMany(payloads).then(() => {});
      return { status: "stored", first, last: first + payloads.length - 1, done };
    }
    const answer = this.#p.table.check(tag.producer, tag.seq);
    if (answer !== null) return answer;
    const first = c.next;
    const done = c.appendMany(payloads, tag).then(() => {});
    const last = first + payloads.length - 1;
    this.#p.table.assign(tag.producer, { seq: tag.seq, first, last }, done);
    return { status: "stored", first, last, done };
  }

  // What a rewrite of the producer journal keeps (`replica/replication.ts` for a replicated log).
  readonly #remembered = (): ProducerRecord[] =>
    this.#rep?.keptRecords() ?? this.#p.table.snapshot();

  // A failed write dropped appends from `from` on: the journal records of
  // their producers are put back to the committed state, before any later
  // commit is written (beforeWrite waits while the journal is busy). When
  // that fails too (a full disk), the records are owed: the next commit
  // writes them before its own, or fails.
  #rollBackProducers(from: number): void {
    const back = this.#p.table.discarded(from);
    if (back.length === 0) return;
    this.#p.journal.append(back, this.#remembered).catch(() => {
      this.#owed.push(...back);
    });
  }

  // What a commit writes to the producer journal before its rows: the
  // records owed (above), then its own (`tags`). A failure fails the commit,
  // and the owed records stay owed.
  async #journalFirst(
    tags: readonly ProducerRecord[] | null,
    through: number | null,
  ): Promise<void> {
    const journal = this.#p.journal;
    if (journal.busy) await journal.settled();
    const owed = this.#owed;
    this.#owed = [];
    const records = tags === null ? owed : owed.length > 0 ? [...owed, ...tags] : tags;
    if (records.length === 0 && through === null) return;
    try {
      await journal.append(records, this.#remembered, through);
    } catch (err) {
      this.#owed = [...owed, ...this.#owed];
      throw err;
    }
  }

  /** Checks the age rule; called by the log's timer, or by tests with an injected clock. */
  tick(): void {
    if (this.#closed) return;
    const c = this.#committer;
    // Not while the tail is cut in place: the active file is closed until the log is recovered.
    if (this.#cutting === null && !c.failed && c.dueToRoll()) c.schedule();
    this.#link?.tick();
  }

  /** Resolves once everything appended so far is committed (or failed). */
  async flush(): Promise<void> {
    await this.#committer.flush();
  }

  /** Opens a reader starting at `offset` (clamped to what the log holds). */
  reader(offset: number): LogReader {
    return this.#reader(this.#source, offset);
  }

  #reader(source: ReaderSource, offset: number, times = false): LogReader {
    const r = new LogReader(source, offset, () => this.#readers.delete(r), times);
    this.#readers.add(r);
    return r;
  }

  // Where a reader can start for `offset` in segment `seg`.
  async #seek(seg: SegmentInfo, file: Deno.FsFile, offset: number): Promise<CursorStart> {
    const s = this.#segments.find((x) => x.info.path === seg.path);
    if (!s) throw new Deno.errors.NotFound(`segment ${seg.path} is gone`);
    if (offset <= s.info.firstOffset) return segmentStart(s.header);
    return await seekStart(file, s.header, s.info.size, offset);
  }

  // Where `offset` is held: a segment, a chunk, or nowhere.
  #locate(offset: number): Located {
    const t = locateOffset(this.#tiers(), offset);
    switch (t.kind) {
      case "segment": {
        const s = this.#segments[t.index];
        return { kind: "segment", info: s.info, layout: s.layout };
      }
      case "chunk":
        return { kind: "chunk", entry: t.entry, path: chunkPath(this.dir, t.entry.sha256) };
      case "archive":
        return { kind: "archive", entry: t.entry, store: this.#link!.archiveStore! };
      default:
        return t;
    }
  }

  /**
   * Starts a new segment at `offset`, above everything ever issued, so that no
   * offset is handed out twice (used by restore after failover).
   */
  async fence(offset: number): Promise<void> {
    const c = this.#committer;
    await this.flush();
    if (!Number.isSafeInteger(offset)) {
      throw new RangeError(`a fence is a safe integer offset, got ${offset}`);
    }
    if (offset <= c.next) {
      throw new RangeError(`a fence must be above ${c.next - 1}, got ${offset}`);
    }
    if (c.active.writer.state.count > 0) {
      await this.roll();
      await this.flush();
    }
    const old = c.active;
    const active = await fenceSegment(this, old, offset, this.#opts);
    const at = this.#segments.indexOf(old.seg);
    // Not listed when its file was never made (a full disk at its seal).
    if (at >= 0) this.#segments.splice(at, 1, active.seg);
    else this.#segments.push(active.seg);
    c.restartAt(active, offset);
    // A replicated log tells of the gap once it is committed (#visible).
    if (this.#rep) this.#rep.gate.durable(offset);
    else this.#listener?.fenced?.(offset);
  }

  // Makes this log replicated (`replica/replication.ts`): rows are shown once committed.
  async #replicate(options: LogOptions): Promise<void> {
    const c = this.#committer;
    const durable = Object.defineProperty({ ...this.#source }, "endOffset", { get: () => c.end });
    this.#rep = await Replication.open(
      {
        dir: this.dir,
        name: this.name,
        streamId: this.streamId,
        committer: c,
        segments: this.#segments,
        durableReader: (offset) => this.#reader(durable, offset, true),
        fence: (offset) => this.fence(offset),
        cut: (offset) =>
          this.#whileCutting(() =>
            cutOpenLog({
              dir: this.dir,
              opts: this.#opts,
              recover: () => recoverWithProducers(this.dir, options, this.#opts),
              committer: c,
              segments: this.#segments,
              producers: this.#p,
              flush: () => this.flush(),
              discarded: (from) => {
                for (const r of this.#readers) r._reset();
                this.#listener?.discarded?.(from);
              },
            }, offset)
          ),
        shown: (first, end) => this.#listener?.committed?.(first, end),
        fenced: (offset) => this.#listener?.fenced?.(offset),
        visible: () => {
          this.#link?.handOver();
          for (const r of this.#readers) r._wake();
        },
      },
      this.#opts.maxProducers,
      this.#opts.maxProducerHolders,
    );
  }

  // Runs a cut of the tail in place: readers wait meanwhile, and drop what
  // they read before it.
  async #whileCutting<T>(cut: () => Promise<T>): Promise<T> {
    let done!: () => void;
    this.#cutting = new Promise((r) => (done = r));
    for (const r of this.#readers) r._reset();
    try {
      return await cut();
    } finally {
      this.#cutting = null;
      done();
    }
  }

  // Replicas (mirrors): appending at given offsets, adopting chunks
  // (`replica/append_at.ts`, `chunk/adoption.ts`).

  /** Whether this log is a replica of another server's (see `LogOptions.replica`). */
  get replica(): boolean {
    return this.#opts.replica;
  }

  /**
   * Appends `payloads[i]` at `offsets[i]` (the primary's offsets, increasing):
   * rows below the next offset are skipped, each run of consecutive offsets
   * is one commit, a jump forward is a fenced gap. Resolves with the rows
   * appended, once durable; `appended` as in `replica/append_at.ts`.
   *
   * @example
   * ```ts
   * import { equal } from "node:assert/strict";
   * import { Log } from "./log.ts";
   * const dir = await Deno.makeTempDir();
   * const log = await Log.open(dir, { replica: true, timers: false });
   * await log.appendAt([5, 6], ["{}", "{}"]);
   * equal(log.endOffset, 7);
   * await log.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  appendAt(
    offsets: readonly number[],
    payloads: readonly (Uint8Array | string)[],
    appended?: (from: number, to: number) => void,
  ): Promise<number> {
    return appendAt(this, offsets, payloads, appended);
  }

  /**
   * Lists the primary's chunks `chunks` (stored and checked by
   * `storeAdoptedChunk`) in this replica's manifest, in place of those they
   * overlap, and deletes the sealed segments they cover. When they reach
   * past the end, the next offset moves past them (a fence).
   */
  async adoptChunks(chunks: ChunkEntry[]): Promise<void> {
    if (!this.#opts.replica || !this.#link) {
      throw new TypeError(`log ${this.dir} is not a replica: it makes its own chunks`);
    }
    if (chunks.length === 0) return;
    await this.#link.adopt(chunks);
    const last = chunks[chunks.length - 1].last;
    if (last >= this.nextOffset) await this.fence(last + 1);
  }

  /** Flushes what is pending, closes the files and releases the lock. */
  async close(): Promise<void> {
    if (this.#closed) return;
    await this.flush();
    if (this.#link?.running && this.archive.uri && !this.#committer.failed) {
      // A planned stop: seal what is pending so that it reaches the archive.
      await this.roll();
      await this.chunks.settled();
    }
    this.#closed = true;
    this.#committer.close();
    clearInterval(this.#timer);
    // Every step is taken even when one before it fails (the commit index's
    // checkpoint on a full disk, say): the files and the lock are let go, so
    // that the log can be opened again; the first failure is thrown after.
    let failure: { err: unknown } | null = null;
    const step = async (f: () => Promise<void> | void) => {
      try {
        await f();
      } catch (err) {
        failure ??= { err };
      }
    };
    await step(() => this.#rep?.close());
    await step(() => this.#p.journal.settled());
    this.#p.journal.close();
    for (const r of this.#readers) r._wake();
    await step(() => this.#link?.close());
    const active = this.#committer.active;
    await step(async () => {
      if (active.file && !this.#opts.fsync) await this.#opts.io.syncData(active.file);
    });
    active.file?.close();
    active.file = null;
    this.#lock.close();
    if (failure !== null) throw (failure as { err: unknown }).err;
  }

  /** Whether the log is closed. */
  get closed(): boolean {
    return this.#closed;
  }
}
