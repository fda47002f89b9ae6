/**
 * A mirror, the read replica `serve --follow NAME=URL` runs: keeps a replica
 * of another server's stream (the primary's, or another mirror's) and serves
 * it like its own (docs/SPEC.md §10). A cluster's non-leading node is a
 * follower, not a mirror: that is `cluster/` and `server/member/`.
 *
 * - The replica has the primary's `stream_id`, offsets and bytes. Sealed
 *   history is the primary's own chunks, fetched over HTTP and checked
 *   against their SHA-256 (`_fetch_history.ts`); the tail is one batched
 *   subscription from the replica's end (`_tail.ts`), each frame made durable
 *   locally, then fanned out through the stream's normal commit path.
 * - States: `catching_up` (behind the primary's end seen at connect), `live`,
 *   `reconnecting` (the primary is away: retried with backoff while the
 *   replica keeps serving), `stopped` (the primary's `stream_id` changed: it
 *   is never mixed in; the replica keeps serving what it holds).
 * - Restart (also after SIGKILL) resumes from the replica's own log: at most
 *   the rows of a frame not yet durable are fetched again.
 *
 * @module
 */

import { join } from "node:path";
import type { Greeting, StreamHead } from "../../wire/subscribe.ts";
import { fetchHead } from "../../client/head.ts";
import { backoffDelay, sleep } from "../../common/backoff.ts";
import { Logger } from "../../common/logger.ts";
import type { LogOptions } from "../../log/mod.ts";
import type { ChunkDigestError } from "../../log/chunk/adoption.ts";
import { readMeta } from "../../log/log_meta.ts";
import { readSchemaHistory } from "../../log/schema_history.ts";
import type { CounterChild, Gauge } from "../metrics.ts";
import { Stream, streamInside } from "../stream/stream.ts";
import type { StreamMirror } from "../role.ts";
import type { StreamOptions } from "../stream/stream_options.ts";
import { archiveSource, type HistorySource, httpSource, syncHistory } from "./_fetch_history.ts";
import type { ArchiveOptions, ArchiveStore } from "../../log/chunk/archive.ts";
import { runTail, type TailEnd } from "./_tail.ts";

/** A mirror's state, as `/head` and the metrics give it. */
export type MirrorState = "catching_up" | "live" | "reconnecting" | "stopped";

/** Every {@linkcode MirrorState}. */
export const MIRROR_STATES: readonly MirrorState[] = [
  "catching_up",
  "live",
  "reconnecting",
  "stopped",
];

/** Default interval of the mirror's look at the primary's manifest and head, ms. */
export const DEFAULT_MIRROR_POLL_MS = 2000;
/** Default cap of the reconnect backoff, ms. */
export const DEFAULT_MIRROR_RETRY_MAX_MS = 10_000;
/** Default longest silence of a history request (its answer, then each piece of its body), ms. */
export const DEFAULT_MIRROR_TIMEOUT_MS = 30_000;
/** Default bound of the primary's manifest as a mirror reads it, bytes (64 MiB). */
export const DEFAULT_MIRROR_MAX_MANIFEST_BYTES: number = 64 * 1024 * 1024;
/** Frames received and not yet durable, beyond which the tail is reopened later. */
export const MAX_QUEUED_FRAMES = 4096;

/** Options of a {@linkcode Mirror}. */
export interface MirrorOptions {
  /** Bearer token for a guarded primary (else the URL's `access_token`). @default null */
  token?: string | null;
  /** How often the primary's manifest and head are looked at, ms. @default 2000 */
  pollMs?: number;
  /** Cap of the reconnect backoff, ms. @default 10000 */
  retryMaxMs?: number;
  /**
   * Longest silence of one history request: its answer's headers, then each
   * piece of its body, must come within it (a slow but moving body takes as
   * long as it needs), ms. @default 30000
   */
  timeoutMs?: number;
  /** Largest manifest read from the primary, bytes. @default 64 MiB */
  maxManifestBytes?: number;
  /** Where events go. @default a text Logger on stderr */
  logger?: Logger;
  /** The fetch for HTTP requests (tests). @default fetch */
  fetch?: typeof fetch;
  /**
   * Read sealed history from the primary's S3 archive instead of its HTTP
   * routes (the tail still comes from the primary). @default null
   */
  archive?: ArchiveOptions | null;
}

