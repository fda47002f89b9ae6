/**
 * A stream: a name, a schema, an optional log, and its subscribers.
 *
 * `send` validates a row, encodes it once (keys in schema order), appends the
 * bytes to the log and resolves with the offset once they are durable. The
 * frames of each commit are fanned out to every live subscriber right after
 * the sync, in offset order, before the senders are resolved.
 *
 * @module
 */

import { join } from "node:path";
import {
  type FrameMode,
  type Greeting,
  isStreamName,
  PROTOCOL_VERSION,
  type StreamHead,
} from "../client/wire.ts";
import {
  type ArchiveOptions,
  Log,
  LogCorruptError,
  type LogOptions,
  type LogReader,
  restoreLog,
  type RestoreReport,
} from "../log/mod.ts";
import { readCheckedText, writeCheckedText } from "../log/meta_file.ts";
import { RowError } from "./errors.ts";
import { liveFrame } from "./frames.ts";
import { compileSchema, type RowSchema } from "./schema.ts";
import {
  type SharedFrames,
  Subscriber,
  type SubscriberHost,
  type SubscriberState,
} from "./subscriber.ts";
import type { ArrowFrameEncoder } from "./arrow.ts";
import { checkLimit, DEFAULT_MAX_SUBSCRIBERS, type Gate } from "./limits.ts";

/** Default `maxBacklog`: frames queued for one live subscriber. */
export const DEFAULT_MAX_BACKLOG = 8192;
/** Default `maxReplay`: rows a subscribe may ask to replay. */
export const DEFAULT_MAX_REPLAY = 100_000;
/** Default `stallTimeoutMs`. */
export const DEFAULT_STALL_TIMEOUT_MS = 30_000;

/** Options of {@linkcode Stream.open} and the `Stream` constructor. */
export interface StreamOptions {
  /** The JSON Schema of the rows (see docs/SPEC.md for what is accepted). */
  schema: Record<string, unknown>;
  /**
   * Folder holding the logs: the stream's log is `ROOT/NAME` (`ROOT/_` for the
   * unnamed stream). Without `root` (and without `log`) the stream is ephemeral.
   */
  root?: string;
  /** Options for the log opened under `root` (chunks are on unless `chunks: false`). */
  logOptions?: LogOptions;
  /** Frames queued for one live subscriber before it must catch up from the log. @default 8192 */
  maxBacklog?: number;
  /** Most rows a subscribe may ask to replay; `null`: no bound. @default 100000 */
  maxReplay?: number | null;
  /** Close a subscriber whose socket accepts nothing for this long. @default 30000 */
  stallTimeoutMs?: number;
  /**
   * Subscribers at once; one more is refused with close code 1013 ("try again
   * later") and no greeting.
   * @default 5000
   */
  maxSubscribers?: number;
  /**
   * Archive chunks and the manifest to S3: an `s3://bucket/prefix` URI, or
   * the URI with an endpoint and path-style addressing for S3-compatible
   * stores. Named (the URI only, never credentials) in greetings and `/head`.
   * @default null
   */
  archive?: string | ArchiveOptions | null;
  /** Serve offsets the local tier no longer holds from the archive. @default false */
  replayArchive?: boolean;
}

/** Counters a stream keeps for `/_/metrics`. */
export interface StreamStats {
  /** Rows made durable (or sent, on an ephemeral stream). */
  rowsAppended: number;
  /** Log commits. */
  commits: number;
  /** Commit durations (write + sync), ms: counts per bucket of {@linkcode COMMIT_BUCKETS_MS}. */
  commitBuckets: number[];
  /** Sum of commit durations, ms. */
  commitMsSum: number;
  /** Frames sent to subscribers. */
  framesSent: number;
  /** Bytes of frame text sent. */
  bytesSent: number;
  /** Rows sent from the log to catching-up subscribers. */
  replayRows: number;
  /** Rows refused by the schema. */
  rowsRejected: number;
  /** Subscribers dropped or demoted, by reason. */
  drops: Record<string, number>;
  /** Subscribes refused, by why. */
  refusals: Record<string, number>;
  /** Subscribes accepted. */
  subscribes: number;
}

/** Upper bounds (ms) of the commit-duration histogram buckets. */
export const COMMIT_BUCKETS_MS: readonly number[] = [
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  25,
  50,
  100,
  250,
  1000,
];

/** The schema file kept in a stream's log folder. */
export const SCHEMA_FILE = "schema.json";

