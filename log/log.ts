/**
 * The durable, segmented, append-only log of one stream.
 *
 * Invariants this module keeps:
 * - offsets start at 1 (or at a fence) and only increase; within a segment they
 *   are contiguous;
 * - `append` assigns offsets synchronously in call order; one committer writes
 *   everything pending with one write and one `syncData`, then advances the
 *   durable end, tells `onCommit`, and resolves the callers — never before;
 * - only the last segment may be unsealed or end in a torn record; opening
 *   truncates such a tail and refuses any other damage, naming file and byte;
 * - one writer per log on a host: a lock file held with `flock`.
 *
 * @module
 */

import { join } from "node:path";
import {
  DEFAULT_BEACON_INTERVAL,
  encodeHeader,
  FORMAT_VERSION,
  HEADER_BYTES,
  Layout,
  MIN_BEACON_INTERVAL,
  parseSegmentFileName,
  RUNNING_SEED,
  segmentFileName,
  type SegmentHeader,
} from "./format.ts";
import {
  type CursorStart,
  LogCorruptError,
  readHeader,
  seekStart,
  segmentStart,
} from "./segment_reader.ts";
import { SegmentWriter, type WriterState } from "./segment_writer.ts";
import { scanSegmentRecords } from "./segment_scan.ts";
import { readManifest, syncDir, writeFileAtomic } from "./fs.ts";
import { writeCheckedJson } from "./meta_file.ts";
import {
  type LogMeta,
  META_FILE,
  otherHeadersAgree,
  readMeta,
  streamIdMismatch,
} from "./log_meta.ts";

export { META_FILE };
import { writeAll } from "../common/write_all.ts";

export { syncDir, writeFileAtomic };
import { LogReader } from "./log_reader.ts";
import { type ChunkEntry, chunkPath, type Manifest, MANIFEST_FILE } from "./chunk.ts";
import type { ArchiveState, ChunkPolicy, FromWorker } from "./chunk_protocol.ts";
import type { ArchiveOptions, ArchiveStore } from "./archive.ts";
import { ChunkWorker } from "./chunk_client.ts";

/** Largest payload accepted by default: 16 MiB. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 16 << 20;
/** Default segment size before rolling: 64 MiB. */
export const DEFAULT_SEGMENT_BYTES = 64 << 20;
/** Default age of a segment's first row before rolling: 60 s. */
export const DEFAULT_SEAL_EVERY_MS = 60_000;
/** The name of the lock file in a log folder. */
export const LOCK_FILE = "LOCK";

/** Options of {@linkcode Log.open}. */
export interface LogOptions {
  /** Stream name written in segment headers. @default the folder name ("" for "_") */
  name?: string;
  /** Create the log when the folder holds none. @default true */
  create?: boolean;
  /** Stream id for a new log (32 hex); a new random one when absent. */
  streamId?: string;
  /** First offset of a new log. @default 1 */
  firstOffset?: number;
  /**
   * Sync each commit to disk before acknowledging it. `false` survives a
   * process crash but not a power loss. @default true
   */
  fsync?: boolean;
  /** Roll the active segment once it reaches this many bytes. @default 64 MiB */
  segmentBytes?: number;
  /** Roll the active segment once its first row is this old (0: never). @default 60000 */
  sealEveryMs?: number;
  /** Beacon interval of new segments. @default 1 MiB */
  beaconInterval?: number;
  /** Largest payload accepted. @default 16 MiB */
  maxPayloadBytes?: number;
  /** The clock, in ms since the epoch (inject one in tests). @default Date.now */
  clock?: () => number;
  /** Check the age rule on a timer; turn off to drive it with `tick()`. @default true */
  timers?: boolean;
  /**
   * How much to check on open: `"all"` reads every record of every segment,
   * `"tail"` only the active segment from its last beacon. @default "all"
   */
  verify?: "all" | "tail";
  /**
   * Turn sealed segments into chunks in the chunk worker (`true`, or a policy
   * for merging and retention). @default false (streams turn it on)
   */
  chunks?: boolean | Partial<ChunkPolicy>;
  /** How often the worker merges, expires and applies retention, ms. @default 60000 */
  maintainEveryMs?: number;
  /**
   * The writes and syncs of commits go through here: a seam for tests to
   * inject filesystem faults. @default the real `write` and `syncData`
   */
  io?: LogIo;
  /** Archive chunks and the manifest to S3 (turns chunks on). */
  archive?: ArchiveOptions | null;
  /** Serve offsets the local tier dropped from the archive. @default false */
  replayArchive?: boolean;
  /**
   * On close with an archive: seal the active segment and wait up to this
   * long for the archive to take everything (a planned stop loses nothing).
   * @default 10000
   */
  archiveWaitMs?: number;
}

/** How a log writes and syncs its active segment (see {@linkcode LogOptions.io}). */
export interface LogIo {
  /** Writes all of `bytes` at the file's position. */
  write(file: Deno.FsFile, bytes: Uint8Array): Promise<void>;
  /** Flushes the file's data to disk. */
  syncData(file: Deno.FsFile): Promise<void>;
}

/**
 * The real filesystem. The write is synchronous: it only copies into the OS's
 * page cache (microseconds), while an async write pays a thread hand-off
 * that, measured, left the committer idle most of the time; the sync, which
 * waits on the disk, stays asynchronous.
 */
export const REAL_IO: LogIo = {
  write: (file, bytes) => {
    let done = 0;
    while (done < bytes.length) done += file.writeSync(bytes.subarray(done));
    return Promise.resolve();
  },
  syncData: (file) => file.syncData(),
};

