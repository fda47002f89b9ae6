/**
 * A stream: a name, a schema, an optional log, and its subscribers.
 *
 * Every row, whichever way it comes (`send`, `sendMany`, `sendJson`, a
 * network publish), takes the same path: the stream must be open and take
 * rows (not a mirror's replica); the row is validated and encoded once
 * (`row_encoder.ts`: keys in schema order, the bytes stored and sent) and
 * checked against the log's row limit; it is appended (`appender.ts`), and
 * once the log has made it durable the commit's frames are fanned out to
 * every live subscriber (`../fanout/fanout.ts`), in offset order, before the
 * senders are resolved.
 *
 * A stream is made by {@linkcode Stream.open} (durable with `root`),
 * {@linkcode Stream.ephemeral} or {@linkcode Stream.restore}; its options are
 * in `stream_options.ts`, its metrics in `stream_metrics.ts`, its greeting
 * and head in `views.ts`. What the server's parts do with it beyond its
 * public API (a network publish, a mirror's and a cluster follower's
 * writes, a subscriber's start, its series) goes through
 * {@linkcode streamInside}; the role it plays where it is served is not the
 * stream's (`../role.ts`).
 *
 * @module
 */

import { join } from "node:path";
import type { Compression, FrameMode, Greeting, StreamHead } from "../../wire/subscribe.ts";
import { CloseCode } from "../../wire/close_reason.ts";
import type { Filter, Where } from "../../wire/filter.ts";
import {
  Log,
  type ProducerTag,
  type PublishResult,
  restoreLog,
  type RestoreReport,
} from "../../log/mod.ts";
import type { ReplicaCommit } from "../../log/replica/replication.ts";
import { SCHEMA_FILE as HISTORY_FILE, type SchemaVersion } from "../../log/schema_history.ts";
import { compileSchema } from "../../schema/compile.ts";
import type { RowSchema } from "../../schema/row_schema.ts";
import type { ArrowFrameEncoder } from "../../arrow/frame_encoder.ts";
import { IcebergTable } from "../../iceberg/table_link.ts";
import type { FrameDictionary } from "../frames/frame_dictionary.ts";
import { StreamFrames } from "../frames/stream_frames.ts";
import { Fanout } from "../fanout/fanout.ts";
import { type Serving, UNSERVED } from "../fanout/serving.ts";
import type { Subscriber, SubscriberState } from "../fanout/subscriber.ts";
import type { Registry } from "../metrics.ts";
import type { SessionSocket } from "../socket.ts";
import { Logger } from "../../common/logger.ts";
import { isNoSpace } from "../../common/free_space.ts";
import { DiskFullError, DiskGate } from "./disk_gate.ts";
import { Appender } from "./appender.ts";
import { type ArchiveLag, archiveLagOf } from "./archive_lag.ts";
import { keepSchema } from "./kept_schema.ts";
import { RowEncoder, type RowRefusal } from "./row_encoder.ts";
import { RowError, RowsRefusedError } from "./row_error.ts";
import { StreamMetrics, type StreamStats } from "./stream_metrics.ts";
import {
  archiveLogOptions,
  checkStreamName,
  checkStreamOptions,
  type StreamOptions,
  type StreamRestoreOptions,
  type StreamSettings,
} from "./stream_options.ts";
import { greetingOf, headOf, retentionOf } from "./views.ts";
import { KeyColumns } from "./key_columns.ts";
import { type KeyEntry, KeyIndex, type KeySnapshot } from "./key_index.ts";
import { KeyKeeper } from "./key_keeper.ts";

export type { StreamStats } from "./stream_metrics.ts";

/** The schema file kept in a stream's log folder. */
export const SCHEMA_FILE: string = HISTORY_FILE;

/**
 * What the server's parts do with a stream beyond its public API, through
 * {@linkcode streamInside}: a network publish (`../publish/`), a mirror's
 * and a cluster follower's writes (`../mirror/`, `../member/`), a
 * subscriber's start and a refused subscribe (the subscribe session), and
 * the stream's series and Iceberg table.
 */
