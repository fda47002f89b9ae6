/**
 * A stream: a name, a schema, an optional log, and its subscribers.
 *
 * `send` validates a row, encodes it once (keys in schema order), appends the
 * bytes to the log and resolves with the offset once they are durable. The
 * frames of each commit are fanned out to every live subscriber right after
 * the sync, in offset order, before the senders are resolved.
 *
 * A stream is made by {@linkcode Stream.open} (durable with `root`),
 * {@linkcode Stream.ephemeral} or {@linkcode Stream.restore}; its options are
 * in `stream_options.ts`, its metrics in `stream_metrics.ts`.
 *
 * @module
 */

import { join } from "node:path";
import {
  CloseCode,
  type Compression,
  type FrameMode,
  type Greeting,
  type StreamHead,
} from "../client/wire.ts";
import {
  Log,
  type ProducerTag,
  type PublishResult,
  restoreLog,
  type RestoreReport,
} from "../log/mod.ts";
import { Logger } from "../common/logger.ts";
import { SCHEMA_FILE as HISTORY_FILE, type SchemaVersion } from "../log/schema_history.ts";
import { keepSchema } from "./kept_schema.ts";
import { RowError } from "./errors.ts";
import { sendJsonTo } from "./_send_json.ts";
import { liveFrame } from "./frames.ts";
import { zstdFrame } from "./compressed_frames.ts";
import type { FrameDictionary } from "./frame_dictionary.ts";
import { StreamDictionary } from "./stream_dictionary.ts";
import { greetingOf, streamHead } from "./stream_views.ts";
import type { Filter, Where } from "../client/filter.ts";
import { parseRows } from "./filtered_frames.ts";
import { FilterGroups } from "./filter_groups.ts";
import { FanoutPacer } from "./fanout_pacer.ts";
import { compileSchema } from "../schema/compile.ts";
import type { RowSchema } from "../schema/row_schema.ts";
import {
  type ReplayReader,
  type SharedFrames,
  Subscriber,
  type SubscriberHost,
  type SubscriberState,
} from "./subscriber.ts";
import type { ArrowFrameEncoder } from "../arrow/frame_encoder.ts";
import { GatedReader } from "./limits.ts";
import type { Registry } from "./metrics.ts";
import {
  archiveLogOptions,
  checkStreamName,
  checkStreamOptions,
  type StreamOptions,
  type StreamRestoreOptions,
  type StreamSettings,
} from "./stream_options.ts";
import { StreamMetrics, type StreamStats } from "./stream_metrics.ts";

export type { StreamStats } from "./stream_metrics.ts";

import type { StreamFollow, StreamServing } from "./stream_hosting.ts";
import { type ArchiveLag, archiveLagOf } from "./archive_lag.ts";
import { sharedFrames } from "./shared_frames.ts";
import { IcebergTable } from "../iceberg/table_link.ts";

export type { StreamFollow, StreamServing } from "./stream_hosting.ts";

/** The schema file kept in a stream's log folder. */
export const SCHEMA_FILE: string = HISTORY_FILE;

/** What the factories hand the (private) constructor: checked settings, the compiled schema, the log. */
interface Made {
  settings: StreamSettings;
  compiled: RowSchema;
  log: Log | null;
  ownsLog: boolean;
  /** The log's schema history (none: ephemeral). */
  versions?: SchemaVersion[];
}