/** The parts of a follow URL. */
export interface MirrorUrl {
  /** `ws(s)://HOST:PORT/NAME`, without query. */
  ws: string;
  /** The stream's HTTP base, `http(s)://HOST:PORT/NAME` (`/_` for the unnamed stream). */
  http: string;
  /** What may be shown (logs, `/head`): the ws URL, never a token. */
  shown: string;
  /** The token: the option's, else the URL's `access_token`, else null. */
  token: string | null;
  /** The primary's stream name (its archive folder). */
  name: string;
}

/**
 * Reads a follow URL (`ws://`, `wss://`, `http://` or `https://`, path
 * `/NAME` or `/`, query at most `access_token`).
 *
 * @throws {TypeError} for anything else.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { mirrorUrl } from "./mirror.ts";
 * const u = mirrorUrl("ws://10.0.0.1:8765/trades?access_token=s3cr3t");
 * equal(u.shown, "ws://10.0.0.1:8765/trades"); // no token where it is shown
 * equal(u.http, "http://10.0.0.1:8765/trades");
 * equal(u.token, "s3cr3t");
 * ```
 */
export function mirrorUrl(url: string, token: string | null = null): MirrorUrl {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`a follow URL must be a URL, got ${JSON.stringify(url)}`);
  }
  const secure = u.protocol === "wss:" || u.protocol === "https:";
  if (!["ws:", "wss:", "http:", "https:"].includes(u.protocol)) {
    throw new TypeError(`a follow URL is ws://, wss://, http:// or https://, got ${u.protocol}`);
  }
  const name = u.pathname.replace(/^\/+|\/+$/g, "");
  if (name.includes("/")) {
    throw new TypeError(`a follow URL's path is /NAME (or /), got ${u.pathname}`);
  }
  for (const k of u.searchParams.keys()) {
    if (k !== "access_token") {
      throw new TypeError(`a follow URL takes no query but access_token, got ${k}`);
    }
  }
  const host = u.host;
  const path = name === "" || name === "_" ? "" : `/${name}`;
  const ws = `${secure ? "wss" : "ws"}://${host}${path || "/"}`;
  return {
    ws,
    http: `${secure ? "https" : "http"}://${host}${path || "/_"}`,
    shown: ws,
    token: token ?? u.searchParams.get("access_token"),
    name: name === "_" ? "" : decodeURIComponent(name),
  };
}

interface Waiter {
  offset: number;
  resolve: (reached: boolean) => void;
}

/**
 * Keeps `stream` (opened on a replica log: `LogOptions.replica`) a copy of
 * the primary's stream at `url`. Made by {@linkcode openMirror}.
 *
 * @example
 * ```ts ignore
 * import { equal } from "node:assert/strict";
 * const { stream, mirror } = await openMirror("trades", "ws://primary:8765/trades", { root });
 * mirror.start();
 * equal(mirror.head().state, "catching_up");
 * await mirror.close();
 * ```
 */