export interface StreamInside {
  /**
   * Stores rows a network publisher sent, in one commit, as `tag`'s
   * sequence, once each row took the row path; what the log did with them
   * (see `Log.publish`). The first row refused refuses them all: throws
   * {@linkcode RowsRefusedError}. Stored rows fan out like any commit.
   * Durable streams only.
   */
  publish(rows: readonly unknown[], tag: ProducerTag | null): PublishResult;
  /**
   * A mirror's write: the primary's rows (their JSON) at the primary's
   * offsets, made durable, then fanned out through the normal commit path
   * (see `Log.appendAt`).
   */
  appendAt(offsets: readonly number[], jsons: readonly string[]): Promise<number>;
  /**
   * A cluster follower's write: the leader's commit as it made it (see
   * `Replication.appendCommit`), fanned out once the cluster commits it.
   */
  appendCommit(commit: ReplicaCommit): Promise<number>;
  /**
   * Starts serving a subscriber whose greeting was sent, from offset `from`;
   * with a `where=` filter, it joins the group of that filter's key;
   * `serving`: what the server starting it gives it (its replay gate,
   * logger, send buffer).
   */
  subscribe(
    socket: SessionSocket,
    from: number,
    frames: FrameMode,
    filter?: Filter | null,
    compress?: Compression | null,
    serving?: Serving,
    snapshot?: readonly string[] | null,
  ): Subscriber;
  /** Counts a subscribe refused for `why` (a close reason's `why`, or a limit). */
  subscribeRefused(why: string): void;
  /** The registry of the stream's series (the server includes it; a mirror and a member add theirs). */
  readonly metrics: Registry;
  /** Distinct `where=` filters with a subscriber. */
  readonly filters: number;
  /** The stream's Iceberg table (null: none, or kept by a cluster's leader). */
  readonly iceberg: IcebergTable | null;
}

let insideOf: (stream: Stream) => StreamInside;

/**
 * The inside of `stream` (see {@linkcode StreamInside}): for the server's
 * parts, not its users.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Stream, streamInside } from "./stream.ts";
 * const s = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * equal(streamInside(s).filters, 0);
 * ```
 */
export function streamInside(stream: Stream): StreamInside {
  return insideOf(stream);
}

/** What the factories hand the (private) constructor: checked settings, the compiled schema, the log. */
interface Made {
  settings: StreamSettings;
  compiled: RowSchema;
  log: Log | null;
  ownsLog: boolean;
  /** The log's schema history (none: ephemeral). */
  versions?: SchemaVersion[];
  /** A keyed stream's key columns (none: not keyed). */
  key?: KeyColumns;
}