/**
 * Keeps the stream's schema beside its log (`ROOT/NAME/schema.json`), so that
 * the log can be read (exported, inspected) without the server's flags. A log
 * that holds rows refuses a schema whose columns differ from the one its rows
 * were written with. The file's checksum is kept in `schema.json.crc32`
 * (see `log/meta_file.ts`): a damaged schema file of a log that holds rows
 * is refused with `LogCorruptError` naming it.
 */
async function keepSchema(log: Log, schema: RowSchema): Promise<void> {
  const path = join(log.dir, SCHEMA_FILE);
  const text = JSON.stringify(schema.json, null, 2) + "\n";
  let old: string | null = null;
  let checked = false;
  try {
    const kept = await readCheckedText(path);
    old = kept?.text ?? null;
    checked = kept?.checked ?? false;
  } catch (err) {
    // A damaged file matters only once rows were written under it.
    if (!(err instanceof LogCorruptError) || log.endOffset > log.firstOffset) throw err;
  }
  if (old === text && checked) return;
  if (old !== null && log.endOffset > log.firstOffset) {
    let before: string;
    try {
      before = JSON.stringify(compileSchema(JSON.parse(old)).columns);
    } catch {
      before = "";
    }
    const now = JSON.stringify(schema.columns);
    if (before && before !== now) {
      throw new TypeError(
        `stream "${log.name}": the schema's columns differ from those its log was written with ` +
          `(${path}); use a new stream name, or move the old log away`,
      );
    }
  }
  await writeCheckedText(path, text);
}

function archiveLogOptions(options: StreamOptions): LogOptions {
  const a = options.archive;
  if (!a) return {};
  return {
    archive: typeof a === "string" ? { uri: a } : a,
    replayArchive: options.replayArchive ?? false,
  };
}

function checkOptions(o: StreamOptions): void {
  const backlog = o.maxBacklog ?? DEFAULT_MAX_BACKLOG;
  if (!Number.isInteger(backlog) || backlog < 1) {
    throw new RangeError(`maxBacklog must be a positive integer, got ${backlog}`);
  }
  const replay = o.maxReplay === undefined ? DEFAULT_MAX_REPLAY : o.maxReplay;
  if (replay !== null && (!Number.isInteger(replay) || replay < 0)) {
    throw new RangeError(`maxReplay must be an integer >= 0 or null, got ${replay}`);
  }
  const stall = o.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
  if (!(stall > 0)) throw new RangeError(`stallTimeoutMs must be > 0, got ${stall}`);
  checkLimit("maxSubscribers", o.maxSubscribers ?? DEFAULT_MAX_SUBSCRIBERS, 1);
}

function checkName(name: string): void {
  if (!isStreamName(name)) {
    throw new RangeError(
      `invalid stream name ${
        JSON.stringify(name)
      }: 1-64 of A-Z a-z 0-9 . _ -, not starting with _ or .`,
    );
  }
}

/**
 * A named stream of rows with a schema, an optional durable log, and any
 * number of WebSocket subscribers.
 *
 * @example
 * ```ts
 * import { Stream } from "./stream.ts";
 * const trades = await Stream.open("trades", {
 *   root: await Deno.makeTempDir(),
 *   schema: {
 *     type: "object",
 *     properties: { price: { type: "number" }, side: { type: "integer", format: "int32" } },
 *     required: ["price", "side"],
 *   },
 * });
 * console.log(await trades.send({ price: 101.5, side: 1 })); // 1
 * await trades.close();
 * ```
 */
export class Stream {
  /** The stream name ("" for the unnamed stream). */
  readonly name: string;
  /** The compiled schema. */
  readonly schema: RowSchema;
  /** The log, or null for an ephemeral stream. */
  readonly log: Log | null;
  /** Frames queued per live subscriber before it catches up from the log. */
  readonly maxBacklog: number;
  /** Most rows a subscribe may replay (null: unbounded). */
  readonly maxReplay: number | null;
  /** Stall timeout in ms. */
  readonly stallTimeoutMs: number;
  /** Subscribers at once (one more is refused with 1013). */
  readonly maxSubscribers: number;
  /** The archive URI, or null. */
  readonly archive: string | null;
  /** Counters for metrics. */
  readonly stats: StreamStats = {
    rowsAppended: 0,
    commits: 0,
    commitBuckets: COMMIT_BUCKETS_MS.map(() => 0),
    commitMsSum: 0,
    framesSent: 0,
    bytesSent: 0,
    replayRows: 0,
    rowsRejected: 0,
    drops: {},
    refusals: {},
    subscribes: 0,
  };