export class Mirror implements StreamMirror {
  /** The replicated stream. */
  readonly stream: Stream;
  /** The primary, as it may be shown. */
  readonly url: MirrorUrl;
  readonly #logger: Logger;
  readonly #pollMs: number;
  readonly #retryMaxMs: number;
  readonly #timeoutMs: number;
  readonly #maxManifestBytes: number;
  readonly #fetch: typeof fetch;
  readonly #archive: ArchiveOptions | null;
  #store: ArchiveStore | null = null;
  readonly #abort = new AbortController();
  #state: MirrorState = "reconnecting";
  #primaryEnd: number | null = null;
  #liveAt = 0;
  #generation = -1;
  #tailOpen = false;
  #running: Promise<void> | null = null;
  #poll: ReturnType<typeof setInterval> | undefined;
  #history: Promise<unknown> = Promise.resolve();
  // Which parts of the periodic look still run: a tick skips a part still
  // running rather than queue it behind a slow primary.
  #looking = { head: false, history: false };
  // The live history poll's failing state: its error text (logged when it
  // changes) and how many polls failed in a row; null while polls succeed.
  #pollFailure: { error: string; count: number; sinceMs: number } | null = null;
  #waiters = new Set<Waiter>();
  // Bound once to this stream's label: counting is a field update.
  readonly #m: {
    rows: CounterChild;
    frames: CounterChild;
    adopted: CounterChild;
    refused: CounterChild;
    reconnects: CounterChild;
    lag: Gauge;
    state: Gauge;
  };

  /** A mirror of `url` for `stream` (not started). */
  constructor(stream: Stream, url: string, options: MirrorOptions = {}) {
    if (!stream.log?.replica) {
      throw new TypeError(`stream "${stream.name}" is not on a replica log (LogOptions.replica)`);
    }
    this.stream = stream;
    this.url = mirrorUrl(url, options.token ?? null);
    this.#logger = options.logger ?? new Logger();
    this.#pollMs = options.pollMs ?? DEFAULT_MIRROR_POLL_MS;
    this.#retryMaxMs = options.retryMaxMs ?? DEFAULT_MIRROR_RETRY_MAX_MS;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_MIRROR_TIMEOUT_MS;
    this.#maxManifestBytes = options.maxManifestBytes ?? DEFAULT_MIRROR_MAX_MANIFEST_BYTES;
    this.#fetch = options.fetch ?? fetch;
    this.#archive = options.archive ?? null;
    const r = streamInside(stream).metrics;
    const labels = { stream: stream.name };
    const counter = (name: string, help: string) => r.counter(name, help).labels(labels);
    this.#m = {
      rows: counter("streamcast_follow_rows_total", "Rows a follower received and made durable"),
      frames: counter("streamcast_follow_frames_total", "Frames a follower received"),
      adopted: counter(
        "streamcast_follow_chunks_adopted_total",
        "Primary chunks a follower fetched, checked and kept",
      ),
      refused: counter(
        "streamcast_follow_chunks_refused_total",
        "Chunk copies a follower refused (digest mismatch) and fetched again",
      ),
      reconnects: counter("streamcast_follow_reconnects_total", "Follower reconnects"),
      lag: r.gauge(
        "streamcast_follow_lag_rows",
        "Offsets between a follower's end and its primary's",
      ),
      state: r.gauge("streamcast_follow_state", "A follower's state (1 for the current one)"),
    };
    r.collect(() => {
      this.#m.lag.set(this.lagRows, labels);
      for (const s of MIRROR_STATES) {
        this.#m.state.set(s === this.#state ? 1 : 0, { stream: stream.name, state: s });
      }
    });
  }

  /** The state now. */
  get state(): MirrorState {
    return this.#state;
  }

  /** Offsets between the replica's end and the primary's last known end (0 when unknown). */
  get lagRows(): number {
    const p = this.#primaryEnd;
    return p === null ? 0 : Math.max(0, p - this.stream.log!.endOffset);
  }

  /** What `/head` adds: `follows`, `lag_rows`, `state`. */
  head(): Record<string, unknown> {
    return { follows: this.url.shown, lag_rows: this.lagRows, state: this.#state };
  }

  /**
   * The primary's end asked afresh (bounded by 2 s); the last known one if it
   * does not answer; null once stopped (nothing more will come from it).
   */
  async primaryEnd(): Promise<number | null> {
    if (this.#state === "stopped") return null;
    try {
      const h = await this.#head(AbortSignal.timeout(2000));
      if (h.stream_id === this.stream.streamId && typeof h.end_offset === "number") {
        // Upstream a mirror too: what it knows of the root's end (its lag).
        const lag = typeof h.lag_rows === "number" && h.lag_rows > 0 ? h.lag_rows : 0;
        this.#primaryEnd = Math.max(this.#primaryEnd ?? 0, h.end_offset + lag);
      }
    } catch {
      // Away: what was last seen stands.
    }
    return this.#primaryEnd;
  }

  /** Resolves true once the replica's end passes `offset` (false: `signal` aborted, or closed). */
  reached(offset: number, signal: AbortSignal): Promise<boolean> {
    if (this.stream.log!.endOffset >= offset) return Promise.resolve(true);
    if (signal.aborted || this.#abort.signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const w: Waiter = { offset, resolve };
      this.#waiters.add(w);
      signal.addEventListener("abort", () => {
        this.#waiters.delete(w);
        resolve(false);
      }, { once: true });
    });
  }

  /** Starts following (once). */
  start(): void {
    this.#running ??= this.#run();
    this.#poll ??= setInterval(() => this.#look(), this.#pollMs);
  }

  /** Stops following (the stream stays open: its owner closes it). */
  async close(): Promise<void> {
    this.#abort.abort();
    clearInterval(this.#poll);
    await this.#running;
    await this.#history.catch(() => {});
    for (const w of this.#waiters) w.resolve(false);
    this.#waiters.clear();
    this.#store?.close();
  }

  #setState(s: MirrorState): void {
    if (this.#state === s || this.#state === "stopped") return;
    this.#state = s;
    this.#logger.info("follow_state", { stream: this.stream.name, state: s });
  }

  #head(signal: AbortSignal): Promise<StreamHead> {
    const headers = this.url.token ? { authorization: `Bearer ${this.url.token}` } : undefined;
    return fetchHead(this.url.ws, {
      signal: AbortSignal.any([signal, this.#abort.signal]),
      headers,
    });
  }

  async #source(): Promise<HistorySource> {
    if (this.#archive) {
      // Loaded only when needed: the S3 SDK is large.
      const { ArchiveStore } = await import("../../log/chunk/archive.ts");
      this.#store ??= new ArchiveStore(this.#archive, this.url.name);
      return archiveSource(this.#store);
    }
    const headers: Record<string, string> = this.url.token
      ? { authorization: `Bearer ${this.url.token}` }
      : {};
    return httpSource(this.url.http, {
      headers,
      fetch: this.#fetch,
      signal: this.#abort.signal,
      idleMs: this.#timeoutMs,
      maxManifestBytes: this.#maxManifestBytes,
    });
  }

  // Syncs take turns: one at a time, in call order.
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#history.catch(() => {}).then(fn);
    this.#history = p;
    return p;
  }

  async #syncHistory(live: boolean): Promise<void> {
    await this.#exclusive(async () => {
      const src = await this.#source();
      const m = await src.manifest();
      if (m === null) return;
      if (m.stream_id !== this.stream.streamId) {
        this.#stop("stream_id_changed", { primary_stream_id: m.stream_id });
        return;
      }
      if (live && m.generation === this.#generation) return;
      const log = this.stream.log!;
      const report = await syncHistory(log, src, m, {
        live,
        onRefused: (err: ChunkDigestError) => {
          this.#m.refused.inc();
          this.#logger.warn("follow_chunk_refused", {
            stream: this.stream.name,
            sha256: err.sha256,
            detail: err.message,
          });
        },
      });
      this.#generation = m.generation;
      if (report.fetched > 0) {
        this.#m.adopted.inc(report.fetched);
        this.#logger.info("follow_chunks", {
          stream: this.stream.name,
          fetched: report.fetched,
          refused: report.refused,
          listed: report.listed,
          end_offset: log.endOffset,
        });
      }
      this.#wake();
    });
  }

  // The periodic look while the tail is open: the primary's end (lag) and
  // new chunks (adopted when the replica holds their rows). Each part one at
  // a time: a tick while the last one runs skips it, so that looks never pile
  // up behind a slow primary (nor a reconnect's sync behind them).
  #look(): void {
    if (!this.#tailOpen || this.#state === "stopped") return;
    const looking = this.#looking;
    if (!looking.head) {
      looking.head = true;
      this.primaryEnd().catch(() => {}).finally(() => looking.head = false);
    }
    if (looking.history) return;
    looking.history = true;
    this.#syncHistory(true).then(() => this.#pollRecovered(), (err) => {
      if (this.#abort.signal.aborted) return;
      this.#pollFailed(err instanceof Error ? err.message : String(err));
    }).finally(() => looking.history = false);
  }

  // A failing poll is logged at warn once per distinct error, not every poll.
  #pollFailed(error: string): void {
    const f = this.#pollFailure;
    if (f !== null && f.error === error) {
      f.count++;
      return;
    }
    this.#logger.warn("follow_history_failed", {
      stream: this.stream.name,
      primary: this.url.shown,
      error,
      ...(f !== null ? { previous_error: f.error, previous_failures: f.count } : {}),
    });
    this.#pollFailure = { error, count: 1, sinceMs: f?.sinceMs ?? Date.now() };
  }

  #pollRecovered(): void {
    const f = this.#pollFailure;
    if (f === null) return;
    this.#pollFailure = null;
    this.#logger.info("follow_history_recovered", {
      stream: this.stream.name,
      primary: this.url.shown,
      failures: f.count,
      failing_ms: Date.now() - f.sinceMs,
      last_error: f.error,
    });
  }

  #wake(): void {
    const end = this.stream.log!.endOffset;
    for (const w of this.#waiters) {
      if (end >= w.offset) {
        this.#waiters.delete(w);
        w.resolve(true);
      }
    }
  }

  #stop(why: string, fields: Record<string, unknown>): void {
    if (this.#state === "stopped") return;
    this.#state = "stopped";
    this.#logger.error("follow_stopped", {
      stream: this.stream.name,
      why,
      primary: this.url.shown,
      stream_id: this.stream.streamId,
      ...fields,
    }, `streamcast: stopped following ${this.url.shown} for "${this.stream.name}": ${why}`);
    this.#abort.abort();
    clearInterval(this.#poll);
  }

  async #run(): Promise<void> {
    let attempt = 0;
    const signal = this.#abort.signal;
    while (!signal.aborted) {
      let end: TailEnd | null = null;
      let error: string | null = null;
      try {
        end = await this.#round();
      } catch (err) {
        error = err instanceof Error ? err.message : String(err);
      }
      this.#tailOpen = false;
      if (signal.aborted) break;
      if (end?.greeted) attempt = 0;
      let delay = backoffDelay(++attempt, 250, this.#retryMaxMs);
      if (end?.code === 4416 && end.reason) {
        const why = end.reason.why;
        if (why === "other_stream") {
          this.#stop("stream_id_changed", { reason: end.reason });
          break;
        }
        if (why === "evicted" || why === "empty" || why === "too_old") {
          try {
            await this.#past(end.reason);
            delay = 0;
          } catch (err) {
            error = err instanceof Error ? err.message : String(err);
          }
        }
      } else if (end?.code === 4429) delay = 0;
      this.#setState("reconnecting");
      this.#m.reconnects.inc();
      this.#logger.warn("follow_disconnected", {
        stream: this.stream.name,
        primary: this.url.shown,
        ...(end ? { code: end.code, reason: end.reason, error: end.error } : {}),
        ...(error ? { error } : {}),
        end_offset: this.stream.log!.endOffset,
        retry_ms: delay,
      });
      if (delay > 0) await sleep(delay, signal);
    }
  }

  // Refused because the replica's end is below what the primary serves over
  // its socket: the chunks first; whatever the primary no longer holds at all
  // stays a gap, fenced like the primary's own.
  async #past(reason: Record<string, unknown>): Promise<void> {
    await this.#syncHistory(false);
    const earliest = reason.earliest;
    const log = this.stream.log!;
    if (earliest !== undefined && earliest !== null && !Number.isSafeInteger(earliest)) {
      // A lying or broken primary: no gap is fenced on its word.
      throw new RangeError(
        `the primary's 4416 earliest ${JSON.stringify(earliest)} is not an offset`,
      );
    }
    if (typeof earliest === "number" && earliest > log.nextOffset) {
      await this.#exclusive(() => log.fence(earliest));
      this.#logger.warn("follow_gap", { stream: this.stream.name, to: earliest });
    }
  }

  async #round(): Promise<TailEnd | null> {
    const head = await this.#head(AbortSignal.timeout(10_000));
    const log = this.stream.log!;
    if (head.stream_id !== log.streamId) {
      this.#stop("stream_id_changed", { primary_stream_id: head.stream_id });
      return null;
    }
    this.#primaryEnd = head.end_offset;
    this.#setState(log.endOffset < (head.end_offset ?? 0) ? "catching_up" : "live");
    await this.#syncHistory(false);
    if (this.#abort.signal.aborted) return null;
    this.#wake();
    const from = log.endOffset;
    this.#logger.info("follow_connect", {
      stream: this.stream.name,
      primary: this.url.shown,
      from,
    });
    return await runTail({
      url: this.url.ws,
      token: this.url.token,
      from,
      streamId: log.streamId,
      maxQueuedFrames: MAX_QUEUED_FRAMES,
      signal: this.#abort.signal,
      greeted: (g: Greeting) => {
        if (g.stream_id !== log.streamId) {
          this.#stop("stream_id_changed", { primary_stream_id: g.stream_id });
          return false;
        }
        this.#tailOpen = true;
        if (JSON.stringify(g.schema) !== JSON.stringify(this.stream.schema.json)) {
          // The rows pass through untouched; the schema served is the one opened with.
          this.#logger.warn(
            "follow_schema_changed",
            {
              stream: this.stream.name,
              primary: this.url.shown,
            },
            `streamcast: the schema of ${this.url.shown} changed; a restart of this mirror takes it`,
          );
        }
        this.#liveAt = g.end_offset ?? 0;
        this.#primaryEnd = Math.max(this.#primaryEnd ?? 0, this.#liveAt);
        this.#setState(log.endOffset >= this.#liveAt ? "live" : "catching_up");
        return true;
      },
      write: async (offsets, jsons) => {
        this.#m.frames.inc();
        // Durable before the next frame; a live sync of the history may run
        // beside it (it never fences: see syncHistory).
        const rows = await streamInside(this.stream).appendAt(offsets, jsons);
        this.#m.rows.inc(rows);
        const next = offsets[offsets.length - 1] + 1;
        if (this.#primaryEnd === null || next > this.#primaryEnd) this.#primaryEnd = next;
        if (this.#state === "catching_up" && log.endOffset >= this.#liveAt) this.#setState("live");
        this.#wake();
      },
    });
  }
}