/**
 * A named stream of rows with a schema, an optional durable log, and any
 * number of WebSocket subscribers.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Stream } from "./stream.ts";
 * const root = await Deno.makeTempDir();
 * const trades = await Stream.open("trades", {
 *   root,
 *   schema: {
 *     type: "object",
 *     properties: { price: { type: "number" }, side: { type: "integer", format: "int32" } },
 *     required: ["price", "side"],
 *   },
 * });
 * equal(await trades.send({ price: 101.5, side: 1 }), 1);
 * equal(trades.endOffset, 2);
 * await trades.close();
 * await Deno.remove(root, { recursive: true });
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
  readonly #rows: RowEncoder;
  readonly #frames: StreamFrames;
  readonly #fanout: Fanout;
  readonly #appender: Appender;
  readonly #keys: KeyKeeper | null;
  readonly #disk: DiskGate | null;
  #iceberg: IcebergTable | null = null; // the log's Iceberg table (`iceberg` option)
  #closed = false;
  readonly #inside: StreamInside;

  static {
    insideOf = (stream) => stream.#inside;
  }

  /** Use {@linkcode Stream.open}, {@linkcode Stream.ephemeral} or {@linkcode Stream.restore}. */
  private constructor(name: string, m: Made) {
    const { settings, log } = m;
    this.name = name;
    this.schema = m.compiled;
    this.schemaVersions = Object.freeze(
      (m.versions ?? [{ from: null, schema: m.compiled.json }]).map((v) => Object.freeze(v)),
    );
    this.log = log;
    this.#ownsLog = m.ownsLog;
    this.maxBacklog = settings.maxBacklog;
    this.maxReplay = settings.maxReplay;
    this.stallTimeoutMs = settings.stallTimeoutMs;
    this.maxSubscribers = settings.maxSubscribers;
    const a = settings.archive;
    this.archive = a === null ? null : typeof a === "string" ? a : a.uri;
    this.#disk = log === null ? null : diskGateOf(name, log, settings);
    const source = {
      subscriberStates: () => this.subscriberStates(),
      get endOffset() {
        return log ? log.endOffset : null;
      },
      get diskFull() {
        return disk?.full ?? null;
      },
      history: () => ({
        bytes: log ? retentionOf(log).bytes : 0,
        droppedRows: log?.chunks.droppedRows ?? 0,
      }),
    };
    const disk = this.#disk;
    const metrics = this.#metrics = new StreamMetrics(name, source);
    this.#rows = new RowEncoder(
      name,
      this.schema,
      log?.maxPayloadBytes ?? Infinity,
      metrics.rowsRejected,
    );
    this.#frames = new StreamFrames(name, this.schema, log, metrics.zstd);
    this.#fanout = new Fanout({
      name,
      log,
      counts: metrics,
      encoders: this.#frames,
      maxBacklog: this.maxBacklog,
      stallTimeoutMs: this.stallTimeoutMs,
    });
    this.#keys = m.key && log ? this.#keyKeeper(log, m.key, settings.maxKeys) : null;
    this.#appender = new Appender(log, this.#fanout, metrics, this.#keys, (err) => {
      if (isNoSpace(err)) this.#disk?.noSpace(err);
    });
    this.#inside = this.#makeInside();
  }

  // A keyed stream's index and its keeper; a new key refused past the
  // limit is counted, and warned of once.
  #keyKeeper(log: Log, key: KeyColumns, maxKeys: number): KeyKeeper {
    let refused: { inc(): void } | null = null;
    const index = new KeyIndex(key, maxKeys, log.firstOffset, (first) => {
      refused!.inc();
      if (first) {
        log.logger.warn("too_many_keys", {
          stream: this.name,
          max_keys: maxKeys,
          detail: "new keys are not added; snapshots are refused",
        });
      }
    });
    refused = this.#metrics.keyed(() => index.size);
    return new KeyKeeper(log, index);
  }

  // The stream's inside (see StreamInside), made once all of it exists.
  #makeInside(): StreamInside {
    const fanout = this.#fanout;
    const metrics = this.#metrics;
    const iceberg = () => this.#iceberg;
    return {
      publish: (rows, tag) => {
        try {
          this.#takingRows();
        } catch (err) {
          // Nothing of it is stored: the producer's later seqs must not be either, or the
          // frames pipelined behind it would leave a hole where it was.
          if (err instanceof DiskFullError && tag !== null) {
            this.log?.producers.refused(tag.producer, tag.seq);
          }
          throw err;
        }
        const jsons = this.#rows.encodeAll(rows);
        if (!Array.isArray(jsons)) {
          const r = jsons.refusal;
          throw new RowsRefusedError(jsons.index, r instanceof RowError ? r.detail : r.message);
        }
        return this.#appender.publish(jsons, tag);
      },
      appendAt: (offsets, jsons) => this.#appender.appendAt(offsets, jsons),
      appendCommit: (commit) => this.#appender.appendCommit(commit),
      subscribe: (
        socket,
        from,
        frames,
        filter = null,
        compress = null,
        serving = UNSERVED,
        snapshot = null,
      ) => fanout.subscribe(socket, from, { frames, filter, compress, serving, snapshot }),
      subscribeRefused: (why) => metrics.refused(why),
      metrics: metrics.registry,
      get filters() {
        return fanout.filters;
      },
      get iceberg() {
        return iceberg();
      },
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
      const key = settings.key ? KeyColumns.of(compiled, settings.key) : undefined;
      const stream = new Stream(name, { settings, compiled, log, ownsLog: true, versions, key });
      await stream.#keys?.start();
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
   * import { equal } from "node:assert/strict";
   * import { Stream } from "./stream.ts";
   * const ticks = Stream.ephemeral("ticks", {
   *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
   * });
   * equal(ticks.durable, false);
   * equal(await ticks.send({ v: 1 }), null);
   * ```
   */
  static ephemeral(name: string, options: StreamOptions): Stream {
    checkStreamName("Stream.ephemeral", name);
    const settings = checkStreamOptions("Stream.ephemeral", options);
    for (const key of ["root", "logOptions", "archive", "key"] as const) {
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

  /** A keyed stream's key columns (`key` option), or null. */
  get key(): readonly string[] | null {
    return this.#keys?.index.columns.names ?? null;
  }

  /** Keys a keyed stream keeps now (null: not keyed). */
  get keys(): number | null {
    return this.#keys?.index.size ?? null;
  }

  /**
   * A keyed stream's snapshot: the latest row of every key that `filter`
   * matches (null: every key) below `end`, in offset order, as
   * `[offset,row]` lines; `end` is where the rows after it start. Null when
   * the stream is not keyed; `"too_many_keys"` when it kept no new key past
   * its `maxKeys` (the snapshot would miss keys).
   *
   * @example
   * ```ts
   * import { deepStrictEqual } from "node:assert/strict";
   * import { Stream } from "./stream.ts";
   * const root = await Deno.makeTempDir();
   * const s = await Stream.open("px", {
   *   root,
   *   schema: { type: "object", properties: { sym: { type: "string" }, px: { type: "number" } }, required: ["sym", "px"] },
   *   key: ["sym"],
   * });
   * await s.sendMany([{ sym: "a", px: 1 }, { sym: "b", px: 2 }, { sym: "a", px: 3 }]);
   * deepStrictEqual(s.snapshot(), { end: 4, lines: ['[2,{"sym":"b","px":2}]', '[3,{"sym":"a","px":3}]'] });
   * await s.close();
   * await Deno.remove(root, { recursive: true });
   * ```
   */
  snapshot(filter: Filter | null = null): KeySnapshot | "too_many_keys" | null {
    const index = this.#keys?.index;
    if (!index) return null;
    if (index.full) return "too_many_keys";
    return index.snapshot(filter);
  }

  /**
   * A keyed stream's latest row of the key with `values` (one per key
   * column, in order, as text) as of `end`: `entry` undefined when there is
   * none; `problem` saying which value does not fit its column and why (or
   * that there are too many or too few). Null when the stream is not keyed.
   */
  latest(
    values: readonly string[],
  ): { entry: KeyEntry | undefined; end: number } | { problem: string } | null {
    const index = this.#keys?.index;
    if (!index) return null;
    const problem = index.columns.problemWith(values);
    if (problem !== null) return { problem };
    return { entry: index.get(index.columns.keyOfValues(values)!), end: index.end };
  }

  /** Subscribers connected now. */
  get subscribers(): number {
    return this.#fanout.size;
  }

  /** Subscribers by state. */
  subscriberStates(): Record<SubscriberState, number> {
    return this.#fanout.states();
  }

  /** How far the archive lags the log (see `archiveLagOf`); null without an archive. */
  archiveLag(): ArchiveLag | null {
    return this.log && this.archive ? archiveLagOf(this.log) : null;
  }

  /**
   * What `GET /{name}/head` serves (see `views.ts`); `publish`: whether the
   * serving server takes rows for it over the publish routes; `role`: the
   * fields the role it is served in adds (`../role.ts`).
   */
  head(publish = false, role: Record<string, unknown> = {}): StreamHead {
    const index = this.#keys?.index;
    const keyed = index ? { key: index.columns.names, keys: index.size } : {};
    return headOf(this, publish, { ...this.#iceberg?.head(), ...keyed, ...role });
  }

  /**
   * The greeting for a subscription starting at `from` (null: live), with
   * the `where=` filter as parsed (null: none).
   */
  greeting(from: number | null, frames: FrameMode, where: Where | null = null): Greeting {
    return greetingOf(this, from, frames, where);
  }

  /**
   * Why the stream takes no rows now because its disk is full (a failed
   * write, or free space under `minFreeBytes`), or null while it takes them
   * (always on an ephemeral stream). It tries again every second.
   */
  get diskFull(): string | null {
    return this.#disk?.full ?? null;
  }

  /**
   * Resolves once the stream takes rows: at once unless its disk is full,
   * else when the space is back (or the stream closes).
   */
  ready(): Promise<void> {
    return this.#disk?.ready() ?? Promise.resolve();
  }

  // The one check before any row is taken: the stream is open, not a
  // mirror's replica, and its disk has room (else DiskFullError).
  #takingRows(): void {
    if (this.#closed) throw new Deno.errors.BadResource(`stream "${this.name}" is closed`);
    if (this.log?.replica) {
      throw new TypeError(`stream "${this.name}" is a mirror's: it takes no rows`);
    }
    this.#disk?.admit();
  }

  /**
   * Validates, stores and broadcasts one row. Resolves with its offset once it
   * is durable (null on an ephemeral stream); rejects with {@linkcode RowError}
   * when the schema refuses it, or `RangeError` when it is over the log's row
   * limit (nothing is stored).
   */
  send(row: unknown): Promise<number | null> {
    try {
      this.#takingRows();
      const json = this.#rows.encode(row);
      if (typeof json !== "string") throw json;
      return this.#appender.append([json]);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Validates every row, then stores them in one commit and broadcasts them.
   * If any row is refused, none is stored and the error names its index.
   */
  async sendMany(rows: readonly unknown[]): Promise<(number | null)[]> {
    this.#takingRows();
    const jsons = this.#rows.encodeAll(rows);
    if (!Array.isArray(jsons)) throw indexed(this.name, jsons.index, jsons.refusal);
    const n = jsons.length;
    const first = await this.#appender.append(jsons);
    return Array.from({ length: n }, (_, i) => first === null ? null : first + i);
  }

  /**
   * Stores rows given as JSON texts, one row a text, in order, each on its
   * own verdict (the ingest fast path, `IngestSink.sendJson`). A text that
   * is already the row's encoded form (`RowSchema.isEncoded`) is stored as
   * it is; any other is parsed, validated and encoded as `send` does. The
   * valid rows are stored in one commit. `refused` is null when every row
   * was stored, else per text its refusal — a `SyntaxError` for a text that
   * is not JSON, or the {@linkcode RowError} or `RangeError` that `send`
   * would reject with — or `undefined`; `durable` resolves once the stored
   * rows are durable.
   *
   * @example
   * ```ts
   * import { deepStrictEqual } from "node:assert/strict";
   * import { Stream } from "./stream.ts";
   * const s = Stream.ephemeral("t", {
   *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
   * });
   * const { refused, durable } = s.sendJson(['{"v":1}', '{"v":"x"}', '{"v":']);
   * await durable;
   * deepStrictEqual(Array.from(refused ?? [], (e) => e?.name), [undefined, "RowError", "SyntaxError"]);
   * await s.close();
   * ```
   */
  sendJson(texts: readonly string[]): {
    refused: (Error | undefined)[] | null;
    durable: Promise<unknown>;
  } {
    this.#takingRows();
    let refused: (Error | undefined)[] | null = null;
    const jsons: string[] = [];
    for (let i = 0; i < texts.length; i++) {
      const json = this.#rows.encodeText(texts[i]);
      if (typeof json === "string") jsons.push(json);
      else (refused ??= new Array(texts.length))[i] = json;
    }
    let durable: Promise<unknown>;
    try {
      durable = jsons.length === 0 ? Promise.resolve() : this.#appender.append(jsons);
    } catch (err) {
      // The log refused appends (failed or closed): the batch fails.
      durable = Promise.reject(err);
    }
    return { refused, durable };
  }

  /**
   * compress=zstd-dict: the stream's dictionary (see `StreamDictionary.get`);
   * `logger` takes the warning when libzstd is missing.
   */
  dictionary(logger: Logger = UNSERVED.logger): Promise<FrameDictionary | null> {
    return this.#frames.dictionary(logger);
  }

  /** compress=zstd-dict: the dictionary with `id`, if it is this stream's. */
  dictionaryById(id: string): FrameDictionary | null {
    return this.#frames.dictionaryById(id);
  }

  /**
   * The Arrow encoder of `frames=arrow` subscribers, made (and apache-arrow
   * loaded) on first use. Throws `TypeError` when the schema cannot be framed
   * as Arrow (a column named `offset`).
   */
  arrowEncoder(): Promise<ArrowFrameEncoder> {
    return this.#frames.loadArrow();
  }

  /** Closes every subscriber with `code` (1001: going away). */
  closeSubscribers(code: number = CloseCode.GoingAway, reason = ""): void {
    this.#fanout.close(code, reason);
  }

  /**
   * Closes subscribers with 1001, waits for pending appends, and closes the log
   * if the stream opened it.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#disk?.close();
    if (this.log) await this.log.flush();
    this.closeSubscribers(CloseCode.GoingAway, "");
    await this.#iceberg?.close(30_000); // seals the tail and commits it, before the log closes
    await this.#keys?.close();
    if (this.log && this.#ownsLog) await this.log.close();
  }
}

// The disk gate of a durable stream (see disk_gate.ts), telling the log's
// logger when the stream stops taking rows and when it takes them again.
function diskGateOf(name: string, log: Log, settings: StreamSettings): DiskGate {
  const logger = settings.logOptions?.logger ?? new Logger();
  return new DiskGate(name, log.dir, {
    minFreeBytes: settings.minFreeBytes,
    onChange: (detail) => {
      if (detail !== null) {
        logger.warn(
          "disk_full",
          { stream: name, detail },
          `streamcast: stream "${name}" takes no rows: its disk is full (${detail}); ` +
            "trying again every second",
        );
      } else {
        logger.info(
          "disk_ok",
          { stream: name },
          `streamcast: stream "${name}" takes rows again: its disk has room`,
        );
      }
    },
  });
}

// The refusal of one of several rows, naming its index.
function indexed(stream: string, index: number, refusal: RowRefusal): Error {
  if (refusal instanceof RowError) return new RowError(stream, `row ${index}: ${refusal.detail}`);
  return new RangeError(`row ${index}: ${refusal.message}`);
}