  readonly #ownsLog: boolean;
  readonly #live = new Set<Subscriber>();
  readonly #all = new Set<Subscriber>();
  // The JSON of rows appended and not yet committed, in offset order. Frames
  // are built from it at fan-out, and only when a subscriber is live.
  #pending: string[] = [];
  #pendingHead = 0;
  #ephemeralBatch: string[] = [];
  #closed = false;
  readonly #host: SubscriberHost;
  #arrow: ArrowFrameEncoder | null = null;
  #replayGate: Gate | null = null;

  /**
   * Makes a stream without I/O: pass `log` for a durable stream over a log you
   * opened, or neither `log` nor `root` for an ephemeral one.
   */
  constructor(
    name: string,
    options: StreamOptions & { log?: Log | null; ownsLog?: boolean; compiled?: RowSchema },
  ) {
    checkName(name);
    this.name = name;
    this.schema = options.compiled ?? compileSchema(options.schema);
    this.log = options.log ?? null;
    this.#ownsLog = options.ownsLog ?? false;
    this.maxBacklog = options.maxBacklog ?? DEFAULT_MAX_BACKLOG;
    this.maxReplay = options.maxReplay === undefined ? DEFAULT_MAX_REPLAY : options.maxReplay;
    this.stallTimeoutMs = options.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
    this.maxSubscribers = options.maxSubscribers ?? DEFAULT_MAX_SUBSCRIBERS;
    const a = options.archive ?? null;
    this.archive = a === null ? null : typeof a === "string" ? a : a.uri;
    checkOptions(options);
    if (this.log) {
      this.log.onCommit = (first, end) => this.#committed(first, end);
      this.log.onDiscard = (from) => this.#discard(from);
    }
    this.#host = {
      name,
      durable: this.log !== null,
      endOffset: () => this.log ? this.log.endOffset : 0,
      reader: (offset: number): LogReader => this.#reader(offset),
      joinLive: (sub) => this.#live.add(sub),
      leaveLive: (sub) => this.#live.delete(sub),
      gone: (sub) => {
        this.#all.delete(sub);
        this.#live.delete(sub);
      },
      count: (frames, bytes, replay) => {
        this.stats.framesSent += frames;
        this.stats.bytesSent += bytes;
        this.stats.replayRows += replay;
      },
      dropped: (reason) => {
        this.stats.drops[reason] = (this.stats.drops[reason] ?? 0) + 1;
      },
      arrowEncoder: () => {
        if (!this.#arrow) throw new Error("frames=arrow before the encoder was loaded");
        return this.#arrow;
      },
    };
  }

  /**
   * Opens a stream: with `root`, its log at `ROOT/NAME` is created or
   * recovered; without, the stream is ephemeral.
   */
  static async open(name: string, options: StreamOptions): Promise<Stream> {
    // Check the name and schema before touching the disk.
    checkName(name);
    checkOptions(options);
    const compiled = compileSchema(options.schema);
    if (!options.root) return new Stream(name, { ...options, compiled });
    const log = await Log.open(join(options.root, name === "" ? "_" : name), {
      name,
      chunks: true,
      ...archiveLogOptions(options),
      ...options.logOptions,
    });
    try {
      await keepSchema(log, compiled);
      return new Stream(name, { ...options, log, ownsLog: true, compiled });
    } catch (err) {
      await log.close();
      throw err;
    }
  }

  /**
   * Rebuilds the stream's log from its archive on a new machine and opens the
   * stream: the stream id is kept and offsets are fenced 2^20 above the
   * archived end, so none is ever reissued with other data. Refuses when
   * `ROOT/NAME` already holds a log.
   */
  static async restore(
    name: string,
    options: StreamOptions & {
      root: string;
      archive: string | ArchiveOptions;
      hydrate?: boolean | number;
      progress?: (message: string) => void;
    },
  ): Promise<{ stream: Stream; report: RestoreReport }> {
    checkName(name);
    const compiled = compileSchema(options.schema);
    const logOptions = { chunks: true, ...archiveLogOptions(options), ...options.logOptions };
    const { log, report } = await restoreLog(join(options.root, name === "" ? "_" : name), name, {
      archive: logOptions.archive!,
      hydrate: options.hydrate,
      logOptions,
      progress: options.progress,
    });
    try {
      await keepSchema(log, compiled);
      return { stream: new Stream(name, { ...options, log, ownsLog: true, compiled }), report };
    } catch (err) {
      await log.close();
      throw err;
    }
  }

  /**
   * @internal Makes catching-up subscribers' log reads take turns through
   * `gate` (the server's `maxReplayReaders`); null: no gate.
   */
  _useReplayGate(gate: Gate | null): void {
    this.#replayGate = gate;
  }