/** Options of {@linkcode openMirror}. */
export interface OpenMirrorOptions extends MirrorOptions {
  /** Folder holding the logs (the replica is `ROOT/NAME`). */
  root: string;
  /** Log options for the replica (`replica`, `streamId`, `firstOffset` are set here). */
  logOptions?: LogOptions;
  /** Stream options (limits) other than schema, root and logOptions. */
  streamOptions?: Omit<StreamOptions, "schema" | "root" | "logOptions">;
  /** How long to wait for the primary when there is no replica yet, ms. @default 30000 */
  startWaitMs?: number;
}

async function localReplica(
  dir: string,
): Promise<{ schema: Record<string, unknown>; streamId: string } | null> {
  const meta = await readMeta(dir).catch((err) => {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  });
  if (!meta) return null;
  // The schema file may hold a history (docs/SPEC.md §3.12): the replica's current schema is its last.
  const kept = await readSchemaHistory(dir);
  if (!kept || kept.versions.length === 0) return null;
  return { schema: kept.versions[kept.versions.length - 1].schema, streamId: meta.meta.stream_id };
}

/**
 * Opens the replica of the stream at `url` as stream `name` (its log at
 * `ROOT/NAME`, created with the primary's `stream_id` and first offset when
 * there is none yet) and its {@linkcode Mirror} (not started). The schema
 * is the primary's; with a replica already on disk and the primary away, the
 * replica's own.
 *
 * @throws {Error} when there is no replica yet and the primary does not
 * answer within `startWaitMs`, or the primary's stream is ephemeral.
 */