/** Default chunk policy. */
export const DEFAULT_CHUNK_POLICY: ChunkPolicy = {
  fanIn: 4,
  maxChunkBytes: 256 << 20,
  graceMs: 15 * 60_000,
  retainBytes: null,
  retainAgeMs: null,
  archive: null,
};

/** A read asked for rows the log no longer holds (retention dropped them). */
export class LogEvictedError extends Error {
  /** The offset asked for. */
  readonly offset: number;
  /** The earliest offset the log still holds (null: none). */
  readonly earliest: number | null;
  /** Makes the error. */
  constructor(offset: number, earliest: number | null) {
    super(`offset ${offset} is no longer held by the log; the earliest is ${earliest ?? "none"}`);
    this.name = "LogEvictedError";
    this.offset = offset;
    this.earliest = earliest;
  }
}

/** Where a reader finds an offset: a segment, a chunk, or nowhere. */
export type Located =
  | { kind: "segment"; info: SegmentInfo; layout: Layout }
  | { kind: "chunk"; entry: ChunkEntry; path: string }
  | { kind: "archive"; entry: ChunkEntry; store: ArchiveStore }
  | { kind: "evicted"; earliest: number | null }
  | { kind: "end" };

/** What the log knows of one segment. */
export interface SegmentInfo {
  /** Full path of the file. */
  path: string;
  /** First offset the segment may hold. */
  firstOffset: number;
  /** Number of durable records. */
  count: number;
  /** Durable bytes of the file. */
  size: number;
  /** Whether the segment is sealed (complete, immutable). */
  sealed: boolean;
  /** Creation time, µs since the epoch. */
  createdUs: number;
  /** Append time of the first record (µs), or 0 when empty. */
  firstTimeUs: number;
  /** Append time of the last record (µs), or 0 when empty. */
  lastTimeUs: number;
  /** The beacon interval. */
  beaconInterval: number;
}

/** The log could not be opened because another writer holds it. */
export class LogLockedError extends Error {
  /** The log folder. */
  readonly dir: string;
  /** Makes the error for `dir`. */
  constructor(dir: string, holder: string) {
    super(
      `log ${dir} is already open for writing${holder ? ` (by ${holder})` : ""}; ` +
        `one writer per log: stop the other process first`,
    );
    this.name = "LogLockedError";
    this.dir = dir;
  }
}

/** An append failed because the log could not write; nothing of it was kept. */
export class LogWriteError extends Error {
  /** Makes the error, keeping the cause. */
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = "LogWriteError";
  }
}

type ResolvedOptions =
  & Required<
    Omit<LogOptions, "streamId" | "firstOffset" | "name" | "create" | "chunks" | "archive">
  >
  & { chunks: ChunkPolicy | null };

interface Group {
  first: number;
  count: number;
  /** Append time of the group's rows, µs. */
  timeUs: number;
  promise: Promise<void>;
  resolve: () => void;
  reject: (err: Error) => void;
}

interface Segment {
  info: SegmentInfo;
  header: SegmentHeader;
  layout: Layout;
}

interface Active {
  seg: Segment;
  writer: SegmentWriter;
  file: Deno.FsFile | null;
  durable: WriterState;
}

function utf8Length(s: string): number {
  return new TextEncoder().encode(s).length;
}

function nowUs(clock: () => number): number {
  return Math.round(clock() * 1000);
}