  // A log reader whose reads each hold one of the gate's permits.
  #reader(offset: number): LogReader {
    const reader = this.log!.reader(offset);
    const gate = this.#replayGate;
    if (gate) {
      const read = reader.read.bind(reader);
      reader.read = (maxBytes?: number) => gate.run(() => read(maxBytes));
    }
    return reader;
  }

  /** Whether the stream has a log (its rows are replayable). */
  get durable(): boolean {
    return this.log !== null;
  }

  /** The log's durable end (next offset), or null when ephemeral. */
  get endOffset(): number | null {
    return this.log ? this.log.endOffset : null;
  }

  /** The log's stream id, or null when ephemeral. */
  get streamId(): string | null {
    return this.log?.streamId ?? null;
  }

  /** Subscribers connected now. */
  get subscribers(): number {
    return this.#all.size;
  }

  /** Subscribers by state. */
  subscriberStates(): Record<SubscriberState, number> {
    const out: Record<SubscriberState, number> = { catching_up: 0, live: 0, closed: 0 };
    for (const s of this.#all) out[s.state]++;
    return out;
  }

  /**
   * How far the archive lags the log: rows the log holds beyond the archive's
   * end, and the age of the oldest of them (0 when none).
   */
  archiveLag(): { rows: number; seconds: number; error: string | null } | null {
    const log = this.log;
    const st = log?.archiveState;
    if (!log || !this.archive) return null;
    const through = st?.through ?? 0;
    const rows = log.rowsBetween(through + 1, log.endOffset);
    let seconds = 0;
    if (rows > 0) {
      // The oldest row not archived: in the first local chunk or segment after `through`.
      const c = log.manifest?.chunks.find((x) => x.last > through);
      const firstUs = c?.first_ts ??
        log.segments().find((x) => x.count > 0 && x.firstOffset + x.count - 1 > through)
          ?.firstTimeUs ??
        0;
      if (firstUs) seconds = Math.max(0, (Date.now() * 1000 - firstUs) / 1e6);
    }
    return { rows, seconds, error: st?.lastError ?? null };
  }

  /** What `GET /{name}/head` serves. */
  head(): StreamHead {
    return {
      stream: this.name,
      stream_id: this.streamId,
      end_offset: this.endOffset,
      earliest: this.log?.earliest ?? null,
      durable: this.durable,
      subscribers: this.subscribers,
      schema: this.schema.json,
      archive: this.archive,
      ...(this.archive ? { archive_lag: this.archiveLag() } : {}),
    };
  }

  /**
   * Validates, stores and broadcasts one row. Resolves with its offset once it
   * is durable (null on an ephemeral stream); rejects with {@linkcode RowError}
   * when the schema refuses it (nothing is stored).
   */
  send(row: unknown): Promise<number | null> {
    try {
      return this.#send(row);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  #send(row: unknown): Promise<number | null> {
    if (this.#closed) throw new Deno.errors.BadResource(`stream "${this.name}" is closed`);
    const problem = this.schema.validate(row);
    if (problem !== null) {
      this.stats.rowsRejected++;
      throw new RowError(this.name, problem);
    }
    const json = this.schema.encode(row as Record<string, unknown>);
    const log = this.log;
    if (!log) {
      this.#sendEphemeral(json);
      return Promise.resolve(null);
    }
    let done: Promise<number>;
    try {
      done = log.append(json);
    } catch (err) {
      this.#refused(err);
    }
    this.#pending.push(json);
    return done;
  }

  /**
   * Validates every row, then stores them in one commit and broadcasts them.
   * If any row is refused, none is stored and the error names its index.
   */
  sendMany(rows: readonly unknown[]): Promise<(number | null)[]> {
    try {
      return this.#sendMany(rows);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async #sendMany(rows: readonly unknown[]): Promise<(number | null)[]> {
    if (this.#closed) throw new Deno.errors.BadResource(`stream "${this.name}" is closed`);
    const jsons: string[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const problem = this.schema.validate(rows[i]);
      if (problem !== null) {
        this.stats.rowsRejected++;
        throw new RowError(this.name, `row ${i}: ${problem}`);
      }
      jsons[i] = this.schema.encode(rows[i] as Record<string, unknown>);
    }
    const log = this.log;
    if (!log) {
      for (const j of jsons) this.#sendEphemeral(j);
      return jsons.map(() => null);
    }
    const first = log.nextOffset;
    let done: Promise<number>;
    try {
      done = log.appendMany(jsons);
    } catch (err) {
      this.#refused(err);
    }
    for (let i = 0; i < jsons.length; i++) this.#pending.push(jsons[i]);
    await done;
    return jsons.map((_, i) => first + i);
  }

  // An append the log refused at the call: a row too big (a RangeError,
  // thrown before anything is stored) counts among the rejected rows.
  #refused(err: unknown): never {
    if (err instanceof RangeError) this.stats.rowsRejected++;
    throw err;
  }

  #sendEphemeral(json: string): void {
    // Coalesce the rows sent in one turn into one fan-out, like a commit.
    if (this.#ephemeralBatch.length === 0) {
      queueMicrotask(() => {
        const jsons = this.#ephemeralBatch;
        this.#ephemeralBatch = [];
        this.stats.rowsAppended += jsons.length;
        this.#fanOut(jsons, null);
      });
    }
    this.#ephemeralBatch.push(json);
  }

  #committed(first: number, end: number): void {
    const n = end - first;
    const pending = this.#pending;
    const head = this.#pendingHead;
    this.#pendingHead += n;
    if (this.#pendingHead === this.#pending.length) {
      this.#pending = [];
      this.#pendingHead = 0;
    } else if (this.#pendingHead > 65536) {
      this.#pending = this.#pending.slice(this.#pendingHead);
      this.#pendingHead = 0;
    }
    const st = this.stats;
    st.rowsAppended += n;
    st.commits++;
    const ms = this.log!.lastCommitMs;
    st.commitMsSum += ms;
    let b = 0;
    while (b < COMMIT_BUCKETS_MS.length && ms > COMMIT_BUCKETS_MS[b]) b++;
    if (b < COMMIT_BUCKETS_MS.length) st.commitBuckets[b]++;
    if (this.#live.size > 0) this.#fanOut(pending.slice(head, head + n), first);
  }

  // A failed write dropped the appends from `from` on: forget their frames.
  #discard(from: number): void {
    const keep = from - this.log!.endOffset;
    this.#pending = this.#pending.slice(this.#pendingHead, this.#pendingHead + Math.max(0, keep));
    this.#pendingHead = 0;
  }

  // Sends rows (their JSON; offsets from `first`, null when ephemeral) to
  // every live subscriber, building their frames only when one is live.
  #fanOut(jsons: string[], first: number | null): void {
    if (this.#live.size === 0 || jsons.length === 0) return;
    const frames = jsons; // built in place: the array is this commit's own
    for (let i = 0; i < frames.length; i++) {
      frames[i] = liveFrame(first === null ? null : first + i, jsons[i]);
    }
    let joined: string | null = null;
    let arrow: Uint8Array | null = null;
    const shared: SharedFrames = {
      joined: () => (joined ??= frames.join("\n")),
      arrow: () => (arrow ??= this.#arrow!.encodeFrames(frames)),
    };
    for (const sub of this.#live) sub.push(frames, first, shared);
  }

  /**
   * The Arrow encoder of `frames=arrow` subscribers, made (and apache-arrow
   * loaded) on first use. Throws `TypeError` when the schema cannot be framed
   * as Arrow (a column named `offset`).
   */
  async arrowEncoder(): Promise<ArrowFrameEncoder> {
    if (!this.#arrow) {
      const { ArrowFrameEncoder } = await import("./arrow.ts");
      this.#arrow = new ArrowFrameEncoder(this.schema, { durable: this.durable });
    }
    return this.#arrow;
  }

  /** @internal Starts serving a subscriber whose greeting was sent. */
  _subscribe(socket: WebSocket, from: number, frames: FrameMode): Subscriber {
    const sub = new Subscriber(socket, this.#host, from, {
      frames,
      maxBacklog: this.maxBacklog,
      stallTimeoutMs: this.stallTimeoutMs,
    });
    this.#all.add(sub);
    this.stats.subscribes++;
    sub.start();
    return sub;
  }

  /** The greeting for a subscription starting at `from` (null: live). */
  greeting(from: number | null, frames: "single" | "batch" | "arrow"): Greeting {
    const end = this.endOffset;
    return {
      streamcast: PROTOCOL_VERSION,
      stream: this.name,
      stream_id: this.streamId,
      end_offset: end,
      replay: from !== null && end !== null && from < end ? [from, end] : null,
      log: this.log ? { name: this.name, archive: this.archive } : null,
      durable: this.durable,
      schema: this.schema.json,
      frames,
    };
  }

  /** Closes every subscriber with `code` (1001: going away). */
  closeSubscribers(code = 1001, reason = ""): void {
    for (const s of [...this.#all]) s.close(code, reason);
  }

  /**
   * Closes subscribers with 1001, waits for pending appends, and closes the log
   * if the stream opened it.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.log) await this.log.flush();
    this.closeSubscribers(1001, "");
    if (this.log && this.#ownsLog) await this.log.close();
  }
}