const DEFAULT_LOGGER = new Logger({ level: "warn" });

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
  /**
   * Every version of the schema the log holds rows of, oldest first, each
   * with the first offset it applies from (`from` is null on an ephemeral
   * stream, which has one version). The last is {@linkcode Stream.schema}.
   */
  readonly schemaVersions: readonly { from: number | null; schema: Record<string, unknown> }[];
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

  readonly #ownsLog: boolean;
  readonly #metrics: StreamMetrics;
  readonly #live = new Set<Subscriber>();
  // `where=` subscribers, grouped by filter key.
  readonly #groups = new FilterGroups();
  readonly #pacer = new FanoutPacer<Subscriber>();
  readonly #all = new Set<Subscriber>();
  // The JSON of rows appended and not yet committed, in offset order. Frames
  // are built from it at fan-out, and only when a subscriber is live.
  #pending: string[] = [];
  #pendingHead = 0;
  #ephemeralBatch: string[] = [];
  #closed = false;
  readonly #host: SubscriberHost;
  #arrow: ArrowFrameEncoder | null = null;
  #encoders = {
    arrow: (frames: readonly string[]) => this.#arrow!.encodeFrames(frames),
    zstd: (text: string, kind: Compression) => this.#zstd(text, "live", kind),
  };
  #dictionary: StreamDictionary; // compress=zstd-dict (§16)
  #serving: StreamServing = { gate: null, logger: DEFAULT_LOGGER };
  /** @internal The follower replicating this stream (null: it takes rows from `send`). */
  _follow: StreamFollow | null = null;
  #iceberg: IcebergTable | null = null; // the log's Iceberg table (`iceberg` option)

  /** Use {@linkcode Stream.open}, {@linkcode Stream.ephemeral} or {@linkcode Stream.restore}. */
  private constructor(name: string, m: Made) {
    const { settings } = m;
    this.name = name;
    this.schema = m.compiled;
    this.schemaVersions = Object.freeze(
      (m.versions ?? [{ from: null, schema: m.compiled.json }]).map((v) => Object.freeze(v)),
    );
    this.log = m.log;
    this.#ownsLog = m.ownsLog;
    this.#dictionary = new StreamDictionary(name, m.log, () => this.#serving.logger);
    this.maxBacklog = settings.maxBacklog;
    this.maxReplay = settings.maxReplay;
    this.stallTimeoutMs = settings.stallTimeoutMs;
    this.maxSubscribers = settings.maxSubscribers;
    const a = settings.archive;
    this.archive = a === null ? null : typeof a === "string" ? a : a.uri;
    this.#metrics = new StreamMetrics(name, this);
    const metrics = this.#metrics;
    if (this.log) {
      this.log.onCommit = (first, end) => this.#committed(first, end);
      this.log.onDiscard = (from) => this.#discard(from);
      this.log.beforeCommit = () => this.#pacer.idle(); // the next commit waits for the fan-out
      // Rows adopted past the end (a follower) reach no commit: live subscribers read them.
      this.log.onFence = () => this.#all.forEach((sub) => sub._fromLog());
    }
    this.#host = {
      name,
      durable: this.log !== null,
      endOffset: () => this.log ? this.log.endOffset : 0,
      reader: (offset: number): ReplayReader => {
        const reader = this.log!.reader(offset);
        const gate = this.#serving.gate;
        return gate ? new GatedReader(reader, gate) : reader;
      },
      joinLive: (sub) => sub.filter === null ? this.#live.add(sub) : this.#groups.join(sub),
      leaveLive: (sub) => sub.filter === null ? this.#live.delete(sub) : this.#groups.leave(sub),
      gone: (sub) => {
        this.#all.delete(sub);
        if (sub.filter === null) this.#live.delete(sub);
        else this.#groups.remove(sub);
      },
      count: (frames, bytes, replay) => {
        metrics.framesSent.inc(frames);
        metrics.bytesSent.inc(bytes);
        metrics.replayRows.inc(replay);
      },
      dropped: (reason) => metrics.dropped(reason),
      failed: (err) => {
        // The details (file paths, say) stay in the server's log, not the client's.
        this.#serving.logger.error(
          "subscriber_failed",
          { stream: name, error: err instanceof Error ? err.message : String(err) },
          `subscriber on "${name}" failed: ${err}`,
        );
      },
      arrowEncoder: () => {
        if (!this.#arrow) throw new Error("frames=arrow before the encoder was loaded");
        return this.#arrow;
      },
      compress: (text, kind) => this.#zstd(text, "replay", kind),
    };
  }

  /**
   * Opens a stream: with `root`, its log at `ROOT/NAME` is created or
   * recovered; without, the stream is ephemeral. Every option is checked
   * first: a wrong type is a `TypeError`, a wrong value a `RangeError`.
   */
  static async open(name: string, options: StreamOptions): Promise<Stream> {
    // Check the name, options and schema before touching the disk.
    checkStreamName("Stream.open", name);
    const settings = checkStreamOptions("Stream.open", options);
    const compiled = compileSchema(options.schema);
    if (settings.root === undefined) {
      return new Stream(name, { settings, compiled, log: null, ownsLog: false });
    }
    const log = await Log.open(join(settings.root, name === "" ? "_" : name), {
      name,
      chunks: true,
      ...archiveLogOptions(settings),
      ...settings.logOptions,
    });
    return await Stream.#withSchema(name, settings, compiled, log);
  }

  // A durable stream on `log`, once its schema history takes `compiled` (else the log is closed).
  static async #withSchema(
    name: string,
    settings: StreamSettings,
    compiled: RowSchema,
    log: Log,
  ): Promise<Stream> {
    try {
      const versions = await keepSchema(log, compiled);
      const stream = new Stream(name, { settings, compiled, log, ownsLog: true, versions });
      const { iceberg } = settings;
      if (iceberg) stream.#iceberg = IcebergTable.start(log, name, settings.archive, iceberg);
      return stream;
    } catch (err) {
      await log.close();
      throw err;
    }
  }

  /**
   * Makes an ephemeral stream (no log: offsets are null, nothing is
   * replayable), without I/O. Options as for {@linkcode Stream.open}, without
   * `root`, `logOptions` or `archive`.
   *
   * @example
   * ```ts
   * import { Stream } from "./stream.ts";
   * const ticks = Stream.ephemeral("ticks", {
   *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
   * });
   * console.log(ticks.durable, await ticks.send({ v: 1 })); // false null
   * ```
   */
  static ephemeral(name: string, options: StreamOptions): Stream {
    checkStreamName("Stream.ephemeral", name);
    const settings = checkStreamOptions("Stream.ephemeral", options);
    for (const key of ["root", "logOptions", "archive"] as const) {
      if (options[key] !== undefined && options[key] !== null) {
        throw new TypeError(
          `Stream.ephemeral: options.${key} is for a durable stream (Stream.open with root)`,
        );
      }
    }
    const compiled = compileSchema(options.schema);
    return new Stream(name, { settings, compiled, log: null, ownsLog: false });
  }

  /**
   * Rebuilds the stream's log from its archive on a new machine and opens the
   * stream: the stream id is kept and offsets are fenced 2^20 above the
   * archived end, so none is ever reissued with other data. Refuses when
   * `ROOT/NAME` already holds a log.
   */
  static async restore(
    name: string,
    options: StreamRestoreOptions,
  ): Promise<{ stream: Stream; report: RestoreReport }> {
    checkStreamName("Stream.restore", name);
    const settings = checkStreamOptions("Stream.restore", options, true);
    const compiled = compileSchema(options.schema);
    const logOptions = { chunks: true, ...archiveLogOptions(settings), ...settings.logOptions };
    const { log, report } = await restoreLog(join(options.root, name === "" ? "_" : name), name, {
      archive: logOptions.archive!,
      hydrate: options.hydrate,
      logOptions,
      progress: options.progress,
    });
    return { stream: await Stream.#withSchema(name, settings, compiled, log), report };
  }

  /**
   * @internal Lends the stream what the server that serves it has: the gate
   * catching-up reads take turns through (`maxReplayReaders`) and the logger
   * failures go to. `null` gives them back (the defaults: no gate, a logger
   * at level "warn" on stderr).
   */
  _attach(serving: StreamServing | null): void {
    this.#serving = serving ?? { gate: null, logger: DEFAULT_LOGGER };
  }

  /** @internal The registry of this stream's series (the server includes it). */
  get _metrics(): Registry {
    return this.#metrics.registry;
  }

  /** @internal Counts a subscribe refused for `why` (a close reason's `why`, or a limit). */
  _refused(why: string): void {
    this.#metrics.refused(why);
  }

  /** @internal A snapshot of the stream's counters, for tests; `/_/metrics` serves them. */
  get stats(): StreamStats {
    return this.#metrics.snapshot();
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

  /** How far the archive lags the log (see `archiveLagOf`); null without an archive. */
  archiveLag(): ArchiveLag | null {
    return this.log && this.archive ? archiveLagOf(this.log) : null;
  }

  /** What `GET /{name}/head` serves. */
  head(): StreamHead {
    return streamHead(this, this.log, this._follow);
  }

  /**
   * @internal A follower's write: the primary's rows (their JSON) at the
   * primary's offsets, made durable, then fanned out through the normal
   * commit path (see `Log.appendAt`).
   */
  async _appendAt(offsets: readonly number[], jsons: readonly string[]): Promise<number> {
    try {
      return await this.log!.appendAt(offsets, jsons, (from, to) => {
        for (let i = from; i < to; i++) this.#pending.push(jsons[i]);
      });
    } catch (err) {
      // Nothing else appends to a replica: whatever was pending is gone.
      this.#pending = [];
      this.#pendingHead = 0;
      throw err;
    }
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
    if (this._follow) {
      throw new TypeError(`stream "${this.name}" is a follower's: it takes no rows`);
    }
    const problem = this.schema.validate(row);
    if (problem !== null) {
      this.#metrics.rowsRejected.inc();
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
    if (this._follow) {
      throw new TypeError(`stream "${this.name}" is a follower's: it takes no rows`);
    }
    const jsons: string[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const problem = this.schema.validate(rows[i]);
      if (problem !== null) {
        this.#metrics.rowsRejected.inc();
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

  /**
   * @internal Stores rows a network publisher sent, already validated and
   * encoded (`server/publish/`), in one commit, as `tag`'s sequence (see
   * `Log.publish`); they fan out like any commit. Durable streams only.
   */
  _publish(jsons: string[], tag: ProducerTag | null): PublishResult {
    if (this.#closed) throw new Deno.errors.BadResource(`stream "${this.name}" is closed`);
    const r = this.log!.publish(jsons, tag);
    if (r.status === "stored") {
      for (let i = 0; i < jsons.length; i++) {
        this.#pending.push(jsons[i]);
      }
    }
    return r;
  }

  /**
   * Stores rows given as JSON texts, one row a text, in order, each on its
   * own verdict (the ingest fast path, `IngestSink.sendJson`). A text that
   * is already the row's encoded form (`RowSchema.isEncoded`) is stored as
   * it is; any other is parsed, validated and encoded as `send` does. The
   * valid rows are stored in one commit (a row that may be too big for the
   * log is appended on its own, so that its refusal is its alone).
   * `refused` is null when every row was stored, else per text its refusal
   * — a `SyntaxError` for a text that is not JSON, or the
   * {@linkcode RowError} or `RangeError` that `send` would reject with — or
   * `undefined`; `durable` resolves once the stored rows are durable.
   *
   * @example
   * ```ts
   * import { Stream } from "./stream.ts";
   * const s = Stream.ephemeral("t", {
   *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
   * });
   * const { refused, durable } = s.sendJson(['{"v":1}', '{"v":"x"}', '{"v":']);
   * await durable;
   * console.log(Array.from(refused ?? [], (e) => e?.name)); // [ undefined, "RowError", "SyntaxError" ]
   * await s.close();
   * ```
   */
  sendJson(texts: readonly string[]): {
    refused: (Error | undefined)[] | null;
    durable: Promise<unknown>;
  } {
    if (this.#closed) throw new Deno.errors.BadResource(`stream "${this.name}" is closed`);
    const log = this.log;
    return sendJsonTo({
      name: this.name,
      schema: this.schema,
      log,
      stored: (jsons) => {
        if (log === null) { for (const json of jsons) this.#sendEphemeral(json); }
        // The array is ours: adopted whole when nothing is pending.
        else if (this.#pending.length === 0) this.#pending = jsons;
        else for (let i = 0; i < jsons.length; i++) this.#pending.push(jsons[i]);
      },
      refused: () => this.#metrics.rowsRejected.inc(),
    }, texts);
  }

  // An append the log refused at the call: a row too big (a RangeError,
  // thrown before anything is stored) counts among the rejected rows.
  #refused(err: unknown): never {
    if (err instanceof RangeError) this.#metrics.rowsRejected.inc();
    throw err;
  }

  #sendEphemeral(json: string): void {
    // Coalesce the rows sent in one turn into one fan-out, like a commit.
    if (this.#ephemeralBatch.length === 0) {
      queueMicrotask(() => {
        const jsons = this.#ephemeralBatch;
        this.#ephemeralBatch = [];
        this.#metrics.rowsAppended.inc(jsons.length);
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
    const m = this.#metrics;
    m.rowsAppended.inc(n);
    m.commits.inc();
    m.commitSeconds!.observe(this.log!.lastCommitMs / 1000);
    if (this.#live.size > 0 || this.#groups.live > 0) {
      this.#fanOut(pending.slice(head, head + n), first);
    }
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
    if ((this.#live.size === 0 && this.#groups.live === 0) || jsons.length === 0) return;
    // Parsed once per commit, only when a filtered subscriber is live.
    const rows = this.#groups.live > 0 ? parseRows(jsons) : null;
    const frames = jsons; // built in place: the array is this commit's own
    for (let i = 0; i < frames.length; i++) {
      frames[i] = liveFrame(first === null ? null : first + i, jsons[i]);
    }
    const end = first === null ? null : first + frames.length;
    const shared = this.#shared(frames);
    this.#pacer.fanOut(this.#live, frames, end, shared); // paced: see fanout_pacer.ts
    if (rows !== null) {
      this.#groups.fanOut(frames, rows, end, shared, (f) => this.#shared(f), this.#pacer);
    }
  }

  // Frames built once per mode on first use, shared by every subscriber handed `frames`.
  #shared(frames: readonly string[]): SharedFrames {
    return sharedFrames(frames, this.#encoders);
  }

  // compress= (§16): one zstd frame of `text` (with the dictionary for
  // zstd-dict: a subscriber gets that kind only once the dictionary exists), counted by path.
  #zstd(text: string, path: "live" | "replay", kind: Compression): Uint8Array {
    const out = kind === "zstd-dict" ? this.#dictionary.current!.compress(text) : zstdFrame(text);
    const m = this.#metrics.zstd[path];
    m.frames.inc();
    m.text.inc(text.length);
    m.zstd.inc(out.byteLength);
    return out;
  }

  /** compress=zstd-dict (§16): the stream's dictionary (see `StreamDictionary.get`). */
  dictionary(): Promise<FrameDictionary | null> {
    return this.#dictionary.get();
  }

  /** compress=zstd-dict (§16): the dictionary with `id`, if it is this stream's. */
  dictionaryById(id: string): FrameDictionary | null {
    return this.#dictionary.byId(id);
  }

  /** @internal Distinct `where=` filters with a subscriber, for tests and metrics. */
  get _filters(): number {
    return this.#groups.size;
  }

  /**
   * The Arrow encoder of `frames=arrow` subscribers, made (and apache-arrow
   * loaded) on first use. Throws `TypeError` when the schema cannot be framed
   * as Arrow (a column named `offset`).
   */
  async arrowEncoder(): Promise<ArrowFrameEncoder> {
    if (!this.#arrow) {
      const { ArrowFrameEncoder } = await import("../arrow/frame_encoder.ts");
      this.#arrow = new ArrowFrameEncoder(this.schema, { durable: this.durable });
    }
    return this.#arrow;
  }

  /**
   * @internal Starts serving a subscriber whose greeting was sent; with a
   * `where=` filter, it joins the group of that filter's key (sharing the
   * group's compiled instance).
   */
  _subscribe(
    socket: WebSocket,
    from: number,
    frames: FrameMode,
    filter: Filter | null = null,
    compress: Compression | null = null,
  ): Subscriber {
    const shared = filter === null ? null : this.#groups.add(filter);
    const sub = new Subscriber(socket, this.#host, from, {
      frames,
      maxBacklog: this.maxBacklog,
      stallTimeoutMs: this.stallTimeoutMs,
      filter: shared,
      ...(this.#serving.sendBudget ? { sendBudget: this.#serving.sendBudget } : {}),
      compress,
    });
    this.#all.add(sub);
    this.#metrics.subscribes.inc();
    sub.start();
    return sub;
  }

  /**
   * The greeting for a subscription starting at `from` (null: live), with
   * the `where=` filter as parsed (null: none).
   */
  greeting(from: number | null, frames: FrameMode, where: Where | null = null): Greeting {
    return greetingOf(this, from, frames, where);
  }

  /** Closes every subscriber with `code` (1001: going away). */
  closeSubscribers(code: number = CloseCode.GoingAway, reason = ""): void {
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
    this.closeSubscribers(CloseCode.GoingAway, "");
    await this.#iceberg?.close(30_000); // seals the tail and commits it, before the log closes
    if (this.log && this.#ownsLog) await this.log.close();
  }
}