function randomId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * A stream's durable log: a folder of segment files, appended with group
 * commit and read by any number of {@linkcode LogReader}s.
 *
 * @example
 * ```ts
 * import { Log } from "./log.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(`${dir}/trades`);
 * const offset = await log.append(new TextEncoder().encode('{"price":1}'));
 * console.log(offset, log.endOffset); // 1 2
 * await log.close();
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
  /** Duration of the last commit's write + sync, ms (for metrics). */
  lastCommitMs = 0;
  /** Called after each durable commit with the offsets `[first, end)` it made durable. */
  onCommit: ((first: number, end: number) => void) | null = null;
  /** Called when appends that were assigned offsets from `from` on were dropped by a failed write. */
  onDiscard: ((from: number) => void) | null = null;
  /** Called when a segment is sealed. */
  onSeal: ((segment: SegmentInfo) => void) | null = null;

  readonly #opts: ResolvedOptions;
  readonly #lock: Deno.FsFile;
  readonly #segments: Segment[];
  #active: Active;
  #next: number;
  #end: number;
  #group: Group | null = null;
  #committing = false;
  #scheduled = false;
  #rollRequested = false;
  #failed: Error | null = null;
  #closed = false;
  #idle: Promise<void> = Promise.resolve();
  #idleResolve: (() => void) | null = null;
  #timer: ReturnType<typeof setInterval> | undefined;
  #worker: ChunkWorker | null = null;
  #manifest: Manifest | null = null;
  #workerError: string | null = null;
  #lastMaintain = 0;
  #syncId = 0;
  // Sealed segments are handed to the chunk worker in offset order, each once:
  // the first offset not handed over yet.
  #handedFrom = 0;
  #handing = false;
  #archiveState: ArchiveState | null = null;
  #archiveStore: ArchiveStore | null = null;
  #waiters: { test: (m: FromWorker) => boolean; resolve: (m: FromWorker) => void }[] = [];
  #readers = new Set<LogReader>();

  private constructor(
    dir: string,
    meta: LogMeta,
    opts: ResolvedOptions,
    lock: Deno.FsFile,
    segments: Segment[],
    active: Active,
  ) {
    this.dir = dir;
    this.name = meta.name;
    this.streamId = meta.stream_id;
    this.firstOffset = meta.first_offset ?? 1;
    this.#opts = opts;
    this.#lock = lock;
    this.#segments = segments;
    this.#active = active;
    this.#next = active.seg.info.firstOffset + active.seg.info.count;
    this.#end = this.#next;
    if (opts.timers && (opts.sealEveryMs > 0 || opts.chunks)) {
      const every = Math.min(1000, (opts.sealEveryMs || 4000) / 4);
      const timer = setInterval(() => this.tick(), every);
      Deno.unrefTimer(timer);
      this.#timer = timer;
    }
  }

  /**
   * Opens the log in `dir`, creating it if it does not exist (unless
   * `create: false`), recovering a torn tail, and taking the writer's lock.
   *
   * @throws {LogLockedError} when another writer holds the log.
   * @throws {LogCorruptError} on damage other than a torn tail.
   */
  static async open(dir: string, options: LogOptions = {}): Promise<Log> {
    const opts = {
      fsync: options.fsync ?? true,
      segmentBytes: options.segmentBytes ?? DEFAULT_SEGMENT_BYTES,
      sealEveryMs: options.sealEveryMs ?? DEFAULT_SEAL_EVERY_MS,
      beaconInterval: options.beaconInterval ?? DEFAULT_BEACON_INTERVAL,
      maxPayloadBytes: options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
      clock: options.clock ?? Date.now,
      timers: options.timers ?? true,
      verify: options.verify ?? "all",
      chunks: options.chunks || options.archive
        ? {
          ...DEFAULT_CHUNK_POLICY,
          ...(typeof options.chunks === "object" ? options.chunks : {}),
          archive: options.archive ?? null,
        }
        : null,
      maintainEveryMs: options.maintainEveryMs ?? 60_000,
      replayArchive: options.replayArchive ?? false,
      archiveWaitMs: options.archiveWaitMs ?? 10_000,
      io: options.io ?? REAL_IO,
    };
    if (opts.beaconInterval < MIN_BEACON_INTERVAL || opts.beaconInterval > 1 << 30) {
      throw new RangeError(
        `beaconInterval must be between ${MIN_BEACON_INTERVAL} and 2^30, got ${opts.beaconInterval}`,
      );
    }
    if (opts.maxPayloadBytes < 1 || opts.maxPayloadBytes > 0xffff_ffff - 64) {
      throw new RangeError(`maxPayloadBytes out of range: ${opts.maxPayloadBytes}`);
    }
    if (opts.segmentBytes < HEADER_BYTES * 2) {
      throw new RangeError(`segmentBytes must be at least ${HEADER_BYTES * 2}`);
    }
    const create = options.create ?? true;
    if (create) await Deno.mkdir(dir, { recursive: true });
    else {
      try {
        await Deno.stat(join(dir, META_FILE));
      } catch (err) {
        if (err instanceof Deno.errors.NotFound) {
          throw new Deno.errors.NotFound(`no log in ${dir} (${META_FILE} is missing)`);
        }
        throw err;
      }
    }
    const lock = await Deno.open(join(dir, LOCK_FILE), { read: true, write: true, create: true });
    if (!(await lock.tryLock(true))) {
      const holder = new TextDecoder().decode(await Deno.readFile(join(dir, LOCK_FILE))).trim();
      lock.close();
      throw new LogLockedError(dir, holder);
    }
    try {
      await lock.truncate(0);
      await writeAll(lock, new TextEncoder().encode(`pid ${Deno.pid}\n`));
      const log = await Log.#recover(dir, options, opts, lock);
      if (!opts.chunks && options.chunks !== false) {
        // A log that already keeps chunks is read through them, whatever
        // the caller asked (its history would otherwise look evicted).
        const has = await Deno.stat(join(dir, MANIFEST_FILE)).then(() => true, () => false);
        if (has) opts.chunks = { ...DEFAULT_CHUNK_POLICY };
      }
      if (opts.chunks) {
        try {
          // A damaged manifest is named here, as LogCorruptError.
          await readManifest(dir);
          await log.#startChunks(opts.chunks);
        } catch (err) {
          await log.close();
          throw err;
        }
      }
      return log;
    } catch (err) {
      // The log may have closed the lock already (a failure after recovery):
      // never let that hide the real error.
      try {
        lock.close();
      } catch {
        // already closed
      }
      throw err;
    }
  }

  static async #recover(
    dir: string,
    options: LogOptions,
    opts: ResolvedOptions,
    lock: Deno.FsFile,
  ): Promise<Log> {
    const firsts: number[] = [];
    for await (const entry of Deno.readDir(dir)) {
      const first = entry.isFile ? parseSegmentFileName(entry.name) : null;
      if (first !== null) firsts.push(first);
    }
    firsts.sort((a, b) => a - b);
    const read = await readMeta(dir);
    let meta = read?.meta ?? null;
    const checked = read?.checked ?? true;
    const defaultName = dir.split("/").filter(Boolean).pop() ?? "";
    if (!meta) {
      let streamId = options.streamId ?? randomId();
      let name = options.name ?? (defaultName === "_" ? "" : defaultName);
      if (firsts.length > 0) {
        // Segments without metadata (a crash between the two at creation): the
        // headers still say whose they are.
        const f = await Deno.open(join(dir, segmentFileName(firsts[0])), { read: true });
        try {
          const h = await readHeader(f, join(dir, segmentFileName(firsts[0])));
          streamId = h.streamId;
          name = h.name;
        } finally {
          f.close();
        }
      }
      if (!/^[0-9a-f]{32}$/.test(streamId)) {
        throw new TypeError(`streamId must be 32 lowercase hex characters, got ${streamId}`);
      }
      meta = {
        format: FORMAT_VERSION,
        name,
        stream_id: streamId,
        created_us: nowUs(opts.clock),
        first_offset: firsts.length > 0 ? firsts[0] : Math.max(1, options.firstOffset ?? 1),
        fenced: [],
      };
      await writeCheckedJson(join(dir, META_FILE), meta);
    }
    const segments: Segment[] = [];
    let tailState: WriterState = initialState();
    for (let i = 0; i < firsts.length; i++) {
      const path = join(dir, segmentFileName(firsts[i]));
      const last = i === firsts.length - 1;
      const scanned = await scanSegment(path, meta, checked, last, opts);
      if (!scanned) continue; // an empty, unsealed segment left by a fence: removed
      segments.push(scanned.segment);
      tailState = scanned.state;
    }
    for (let i = 1; i < segments.length; i++) {
      const prev = segments[i - 1].info;
      if (segments[i].info.firstOffset < prev.firstOffset + prev.count) {
        throw new LogCorruptError(
          segments[i].info.path,
          0,
          `segment starts at ${segments[i].info.firstOffset}, inside the previous segment`,
        );
      }
    }
    let tail = segments.at(-1);
    if (!tail || tail.info.sealed) {
      // A new log, or a crash right after sealing: start the next segment.
      const first = tail
        ? tail.info.firstOffset + tail.info.count
        : Math.max(1, options.firstOffset ?? 1);
      tail = await createSegment(dir, meta, first, opts);
      segments.push(tail);
      tailState = initialState();
    }
    const file = await Deno.open(tail.info.path, { read: true, write: true });
    await file.seek(tail.info.size, Deno.SeekMode.Start);
    const state = tailState;
    const active: Active = {
      seg: tail,
      writer: new SegmentWriter(tail.layout.interval, state),
      file,
      durable: state,
    };
    return new Log(dir, meta, opts, lock, segments, active);
  }

  /** The durable end: the next offset to be made durable (exclusive end). */
  get endOffset(): number {
    return this.#end;
  }

  /** The next offset `append` will assign. */
  get nextOffset(): number {
    return this.#next;
  }

  /** The earliest offset the log holds, or `null` when it holds no row. */
  get earliest(): number | null {
    const local = this.#localEarliest();
    const a = this.#archiveChunks()[0];
    if (a && (local === null || a.first < local)) return a.first;
    return local;
  }

  /** The earliest offset held on local disk. */
  #localEarliest(): number | null {
    const c = this.#manifest?.chunks[0];
    for (const s of this.#segments) {
      if (s.info.count > 0) return c ? Math.min(c.first, s.info.firstOffset) : s.info.firstOffset;
    }
    return c ? c.first : null;
  }

  // Archived chunks below the local tier, when replay from the archive is on.
  #archiveChunks(): ChunkEntry[] {
    if (!this.#opts.replayArchive) return [];
    const archived = this.#archiveState?.manifest?.chunks ?? [];
    const local = this.#localEarliest() ?? this.#end;
    return archived.filter((c) => c.first < local);
  }

  /**
   * Last offset a client can read as chunks over HTTP (the local manifest's,
   * or the archive's when replay from it is on); null without chunks.
   */
  get chunksThrough(): number | null {
    if (!this.#manifest) return null;
    const a = this.#opts.replayArchive ? this.#archiveState?.through ?? 0 : 0;
    return Math.max(this.#manifest.through, a);
  }

  /** The chunk manifest (null when the log keeps no chunks). */
  get manifest(): Manifest | null {
    return this.#manifest ? structuredClone(this.#manifest) : null;
  }

  /** Whether commits are synced to disk before they are acknowledged. */
  get fsync(): boolean {
    return this.#opts.fsync;
  }

  /** The largest payload accepted. */
  get maxPayloadBytes(): number {
    return this.#opts.maxPayloadBytes;
  }

  /** The segments, oldest first (a snapshot). */
  segments(): SegmentInfo[] {
    return this.#segments.map((s) => ({ ...s.info }));
  }

  /** Rows the log holds in `[from, to)`. Offsets skipped by a fence are not rows. */
  rowsBetween(from: number, to: number): number {
    let rows = 0;
    // Chunks count below the first segment (a segment listed in a chunk but
    // not yet deleted is counted once, as a segment).
    const segStart = this.#segments[0]?.info.firstOffset ?? Infinity;
    const chunkStart = this.#manifest?.chunks[0]?.first ?? segStart;
    for (const c of this.#archiveChunks()) {
      const lo = Math.max(from, c.first);
      const hi = Math.min(to, c.last + 1, chunkStart, segStart);
      if (hi > lo) rows += c.rows === c.last - c.first + 1 ? hi - lo : Math.min(c.rows, hi - lo);
    }
    for (const c of this.#manifest?.chunks ?? []) {
      const lo = Math.max(from, c.first);
      const hi = Math.min(to, c.last + 1, segStart);
      if (hi <= lo) continue;
      // Rows are contiguous within a chunk unless it spans a fence.
      rows += c.rows === c.last - c.first + 1 ? hi - lo : Math.min(c.rows, hi - lo);
    }
    for (const s of this.#segments) {
      const lo = Math.max(from, s.info.firstOffset);
      const hi = Math.min(to, s.info.firstOffset + s.info.count);
      if (hi > lo) rows += hi - lo;
    }
    return rows;
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
    this.#checkAppend(payload);
    const g = this.#encode([payload]);
    const offset = this.#next - 1;
    return g.promise.then(() => offset);
  }

  /**
   * Appends payloads in one commit; resolves with the first offset once all
   * are durable (they are consecutive).
   */
  appendMany(payloads: readonly (Uint8Array | string)[]): Promise<number> {
    for (const p of payloads) this.#checkAppend(p);
    const first = this.#next;
    if (payloads.length === 0) return Promise.resolve(first);
    return this.#encode(payloads).promise.then(() => first);
  }

  // Encodes checked payloads into the pending group at the next offsets. The
  // append time is read once per group (the clock showed in profiles when
  // read per row): rows of one commit share it.
  #encode(payloads: readonly (Uint8Array | string)[]): Group {
    const g = this.#group ?? this.#newGroup(this.#next);
    const info = this.#active.seg.info;
    if (info.firstTimeUs === 0) info.firstTimeUs = g.timeUs;
    for (const p of payloads) this.#active.writer.append(this.#next++, g.timeUs, p);
    g.count += payloads.length;
    this.#schedule();
    return g;
  }

  #checkAppend(payload: Uint8Array | string): void {
    if (this.#closed) throw new Deno.errors.BadResource(`log ${this.dir} is closed`);
    if (this.#failed) throw this.#failed;
    const max = this.#opts.maxPayloadBytes;
    // A string's UTF-8 size is between its length and three times it.
    if (typeof payload === "string" && payload.length * 3 <= max) return;
    const bytes = typeof payload === "string" ? utf8Length(payload) : payload.length;
    if (bytes > max) {
      throw new RangeError(`payload is ${bytes} bytes; the limit is ${max}`);
    }
  }

  #newGroup(first: number): Group {
    let resolve!: () => void;
    let reject!: (e: Error) => void;
    const promise = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // A caller that never awaits must not cause an unhandled rejection here:
    // the rejection reaches every caller through its own `.then`.
    promise.catch(() => {});
    this.#group = { first, count: 0, timeUs: nowUs(this.#opts.clock), promise, resolve, reject };
    return this.#group;
  }

  #schedule(): void {
    if (this.#committing || this.#scheduled) return;
    this.#scheduled = true;
    if (!this.#idleResolve) {
      this.#idle = new Promise((r) => (this.#idleResolve = r));
    }
    queueMicrotask(() => {
      this.#scheduled = false;
      this.#commitLoop();
    });
  }

  async #commitLoop(): Promise<void> {
    if (this.#committing) return;
    this.#committing = true;
    try {
      while (!this.#failed && (this.#group || this.#rollRequested || this.#dueToRoll())) {
        const a = this.#active;
        const roll = a.writer.state.count > 0 &&
          (this.#rollRequested || this.#dueToRoll());
        this.#rollRequested = false;
        if (roll) a.writer.seal();
        const group = this.#group;
        this.#group = null;
        const state = { ...a.writer.state };
        const bytes = a.writer.take();
        let next: Segment | null = null;
        if (roll) {
          // New appends go to the next segment from now on; its file is made
          // below, once this one is sealed on disk.
          next = newSegmentState(this.dir, this.streamId, this.name, this.#next, this.#opts);
          const st = initialState();
          this.#active = {
            seg: next,
            writer: new SegmentWriter(next.layout.interval, st),
            file: null,
            durable: st,
          };
        }
        const t0 = performance.now();
        try {
          if (bytes.length > 0) {
            await this.#opts.io.write(a.file!, bytes);
            if (this.#opts.fsync || roll) await this.#opts.io.syncData(a.file!);
          }
        } catch (err) {
          this.#failWrite(a, group, err, roll);
          break;
        }
        this.lastCommitMs = performance.now() - t0;
        a.durable = state;
        a.seg.info.size = state.physEnd;
        a.seg.info.count = state.count;
        a.seg.info.lastTimeUs = state.lastTimeUs;
        if (group) {
          this.#end = group.first + group.count;
          try {
            this.onCommit?.(group.first, this.#end);
          } finally {
            group.resolve();
          }
        }
        this.#wakeReaders();
        if (roll && next) {
          a.seg.info.sealed = true;
          a.file!.close();
          a.file = null;
          try {
            const file = await createSegmentFile(next, this.#opts);
            this.#segments.push(next);
            this.#active.file = file;
          } catch (err) {
            this.#fail(new LogWriteError(`cannot create segment ${next.info.path}: ${err}`, err));
          }
          this.onSeal?.({ ...a.seg.info });
          this.#handOver();
        }
      }
    } finally {
      this.#committing = false;
      if (this.#group && !this.#failed) this.#schedule();
      else if (this.#idleResolve) {
        this.#idleResolve();
        this.#idleResolve = null;
      }
    }
  }

  #dueToRoll(): boolean {
    const a = this.#active;
    const st = a.writer.state;
    if (st.count === 0) return false;
    if (st.physEnd >= this.#opts.segmentBytes) return true;
    const first = a.seg.info.firstTimeUs;
    const every = this.#opts.sealEveryMs;
    return every > 0 && first > 0 && nowUs(this.#opts.clock) - first >= every * 1000;
  }

  // A write failed (e.g. a full disk): nothing of this group or of the appends
  // queued behind it is kept; the file is cut back to its durable size so the
  // log stays usable. If even that fails, the log refuses further appends.
  #failWrite(a: Active, group: Group | null, cause: unknown, rolled: boolean): void {
    const err = new LogWriteError(
      `append to ${this.dir} failed: ${cause instanceof Error ? cause.message : cause}`,
      cause,
    );
    const from = group ? group.first : this.#end;
    group?.reject(err);
    this.#group?.reject(err);
    this.#group = null;
    this.#next = this.#end;
    if (rolled) {
      // The next segment never reached disk: go back to the one that failed.
      this.#active = a;
    }
    a.writer.reset(a.durable);
    if (a.durable.count === 0) a.seg.info.firstTimeUs = 0;
    try {
      a.file!.truncateSync(a.durable.physEnd);
      a.file!.seekSync(a.durable.physEnd, Deno.SeekMode.Start);
    } catch (e) {
      this.#fail(new LogWriteError(`log ${this.dir} cannot recover from a failed write: ${e}`, e));
    }
    this.onDiscard?.(from);
  }

  #fail(err: Error): void {
    this.#failed = err;
    this.#group?.reject(err);
    this.#group = null;
    this.#next = this.#end;
    this.onDiscard?.(this.#end);
  }

  /** Seals the active segment now if it holds rows (after what is pending). */
  async roll(): Promise<void> {
    if (this.#active.writer.state.count === 0) return;
    this.#rollRequested = true;
    this.#schedule();
    await this.flush();
  }

  /** Checks the age rule; called by the log's timer, or by tests with an injected clock. */
  tick(): void {
    if (this.#closed) return;
    if (!this.#failed && this.#dueToRoll()) this.#schedule();
    const now = this.#opts.clock();
    if (this.#worker && now - this.#lastMaintain >= this.#opts.maintainEveryMs) {
      this.#lastMaintain = now;
      this.#worker.post({ type: "maintain", dir: this.dir, nowUs: nowUs(this.#opts.clock) });
    }
  }

  async #startChunks(policy: ChunkPolicy): Promise<void> {
    if (policy.archive && this.#opts.replayArchive) {
      // Loaded only when needed: the S3 SDK is large.
      const { ArchiveStore } = await import("./archive.ts");
      this.#archiveStore = new ArchiveStore(policy.archive, this.name);
    }
    const worker = ChunkWorker.acquire();
    this.#worker = worker;
    this.#lastMaintain = this.#opts.clock();
    worker.register(this.dir, (m) => this.#fromWorker(m));
    const first = this.#wait((m) => m.type === "manifest" || m.type === "error");
    worker.post({
      type: "open",
      dir: this.dir,
      stream: this.name,
      streamId: this.streamId,
      policy,
    });
    const m = await first;
    if (m.type === "error") throw new Error(`cannot open the chunks of ${this.dir}: ${m.message}`);
    if (policy.archive && this.#opts.replayArchive && !this.#archiveState) {
      // Serving from the archive needs to know what it holds: wait (bounded)
      // for its first report, so that the first subscribers are not refused.
      const reported = this.#wait((x) => x.type === "archive");
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([reported, new Promise((r) => (timer = setTimeout(r, 10_000)))]);
      clearTimeout(timer);
      if (!(this.#archiveState as ArchiveState | null)?.manifest) {
        console.error(
          `streamcast: the archive of ${this.dir} has not answered yet; serving local rows`,
        );
      }
    }
    // Sealed segments not yet chunked (or chunked but not yet deleted, after
    // a crash): hand them over again; the worker knows which is which.
    this.#handing = true;
    this.#handOver();
  }

  // Hands every sealed segment not handed over yet to the chunk worker, oldest
  // first. Only once the worker has its manifest: until then a segment sealed
  // by the timer (the tail left by a crash, say) would reach the worker before
  // the older sealed segments, and chunks must be made in offset order.
  #handOver(): void {
    if (!this.#worker || !this.#handing) return;
    for (const s of this.#segments) {
      const info = s.info;
      if (!info.sealed || info.firstOffset < this.#handedFrom) continue;
      this.#handedFrom = info.firstOffset + info.count;
      this.#worker.post({
        type: "seal",
        dir: this.dir,
        segment: { path: info.path, firstOffset: info.firstOffset, count: info.count },
        nowUs: nowUs(this.#opts.clock),
      });
    }
  }

  #wait(test: (m: FromWorker) => boolean): Promise<FromWorker> {
    return new Promise((resolve) => this.#waiters.push({ test, resolve }));
  }

  #fromWorker(m: FromWorker): void {
    switch (m.type) {
      case "manifest":
        this.#manifest = m.manifest;
        break;
      case "chunked": {
        // The chunk is durable and listed: the segment is no longer the copy.
        const i = this.#segments.findIndex((s) => s.info.path === m.segmentPath);
        if (i >= 0 && this.#segments[i].info.sealed) {
          this.#segments.splice(i, 1);
          Deno.remove(m.segmentPath).catch((err) => {
            if (!(err instanceof Deno.errors.NotFound)) {
              console.error(`streamcast: cannot delete ${m.segmentPath}: ${err}`);
            }
          });
        }
        break;
      }
      case "error":
        this.#workerError = m.message;
        console.error(`streamcast: chunk worker: ${m.message}`);
        break;
      case "archive":
        this.#archiveState = m.state;
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

  /** Changes how chunks are merged and retained (takes effect at the next maintenance). */
  setRetention(policy: Partial<ChunkPolicy>): void {
    if (!this.#worker || !this.#opts.chunks) {
      throw new TypeError(`log ${this.dir} keeps no chunks`);
    }
    this.#opts.chunks = { ...this.#opts.chunks, ...policy };
    this.#worker.post({ type: "policy", dir: this.dir, policy: this.#opts.chunks });
  }

  /** How far the archive has got (null without an archive, or before its first report). */
  get archiveState(): ArchiveState | null {
    return this.#archiveState ? structuredClone(this.#archiveState) : null;
  }

  /** The archive's URI, or null. */
  get archiveUri(): string | null {
    return this.#opts.chunks?.archive?.uri ?? null;
  }

  /**
   * Resolves once the archive holds everything chunked so far (or after
   * `ms`); `false` if it timed out.
   */
  async archiveSettled(ms = 30_000): Promise<boolean> {
    if (!this.#worker || !this.archiveUri) return true;
    await this.chunksSettled();
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      const a = this.#archiveState;
      const m = this.#manifest;
      if (a && m && a.lastError === null && a.through >= m.through) return true;
      await new Promise((r) => setTimeout(r, 20));
    }
    return false;
  }

  /** The last error the chunk worker reported for this log, if any. */
  get chunkError(): string | null {
    return this.#workerError;
  }

  /**
   * Resolves once the chunk worker has done everything asked of it so far
   * (chunking, merging, retention; with `maintain`, a maintenance round now)
   * and the log has taken the results in.
   */
  async chunksSettled(maintain = false): Promise<void> {
    if (!this.#worker) return;
    await this.flush();
    if (maintain) {
      this.#worker.post({ type: "maintain", dir: this.dir, nowUs: nowUs(this.#opts.clock) });
    }
    const id = ++this.#syncId;
    const done = this.#wait((m) => m.type === "synced" && m.id === id);
    this.#worker.post({ type: "sync", dir: this.dir, id });
    await done;
  }

  /** Resolves once everything appended so far is committed (or failed). */
  async flush(): Promise<void> {
    while (this.#committing || this.#scheduled || this.#group) await this.#idle;
  }

  /** Opens a reader starting at `offset` (clamped to what the log holds). */
  reader(offset: number): LogReader {
    const r = new LogReader(this, offset, () => this.#readers.delete(r));
    this.#readers.add(r);
    return r;
  }

  /** @internal Where a reader can start for `offset` in segment `seg`. */
  async _seek(seg: SegmentInfo, file: Deno.FsFile, offset: number): Promise<CursorStart> {
    const s = this.#segments.find((x) => x.info.path === seg.path);
    if (!s) throw new Deno.errors.NotFound(`segment ${seg.path} is gone`);
    if (offset <= s.info.firstOffset) return segmentStart(s.header);
    return await seekStart(file, s.header, s.info.size, offset);
  }

  /** @internal Where `offset` is held: a segment, a chunk, or nowhere. */
  _locate(offset: number): Located {
    const segs = this.#segments;
    const segStart = segs[0]?.info.firstOffset ?? Infinity;
    if (offset >= segStart) {
      for (let i = segs.length - 1; i >= 0; i--) {
        const s = segs[i];
        if (s.info.firstOffset > offset) continue;
        if (offset < s.info.firstOffset + s.info.count || !s.info.sealed) {
          return { kind: "segment", info: s.info, layout: s.layout };
        }
        // Past a sealed segment: a chunk when one holds the offset (the next
        // segment was chunked first), else a gap (a fence): the next segment.
        const next = segs[i + 1];
        const bound = next ? next.info.firstOffset : this.#end;
        for (const c of this.#manifest?.chunks ?? []) {
          if (c.last >= offset && c.first < bound) {
            return { kind: "chunk", entry: c, path: chunkPath(this.dir, c.sha256) };
          }
        }
        return next ? { kind: "segment", info: next.info, layout: next.layout } : { kind: "end" };
      }
    }
    const earliest = this.earliest;
    if (offset >= this.#end) return { kind: "end" };
    // Below the end, nothing held (all evicted), or below what is held.
    if (earliest === null || offset < earliest) return { kind: "evicted", earliest };
    const local = this.#localEarliest();
    if (local === null || offset < local) {
      for (const c of this.#archiveChunks()) {
        if (c.last >= offset && this.#archiveStore) {
          return { kind: "archive", entry: c, store: this.#archiveStore };
        }
      }
    }
    for (const c of this.#manifest?.chunks ?? []) {
      if (c.last >= offset) return { kind: "chunk", entry: c, path: chunkPath(this.dir, c.sha256) };
    }
    const s = segs[0];
    return s ? { kind: "segment", info: s.info, layout: s.layout } : { kind: "end" };
  }

  #wakeReaders(): void {
    for (const r of this.#readers) r._wake();
  }

  /**
   * Starts a new segment at `offset`, above everything ever issued, so that no
   * offset is handed out twice (used by restore after failover).
   */
  async fence(offset: number): Promise<void> {
    await this.flush();
    if (offset <= this.#next) {
      throw new RangeError(`a fence must be above ${this.#next - 1}, got ${offset}`);
    }
    if (this.#active.writer.state.count > 0) {
      await this.roll();
      await this.flush();
    }
    const old = this.#active;
    // Say which empty segment the fence leaves behind before leaving it: a
    // crash before its removal below must not look like a damaged segment,
    // and a damaged segment must not look like a fence's leftover.
    const meta = (await readMeta(this.dir))?.meta;
    if (meta) {
      meta.fenced = [...(meta.fenced ?? []).slice(-7), old.seg.info.firstOffset];
      await writeCheckedJson(join(this.dir, META_FILE), meta);
    }
    const seg = newSegmentState(this.dir, this.streamId, this.name, offset, this.#opts);
    // Make the fenced segment first: a crash before the removal below leaves an
    // empty unsealed segment, which open removes.
    const file = await createSegmentFile(seg, this.#opts);
    old.file?.close();
    await Deno.remove(old.seg.info.path);
    await syncDir(this.dir);
    this.#segments.splice(this.#segments.indexOf(old.seg), 1, seg);
    const st = initialState();
    this.#active = { seg, writer: new SegmentWriter(seg.layout.interval, st), file, durable: st };
    this.#next = offset;
    this.#end = offset;
  }

  /** Flushes what is pending, closes the files and releases the lock. */
  async close(): Promise<void> {
    if (this.#closed) return;
    await this.flush();
    if (this.#worker && this.archiveUri && !this.#failed) {
      // A planned stop: seal what is pending so that it reaches the archive.
      await this.roll();
      await this.chunksSettled();
    }
    this.#closed = true;
    clearInterval(this.#timer);
    for (const r of this.#readers) r._wake();
    if (this.#worker) {
      // Let the worker finish what it was asked for this log, then let go.
      const closed = this.#wait((m) => m.type === "closed");
      this.#worker.post({
        type: "close",
        dir: this.dir,
        archiveWaitMs: this.archiveUri ? this.#opts.archiveWaitMs : 0,
      });
      await closed;
      this.#worker.release(this.dir);
      this.#worker = null;
    }
    this.#archiveStore?.close();
    try {
      if (this.#active.file && !this.#opts.fsync) await this.#active.file.syncData();
    } finally {
      this.#active.file?.close();
      this.#active.file = null;
      this.#lock.close();
    }
  }

  /** Whether the log is closed. */
  get closed(): boolean {
    return this.#closed;
  }
}

function initialState(): WriterState {
  return { physEnd: HEADER_BYTES, lastOffset: 0, lastTimeUs: 0, running: RUNNING_SEED, count: 0 };
}

function newSegmentState(
  dir: string,
  streamId: string,
  name: string,
  first: number,
  opts: ResolvedOptions,
): Segment {
  const createdUs = nowUs(opts.clock);
  const header: SegmentHeader = {
    version: FORMAT_VERSION,
    streamId,
    firstOffset: first,
    createdUs,
    beaconInterval: opts.beaconInterval,
    name,
  };
  return {
    header,
    layout: new Layout(opts.beaconInterval),
    info: {
      path: join(dir, segmentFileName(first)),
      firstOffset: first,
      count: 0,
      size: HEADER_BYTES,
      sealed: false,
      createdUs,
      firstTimeUs: 0,
      lastTimeUs: 0,
      beaconInterval: opts.beaconInterval,
    },
  };
}

async function createSegmentFile(seg: Segment, _opts: ResolvedOptions): Promise<Deno.FsFile> {
  const file = await Deno.open(seg.info.path, {
    read: true,
    write: true,
    create: true,
    truncate: true,
  });
  try {
    await writeAll(file, encodeHeader(seg.header));
    await file.syncData();
    await syncDir(join(seg.info.path, ".."));
  } catch (err) {
    file.close();
    throw err;
  }
  return file;
}

async function createSegment(
  dir: string,
  meta: LogMeta,
  first: number,
  opts: ResolvedOptions,
): Promise<Segment> {
  const seg = newSegmentState(dir, meta.stream_id, meta.name, first, opts);
  (await createSegmentFile(seg, opts)).close();
  return seg;
}

// Reads a segment's header and checks its records: all of them for sealed
// segments (and for the tail with verify "all"), from the last beacon for the
// tail otherwise. Cuts a torn tail off the last segment.
async function scanSegment(
  path: string,
  meta: LogMeta,
  checked: boolean,
  last: boolean,
  opts: ResolvedOptions,
): Promise<{ segment: Segment; state: WriterState } | null> {
  const file = await Deno.open(path, { read: true, write: last });
  try {
    const size = (await file.stat()).size;
    let header: SegmentHeader;
    try {
      header = await readHeader(file, path);
    } catch (err) {
      if (last && size < HEADER_BYTES + 1 && err instanceof LogCorruptError) {
        // Torn while being created: it never held a row. Make it anew.
        const first = parseSegmentFileName(path.split("/").pop()!)!;
        file.close();
        await Deno.remove(path);
        return {
          segment: await createSegment(join(path, ".."), meta, first, opts),
          state: initialState(),
        };
      }
      throw err;
    }
    if (header.streamId !== meta.stream_id) {
      const dir = join(path, "..");
      const agree = !checked && await otherHeadersAgree(dir, path, meta.stream_id);
      throw streamIdMismatch(dir, meta, checked, path, header.streamId, agree);
    }
    const expectName = parseSegmentFileName(path.split("/").pop()!);
    if (header.firstOffset !== expectName) {
      throw new LogCorruptError(
        path,
        24,
        `first offset ${header.firstOffset} does not match the file name`,
      );
    }
    const layout = new Layout(header.beaconInterval);
    const start = last && opts.verify === "tail"
      ? await seekStart(file, header, size, Number.MAX_SAFE_INTEGER)
      : segmentStart(header);
    const cursor = await scanSegmentRecords(file, path, header, {
      size,
      last,
      start,
      maxPayloadBytes: opts.maxPayloadBytes,
    });
    let { firstTimeUs } = cursor;
    const { lastTimeUs } = cursor;
    const sealed = cursor.endMark !== null;
    const count = cursor.nextOffset - header.firstOffset;
    const leftover = meta.fenced === undefined || meta.fenced.includes(header.firstOffset);
    if (!sealed && !last && count === 0 && cursor.physicalEnd === size && leftover) {
      // A fence made the next segment before removing this empty one.
      file.close();
      await Deno.remove(path);
      return null;
    }
    if (!sealed && !last) {
      throw new LogCorruptError(path, cursor.physicalEnd, "sealed segment has no end mark");
    }
    const end = cursor.physicalEnd;
    if (end < size) {
      if (sealed) {
        throw new LogCorruptError(path, end, `${size - end} bytes after the end mark`);
      }
      // The torn tail was never acknowledged: cut it off.
      await file.truncate(end);
      await file.syncData();
    }
    if (start.phys !== HEADER_BYTES && firstTimeUs === 0 && count > 0) {
      firstTimeUs = header.createdUs;
    }
    const segment: Segment = {
      header,
      layout,
      info: {
        path,
        firstOffset: header.firstOffset,
        count,
        size: end,
        sealed,
        createdUs: header.createdUs,
        firstTimeUs,
        lastTimeUs,
        beaconInterval: header.beaconInterval,
      },
    };
    const state: WriterState = {
      physEnd: end,
      lastOffset: count > 0 ? cursor.nextOffset - 1 : 0,
      lastTimeUs,
      running: cursor.running ?? RUNNING_SEED,
      count,
    };
    return { segment, state };
  } finally {
    try {
      file.close();
    } catch {
      // already closed above, before removing an empty segment
    }
  }
}