export async function openMirror(
  name: string,
  url: string,
  options: OpenMirrorOptions,
): Promise<{ stream: Stream; mirror: Mirror }> {
  const u = mirrorUrl(url, options.token ?? null);
  const dir = join(options.root, name === "" ? "_" : name);
  const local = await localReplica(dir);
  const headers = u.token ? { authorization: `Bearer ${u.token}` } : undefined;
  let head: StreamHead | null = null;
  const deadline = Date.now() + (local ? 3000 : options.startWaitMs ?? 30_000);
  let lastError = "";
  for (let attempt = 1; head === null; attempt++) {
    const left = deadline - Date.now();
    try {
      head = await fetchHead(u.ws, { signal: AbortSignal.timeout(Math.max(500, left)), headers });
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
      // A refusal of access does not pass by waiting.
      if (/ answered 40[13] /.test(lastError)) {
        if (local) break;
        throw new Error(
          `cannot follow ${u.shown}: access refused (${lastError.replace(/^GET \S+ /, "")}); ` +
            `give --follow-token or the URL's access_token`,
        );
      }
      if (Date.now() >= deadline) break;
      await sleep(Math.min(backoffDelay(attempt, 250, 2000), Math.max(0, deadline - Date.now())));
    }
  }
  if (head === null && !local) {
    throw new Error(`cannot follow ${u.shown}: no answer (${lastError})`);
  }
  if (head && (!head.durable || typeof head.stream_id !== "string")) {
    throw new TypeError(`cannot follow ${u.shown}: its stream is ephemeral (nothing to replicate)`);
  }
  const same = head !== null && (!local || head.stream_id === local.streamId);
  const schema = same ? head!.schema : local!.schema;
  const first = head
    ? Number(head.first_offset ?? head.earliest ?? head.end_offset ?? 1)
    : undefined;
  const open = (schema: Record<string, unknown>) =>
    Stream.open(name, {
      ...options.streamOptions,
      schema,
      root: options.root,
      logOptions: {
        ...options.logOptions,
        replica: true,
        ...(head ? { streamId: head.stream_id!, firstOffset: first } : {}),
      },
    });
  let stream: Stream;
  try {
    stream = await open(schema);
  } catch (err) {
    // The primary's schema changed in a way this replica's log refuses: serve
    // the replica with the schema its rows were written with.
    if (!(err instanceof TypeError) || !local || schema === local.schema) throw err;
    options.logger?.warn("follow_schema_changed", {
      stream: name,
      primary: u.shown,
      error: err.message,
    });
    stream = await open(local.schema);
  }
  try {
    const mirror = new Mirror(stream, url, options);
    return { stream, mirror };
  } catch (err) {
    await stream.close();
    throw err;
  }
}
