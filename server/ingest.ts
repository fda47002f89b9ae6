/**
 * Feeding rows into a stream from outside: NDJSON lines (`serve --stdin NAME`)
 * or the text frames of an upstream WebSocket (`serve --upstream NAME=URL`,
 * optionally through `--handler MODULE.ts`).
 *
 * Invariants this module keeps:
 * - rows reach the sink in input order, and a bad line or frame is reported
 *   (log, `onReject`, counted) in input order — nothing is skipped silently;
 * - a row the sink refuses with {@linkcode RowError} (the schema) or
 *   `RangeError` (too big to store) is a reject and ingest goes on; any other
 *   refusal (disk full…) stops ingest and is thrown once every row already
 *   sent has settled;
 * - memory is bounded: at most `maxInFlight` rows are awaiting the sink, one
 *   line holds at most `maxLineBytes` (a longer one is rejected without being
 *   buffered whole), and an upstream queue longer than `maxQueuedFrames`
 *   disconnects rather than grows;
 * - every timer and socket is released when the `signal` aborts.
 *
 * ```ts
 * import { ingestLines, type IngestSink } from "./ingest.ts";
 * import { RowError } from "./errors.ts";
 *
 * const rows: unknown[] = [];
 * const sink: IngestSink = {
 *   name: "trades",
 *   send(row) {
 *     if (typeof (row as { x?: unknown })?.x !== "number") {
 *       return Promise.reject(new RowError("trades", "/x: must be number"));
 *     }
 *     return Promise.resolve(rows.push(row));
 *   },
 * };
 * const input = new Blob(['{"x":1}\n{"x":"no"}\n{"x":2}\n']).stream();
 * const stats = await ingestLines(input, sink, { log: () => {} });
 * console.log(stats); // { lines: 3, accepted: 2, rejected: 1 }
 * ```
 *
 * @module
 */

import { dirname, resolve } from "node:path";
import { setImmediate } from "node:timers";
import { pathToFileURL } from "node:url";
import { RowError } from "./errors.ts";

/** The longest line {@linkcode ingestLines} accepts by default: 16 MiB. */
export const MAX_LINE_BYTES: number = 16 * 1024 * 1024;

// How much of an overlong line the reject record keeps.
const PREVIEW_BYTES = 1024;
// An input loop that has not yielded to the event loop for this long does, so
// a fast in-memory input cannot starve timers and sockets.
const YIELD_EVERY_MS = 10;

/**
 * Where ingested rows go: in the server, a stream.
 *
 * @example
 * ```ts
 * import type { IngestSink } from "./ingest.ts";
 * let next = 1;
 * const sink: IngestSink = { name: "trades", send: () => Promise.resolve(next++) };
 * console.log(await sink.send({ x: 1 })); // 1
 * ```
 */
export interface IngestSink {
  /** The stream name, for messages. */
  readonly name: string;
  /**
   * Validates and appends one row, resolving with its offset (null on an
   * ephemeral stream). Rejects with {@linkcode RowError} for an invalid row,
   * or with `RangeError` for a row too big to store (a stream's log refuses a
   * row over its `maxPayloadBytes` so); either way nothing is stored and the
   * row is a reject. Any other rejection is a real failure (disk etc.).
   * Offsets are assigned in call order, so calls may be pipelined without
   * awaiting.
   */
  send(row: unknown): Promise<number | null>;
}

/**
 * One bad input line or frame, as given to a {@linkcode RejectSink}.
 *
 * @example
 * ```ts
 * import type { RejectRecord } from "./ingest.ts";
 * const rec: RejectRecord = { line: 3, error: "Unexpected end of JSON input", input: '{"x":' };
 * console.log(JSON.stringify(rec));
 * ```
 */
export interface RejectRecord {
  /** The 1-based line number (frame number for an upstream, counted across reconnects). */
  line: number;
  /** Why it was rejected: the parse error, the schema's message, or the handler's error. */
  error: string;
  /** The raw line or frame text (for an overlong line, its first 1024 bytes). */
  input: string;
}

/**
 * Receives every bad line or frame, in input order. A returned promise that
 * rejects (or a throw) stops ingest: a reject that cannot be recorded would be
 * lost silently.
 *
 * @example
 * ```ts
 * import type { RejectSink } from "./ingest.ts";
 * const seen: number[] = [];
 * const onReject: RejectSink = (rec) => {
 *   seen.push(rec.line);
 * };
 * onReject({ line: 7, error: "bad", input: "x" });
 * console.log(seen); // [7]
 * ```
 */
export interface RejectSink {
  /** Records one reject. */
  (rec: RejectRecord): void | Promise<void>;
}

/**
 * Options shared by {@linkcode ingestLines} and {@linkcode ingestUpstream}.
 *
 * @example
 * ```ts
 * import type { IngestOptions } from "./ingest.ts";
 * const options: IngestOptions = { maxInFlight: 1024, log: (m) => console.log(m) };
 * console.log(options.maxInFlight);
 * ```
 */
export interface IngestOptions {
  /** Called for every bad line/frame, in order. */
  onReject?: RejectSink;
  /**
   * Status and reject messages, one line each, prefixed `streamcast: `.
   *
   * @default {console.error}
   */
  log?: (message: string) => void;
  /**
   * Rows sent to the sink before awaiting the oldest.
   *
   * @default {4096}
   */
  maxInFlight?: number;
  /** Stops ingest: the returned promise resolves once sent rows have settled. */
  signal?: AbortSignal;
}

/**
 * Options of {@linkcode ingestLines}.
 *
 * @example
 * ```ts
 * import type { LinesOptions } from "./ingest.ts";
 * const options: LinesOptions = { source: "trades.ndjson", maxLineBytes: 1 << 20 };
 * console.log(options.source);
 * ```
 */
export interface LinesOptions extends IngestOptions {
  /**
   * What the input is called in messages: `streamcast: SOURCE line 3 …`.
   *
   * @default {"stdin"}
   */
  source?: string;
  /**
   * The longest line accepted, in bytes, not counting `\n` or `\r\n`. A longer
   * line is rejected as too long and ingest resumes at the next newline.
   *
   * @default {16777216}
   */
  maxLineBytes?: number;
}

/**
 * What an ingest did, as {@linkcode ingestLines} and {@linkcode ingestUpstream}
 * return it.
 *
 * @example
 * ```ts
 * import type { IngestStats } from "./ingest.ts";
 * const stats: IngestStats = { lines: 10, accepted: 8, rejected: 1 };
 * console.log(stats.lines - stats.accepted - stats.rejected); // 1 blank line
 * ```
 */
export interface IngestStats {
  /** Input lines read, blank ones included (for an upstream: frames received). */
  lines: number;
  /** Rows the sink accepted. */
  accepted: number;
  /** Lines, frames or (from a handler's array) rows rejected. */
  rejected: number;
}

/** A reject found before the sink saw anything: bad JSON, UTF-8, length, handler. */
class InputReject {
  readonly message: string;
  constructor(message: string) {
    this.message = message;
  }
}

interface Pending {
  readonly line: number;
  readonly input: string;
  settled: boolean;
  ok: boolean;
  error: unknown;
}

/**
 * Pipelines rows into a sink and reports outcomes strictly in input order.
 * Input rejects queue behind the rows sent before them, so `onReject` sees
 * line 5 after line 3 even when line 3's verdict comes from an async sink.
 */
class Feeder {
  readonly stats: IngestStats = { lines: 0, accepted: 0, rejected: 0 };
  readonly #sink: IngestSink;
  readonly #onReject: RejectSink | undefined;
  readonly #log: (message: string) => void;
  readonly #maxInFlight: number;
  readonly #where: (line: number) => string;
  readonly #onFatal: () => void;
  #queue: Pending[] = [];
  #head = 0;
  #rejectsWriting = 0;
  #fatal: { error: unknown } | undefined;
  #waiters: (() => void)[] = [];

  constructor(
    sink: IngestSink,
    options: IngestOptions,
    where: (line: number) => string,
    onFatal: () => void,
  ) {
    const maxInFlight = options.maxInFlight ?? 4096;
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) {
      throw new RangeError(`Cannot ingest with maxInFlight ${maxInFlight}: need an integer ≥ 1`);
    }
    this.#sink = sink;
    this.#onReject = options.onReject;
    this.#log = options.log ?? console.error;
    this.#maxInFlight = maxInFlight;
    this.#where = where;
    this.#onFatal = onFatal;
  }

  get failed(): boolean {
    return this.#fatal !== undefined;
  }

  get full(): boolean {
    return this.#queue.length - this.#head + this.#rejectsWriting >= this.#maxInFlight;
  }

  send(line: number, input: string, row: unknown): void {
    const entry: Pending = { line, input, settled: false, ok: false, error: undefined };
    this.#queue.push(entry);
    let sent: Promise<unknown>;
    try {
      sent = this.#sink.send(row);
    } catch (error) {
      sent = Promise.reject(error);
    }
    sent.then(
      () => {
        entry.settled = entry.ok = true;
        this.#pump();
      },
      (error) => {
        entry.settled = true;
        entry.error = error;
        this.#pump();
      },
    );
  }

  reject(line: number, input: string, message: string): void {
    this.#queue.push({ line, input, settled: true, ok: false, error: new InputReject(message) });
    this.#pump();
  }

  fail(error: unknown): void {
    if (this.#fatal !== undefined) return;
    this.#fatal = { error };
    this.#onFatal();
    this.#notify();
  }

  /** Resolves once fewer than `maxInFlight` rows are pending, or ingest failed. */
  async room(): Promise<void> {
    while (this.full && !this.failed) await this.#wait();
  }

  /** Resolves once everything sent has settled and every reject is recorded; throws a fatal error. */
  async drain(): Promise<void> {
    while (this.#head < this.#queue.length || this.#rejectsWriting > 0) await this.#wait();
    if (this.#fatal !== undefined) throw this.#fatal.error;
  }

  #wait(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  #notify(): void {
    if (this.#waiters.length === 0) return;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  #pump(): void {
    const queue = this.#queue;
    while (this.#head < queue.length && queue[this.#head].settled) {
      const entry = queue[this.#head];
      queue[this.#head++] = undefined as unknown as Pending;
      if (entry.ok) this.stats.accepted++;
      else if (entry.error instanceof InputReject) this.#report(entry, entry.error.message);
      else if (entry.error instanceof RowError) this.#report(entry, entry.error.detail);
      // The log checks a row's size before writing anything: that row alone is refused.
      else if (entry.error instanceof RangeError) {
        this.#report(entry, `row too big: ${entry.error.message}`);
      } else this.fail(entry.error);
    }
    if (this.#head === queue.length) {
      queue.length = 0;
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > queue.length) {
      queue.splice(0, this.#head);
      this.#head = 0;
    }
    this.#notify();
  }

  #report(entry: Pending, message: string): void {
    this.stats.rejected++;
    try {
      this.#log(
        `streamcast: ${this.#where(entry.line)} for stream "${this.#sink.name}": ${message}`,
      );
      const written = this.#onReject?.({ line: entry.line, error: message, input: entry.input });
      if (written !== undefined && typeof written.then === "function") {
        this.#rejectsWriting++;
        written.then(
          () => {
            this.#rejectsWriting--;
            this.#notify();
          },
          (error) => {
            this.#rejectsWriting--;
            this.fail(error);
            this.#notify();
          },
        );
      }
    } catch (error) {
      this.fail(error);
    }
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A line longer than the limit: its length and its first bytes. */
interface TooLong {
  readonly bytes: number;
  readonly preview: Uint8Array;
}

const EMPTY = new Uint8Array(0);

function concat(parts: Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * Splits bytes into lines at `\n` (a byte that never occurs inside a multi-byte
 * UTF-8 sequence, so splitting before decoding is safe), stripping one `\r`
 * before it. Holds at most `max` bytes of an unfinished line.
 */
class LineSplitter {
  readonly #max: number;
  #chunk: Uint8Array = EMPTY;
  #pos = 0;
  #parts: Uint8Array[] = [];
  #partBytes = 0;
  // A line past the limit, being skipped: its length so far, first bytes, last byte.
  #tooLong: { bytes: number; preview: Uint8Array; last: number } | undefined;

  constructor(max: number) {
    this.#max = max;
  }

  feed(chunk: Uint8Array): void {
    this.#chunk = chunk;
    this.#pos = 0;
  }

  /** The next complete line of the chunk fed, or null when it needs more input. */
  next(): Uint8Array | TooLong | null {
    const chunk = this.#chunk;
    const start = this.#pos;
    if (start >= chunk.length) return null;
    const nl = chunk.indexOf(10, start);
    if (nl === -1) {
      this.#hold(chunk.subarray(start));
      this.#pos = chunk.length;
      return null;
    }
    this.#pos = nl + 1;
    return this.#complete(chunk.subarray(start, nl));
  }

  /** The last line, if the input did not end with a newline. */
  end(): Uint8Array | TooLong | null {
    if (this.#tooLong === undefined && this.#partBytes === 0) return null;
    return this.#complete(EMPTY);
  }

  #hold(bytes: Uint8Array): void {
    if (this.#tooLong !== undefined) {
      this.#tooLong.bytes += bytes.length;
      if (bytes.length > 0) this.#tooLong.last = bytes[bytes.length - 1];
      return;
    }
    // One byte of slack for a "\r" that the newline will strip.
    if (this.#partBytes + bytes.length > this.#max + 1) {
      const head = this.#parts.length > 0 ? this.#parts[0] : bytes;
      let preview = head.slice(0, PREVIEW_BYTES);
      if (preview.length < PREVIEW_BYTES && this.#parts.length > 0) {
        this.#parts.push(bytes);
        preview = concat(this.#parts, this.#partBytes + bytes.length).slice(0, PREVIEW_BYTES);
      }
      this.#tooLong = {
        bytes: this.#partBytes + bytes.length,
        preview,
        last: bytes[bytes.length - 1],
      };
      this.#parts = [];
      this.#partBytes = 0;
      return;
    }
    // A copy: the stream may hand us views of buffers it reuses.
    this.#parts.push(bytes.slice());
    this.#partBytes += bytes.length;
  }

  #complete(tail: Uint8Array): Uint8Array | TooLong {
    if (this.#tooLong !== undefined) {
      const { bytes, preview, last } = this.#tooLong;
      this.#tooLong = undefined;
      const cr = (tail.length > 0 ? tail[tail.length - 1] : last) === 13 ? 1 : 0;
      const length = bytes + tail.length - cr;
      // A short overlong line may have its "\r" in the preview.
      return { bytes: length, preview: preview.subarray(0, length) };
    }
    let line = tail;
    if (this.#partBytes > 0) {
      this.#parts.push(tail);
      line = concat(this.#parts, this.#partBytes + tail.length);
      this.#parts = [];
      this.#partBytes = 0;
    }
    if (line.length > 0 && line[line.length - 1] === 13) line = line.subarray(0, line.length - 1);
    if (line.length > this.#max) {
      return { bytes: line.length, preview: line.slice(0, PREVIEW_BYTES) };
    }
    return line;
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const lossyUtf8 = new TextDecoder("utf-8");
const BLANK = /^[ \t\r]*$/;

/**
 * `bytes` as text, or undefined if they are not valid UTF-8. The lossy decoder
 * is ~4× faster than a fatal one here; only text holding U+FFFD (bad input, or
 * a genuine U+FFFD) pays for the strict check.
 */
function decodeLine(bytes: Uint8Array): string | undefined {
  const text = lossyUtf8.decode(bytes);
  if (!text.includes("\uFFFD")) return text;
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Reads NDJSON from `input` — each line one JSON row — and sends the rows to
 * `sink` in order, pipelining up to `maxInFlight`. Blank lines are skipped (not
 * rejects, but they count in the line numbering). A line that is not UTF-8, not
 * JSON, too long, or refused by the sink with {@linkcode RowError} or
 * `RangeError` (a row too big for the log: `row too big: payload is N bytes;
 * the limit is M`) is logged as
 * `streamcast: stdin line 3 for stream "trades": …`, passed to `onReject`,
 * counted, and ingest continues. Handles `\r\n`, a last line without newline,
 * and multi-byte characters split across chunks.
 *
 * Resolves when input ends, after every accepted row is durable, and logs
 * `streamcast: end of stdin for stream "NAME" (N rows accepted, M rejected);
 * still serving`. If `signal` aborts, input is cancelled and it resolves once
 * the rows sent have settled (without that message). Any other
 * rejection from the sink, a failing `onReject`, or an input read error stops
 * ingest, cancels the input, and is thrown once sent rows settle.
 *
 * @example
 * ```ts
 * import { ingestLines } from "./ingest.ts";
 * import { RowError } from "./errors.ts";
 *
 * const sent: unknown[] = [];
 * const sink = {
 *   name: "trades",
 *   send(row: unknown): Promise<number> {
 *     if (typeof row !== "object" || row === null) {
 *       return Promise.reject(new RowError("trades", "must be object"));
 *     }
 *     return Promise.resolve(sent.push(row));
 *   },
 * };
 * const lines: string[] = [];
 * const input = new Blob(['{"x":1}\r\n\r\n42\n{"x":', '2}']).stream();
 * const stats = await ingestLines(input, sink, { log: (m) => lines.push(m) });
 * console.log(stats); // { lines: 4, accepted: 2, rejected: 1 }
 * console.log(lines[0]); // streamcast: stdin line 3 for stream "trades": must be object
 * ```
 */
export async function ingestLines(
  input: ReadableStream<Uint8Array>,
  sink: IngestSink,
  options: LinesOptions = {},
): Promise<IngestStats> {
  const source = options.source ?? "stdin";
  const maxLineBytes = options.maxLineBytes ?? MAX_LINE_BYTES;
  if (!Number.isInteger(maxLineBytes) || maxLineBytes < 1) {
    throw new RangeError(`Cannot ingest with maxLineBytes ${maxLineBytes}: need an integer ≥ 1`);
  }
  const log = options.log ?? console.error;
  const signal = options.signal;
  let stopped = false;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    // Ends a pending read; its own failure (input already errored) is moot.
    reader.cancel(signal?.reason).catch(() => {});
  };
  // Before getReader(), so that bad options leave the input unlocked.
  const feeder = new Feeder(sink, options, (n) => `${source} line ${n}`, stop);
  const reader = input.getReader();
  const splitter = new LineSplitter(maxLineBytes);

  const handle = (line: Uint8Array | TooLong): void => {
    const n = ++feeder.stats.lines;
    if (!(line instanceof Uint8Array)) {
      feeder.reject(
        n,
        lossyUtf8.decode(line.preview),
        `line is ${line.bytes} bytes, longer than the limit of ${maxLineBytes} bytes ` +
          `(skipped to the next newline; input holds its first ${line.preview.length} bytes)`,
      );
      return;
    }
    if (line.length === 0) return;
    const text = decodeLine(line);
    if (text === undefined) {
      feeder.reject(n, lossyUtf8.decode(line), "line is not valid UTF-8");
      return;
    }
    let row: unknown;
    try {
      row = JSON.parse(text);
    } catch (error) {
      if (!BLANK.test(text)) feeder.reject(n, text, errorMessage(error));
      return;
    }
    feeder.send(n, text, row);
  };

  signal?.addEventListener("abort", stop, { once: true });
  try {
    if (signal?.aborted) stop();
    let yielded = performance.now();
    while (!stopped) {
      const { done, value } = await reader.read();
      if (done || stopped) break;
      splitter.feed(value);
      for (let line = splitter.next(); line !== null && !stopped; line = splitter.next()) {
        handle(line);
        if (feeder.full) {
          await feeder.room();
          yielded = performance.now();
        }
      }
      if (performance.now() - yielded > YIELD_EVERY_MS) {
        await yieldToEventLoop();
        yielded = performance.now();
      }
    }
    if (!stopped) {
      const last = splitter.end();
      if (last !== null) handle(last);
      reader.releaseLock();
    }
  } catch (error) {
    feeder.fail(error);
  } finally {
    signal?.removeEventListener("abort", stop);
  }
  await feeder.drain();
  if (!signal?.aborted) {
    const { accepted, rejected } = feeder.stats;
    log(
      `streamcast: end of ${source} for stream "${sink.name}" ` +
        `(${accepted} rows accepted, ${rejected} rejected); still serving`,
    );
  }
  return { ...feeder.stats };
}

/**
 * Turns one upstream text frame into a row, an array of rows (sent in order),
 * or null (skip the frame). May be async; a throw or rejection rejects that
 * frame. Returning `undefined` is a reject too (most likely a missing
 * `return`): return null to skip.
 *
 * @example
 * ```ts
 * import type { FrameHandler } from "./ingest.ts";
 * const handler: FrameHandler = (frame) => {
 *   const msg = JSON.parse(frame);
 *   return msg.type === "heartbeat" ? null : msg.trades;
 * };
 * console.log(handler('{"type":"heartbeat"}')); // null
 * ```
 */
export type FrameHandler = (frame: string) => unknown | Promise<unknown>;

/**
 * Options of {@linkcode ingestUpstream}.
 *
 * @example
 * ```ts
 * import type { UpstreamOptions } from "./ingest.ts";
 * const options: UpstreamOptions = {
 *   handler: (frame) => JSON.parse(frame).data,
 *   minBackoffMs: 100,
 *   maxBackoffMs: 5_000,
 * };
 * console.log(options.minBackoffMs);
 * ```
 */
export interface UpstreamOptions extends IngestOptions {
  /** Turns each frame into rows; without one, each frame is `JSON.parse`d into one row. */
  handler?: FrameHandler;
  /**
   * The delay before the first reconnect after a connection that delivered frames.
   *
   * @default {250}
   */
  minBackoffMs?: number;
  /**
   * The cap of the doubling reconnect delay.
   *
   * @default {10000}
   */
  maxBackoffMs?: number;
  /** WebSocket subprotocols to offer. */
  protocols?: string[];
  /**
   * Frames received but not yet handled (a slow async handler, a slow sink)
   * beyond which the connection is closed to shed load; the queued frames are
   * still handled, and the reconnect waits until they are.
   *
   * @default {65536}
   */
  maxQueuedFrames?: number;
  /** Called each time a connection opens. */
  onOpen?(): void;
  /** Called each time an open connection closes. */
  onClose?(): void;
}

interface Outcome {
  opened: boolean;
  productive: boolean;
  code: number;
  reason: string;
  error: string | undefined;
}

const SECRET_PARAM = /token|key|secret|pass|auth|sig|cred|session/i;

/** `url` without userinfo, with the values of secret-looking query parameters hidden. */
function redactUrl(url: URL): string {
  const shown = new URL(url.href);
  shown.username = "";
  shown.password = "";
  if ([...shown.searchParams.keys()].some((key) => SECRET_PARAM.test(key))) {
    for (const key of new Set(shown.searchParams.keys())) {
      if (SECRET_PARAM.test(key)) shown.searchParams.set(key, "REDACTED");
    }
  }
  return shown.href;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === "object" && value !== null &&
    typeof (value as { then?: unknown }).then === "function";
}

function checkMs(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(`Cannot ingest with ${name} ${value}: need a finite number ≥ 0`);
  }
  return value;
}

/**
 * Connects to the WebSocket at `url` and sends every frame's rows to `sink`:
 * each text frame (binary frames are decoded as UTF-8) is `JSON.parse`d into
 * one row, or given to `handler`. Bad frames are rejects as in
 * {@linkcode ingestLines}, numbered across reconnects. On any disconnect it
 * reconnects with capped exponential backoff plus jitter, until `signal`
 * aborts; then it closes the socket, clears its timers, and resolves once sent
 * rows have settled (frames received but not yet handled are dropped and
 * counted in the log). Connects and disconnects are logged with the URL
 * stripped of credentials. A sink rejection other than `RowError` or
 * `RangeError` (see {@linkcode IngestSink.send}) stops it and is thrown.
 * Throws `TypeError` at once for a URL that is not ws(s) or http(s).
 *
 * @example
 * ```ts
 * import { ingestUpstream, type IngestSink, loadHandler, rejectFile } from "./ingest.ts";
 *
 * // What `serve --upstream trades=wss://feed.example/v1 --handler ./feed.ts` runs
 * // (needs --allow-net and --allow-read/--allow-write; called by the server):
 * export async function feedTrades(sink: IngestSink, signal: AbortSignal): Promise<void> {
 *   const rejects = await rejectFile("data/trades/rejects.ndjson");
 *   try {
 *     const stats = await ingestUpstream("wss://user:pw@feed.example/v1", sink, {
 *       handler: await loadHandler("./feed.ts"),
 *       onReject: rejects,
 *       signal,
 *     });
 *     console.error(`${stats.accepted} rows from ${stats.lines} frames`);
 *   } finally {
 *     await rejects.close();
 *   }
 * }
 * ```
 */
export async function ingestUpstream(
  url: string,
  sink: IngestSink,
  options: UpstreamOptions = {},
): Promise<IngestStats> {
  const target = new URL(url);
  const shown = redactUrl(target);
  if (!["ws:", "wss:", "http:", "https:"].includes(target.protocol)) {
    throw new TypeError(
      `Cannot ingest from upstream ${shown}: the URL must be ws://, wss://, http:// or https://`,
    );
  }
  // Runtime error messages may quote the URL; keep the credentials out of logs.
  const hide = (text: string): string => {
    let out = text.replaceAll(url, shown).replaceAll(target.href, shown);
    if (target.password) out = out.replaceAll(target.password, "REDACTED");
    return out;
  };
  const minBackoffMs = checkMs("minBackoffMs", options.minBackoffMs ?? 250);
  const maxBackoffMs = Math.max(
    minBackoffMs,
    checkMs("maxBackoffMs", options.maxBackoffMs ?? 10_000),
  );
  const maxQueuedFrames = options.maxQueuedFrames ?? 65_536;
  if (!Number.isInteger(maxQueuedFrames) || maxQueuedFrames < 1) {
    throw new RangeError(
      `Cannot ingest with maxQueuedFrames ${maxQueuedFrames}: need an integer ≥ 1`,
    );
  }
  const log = options.log ?? console.error;
  const handler = options.handler;
  const stream = `stream "${sink.name}"`;

  // Aborted by the caller's signal or by a fatal sink error: stops everything.
  const halt = new AbortController();
  const onAbort = (): void => halt.abort();
  const feeder = new Feeder(sink, options, (n) => `upstream ${shown} frame ${n}`, onAbort);
  options.signal?.addEventListener("abort", onAbort, { once: true });
  if (options.signal?.aborted) onAbort();

  // Frames received and not yet handled; handled one at a time, in order.
  let frames: (string | ArrayBuffer | undefined)[] = [];
  let head = 0;
  let handling = false;
  let running: Promise<void> | undefined;

  const handleFrames = async (): Promise<void> => {
    handling = true;
    try {
      while (head < frames.length && !halt.signal.aborted) {
        const data = frames[head]!;
        frames[head++] = undefined;
        if (head > 4096 && head * 2 > frames.length) {
          frames = frames.slice(head);
          head = 0;
        }
        const n = ++feeder.stats.lines;
        let text: string;
        if (typeof data === "string") {
          text = data;
        } else {
          const decoded = decodeLine(new Uint8Array(data));
          if (decoded === undefined) {
            feeder.reject(n, lossyUtf8.decode(data), "binary frame is not valid UTF-8");
            continue;
          }
          text = decoded;
        }
        let out: unknown;
        try {
          if (handler === undefined) {
            out = JSON.parse(text);
          } else {
            out = handler(text);
            if (isThenable(out)) out = await out;
          }
        } catch (error) {
          feeder.reject(n, text, (handler ? "handler threw: " : "") + errorMessage(error));
          continue;
        }
        if (handler !== undefined) {
          if (out === null) continue;
          if (out === undefined) {
            feeder.reject(n, text, "handler returned undefined (return null to skip a frame)");
            continue;
          }
          if (Array.isArray(out)) {
            for (const row of out) {
              if (halt.signal.aborted) break;
              feeder.send(n, text, row);
              if (feeder.full) await feeder.room();
            }
            continue;
          }
        }
        feeder.send(n, text, out);
        if (feeder.full) await feeder.room();
      }
    } finally {
      // Reset in the same synchronous step as the loop's last check, so a frame
      // pushed after it starts a new loop rather than waiting behind this one.
      handling = false;
    }
    if (head === frames.length) {
      frames = [];
      head = 0;
    }
  };

  const enqueue = (data: string | ArrayBuffer): void => {
    frames.push(data);
    if (handling) return;
    const run = handleFrames().catch((error) => feeder.fail(error)).finally(() => {
      if (running === run) running = undefined;
    });
    running = run;
  };

  const connectOnce = (): Promise<Outcome> =>
    new Promise((resolve) => {
      let ws: WebSocket;
      try {
        ws = new WebSocket(url, options.protocols);
      } catch (error) {
        // The URL was checked, so this is a bad `protocols`: retrying cannot help.
        feeder.fail(error);
        resolve({ opened: false, productive: false, code: 0, reason: "", error: undefined });
        return;
      }
      ws.binaryType = "arraybuffer";
      let opened = false;
      let productive = false;
      let error: string | undefined;
      const close = (): void => ws.close(1000);
      halt.signal.addEventListener("abort", close, { once: true });
      ws.onopen = () => {
        opened = true;
        log(`streamcast: upstream ${shown} connected for ${stream}`);
        try {
          options.onOpen?.();
        } catch (error) {
          feeder.fail(error);
        }
      };
      ws.onmessage = (event: MessageEvent<string | ArrayBuffer>) => {
        productive = true;
        enqueue(event.data);
        if (frames.length - head > maxQueuedFrames && ws.readyState === WebSocket.OPEN) {
          log(
            `streamcast: upstream ${shown} for ${stream}: ${frames.length - head} frames ` +
              `queued behind ingest (limit ${maxQueuedFrames}); disconnecting to shed load`,
          );
          ws.close(1000, "ingest backlog");
        }
      };
      ws.onerror = (event) => {
        error = event instanceof ErrorEvent ? hide(event.message) : "error";
      };
      ws.onclose = (event) => {
        halt.signal.removeEventListener("abort", close);
        ws.onopen =
          ws.onmessage =
          ws.onerror =
          ws.onclose =
            null;
        if (opened) {
          try {
            options.onClose?.();
          } catch (error) {
            feeder.fail(error);
          }
        }
        resolve({ opened, productive, code: event.code, reason: event.reason, error });
      };
    });

  let failures = 0;
  try {
    while (!halt.signal.aborted) {
      const outcome = await connectOnce();
      if (halt.signal.aborted) break;
      failures = outcome.productive ? 0 : failures + 1;
      const base = Math.min(maxBackoffMs, minBackoffMs * 2 ** Math.min(failures, 30));
      const delayMs = Math.max(minBackoffMs, base / 2 + Math.random() * base / 2);
      const wait = delayMs < 1000
        ? `${Math.round(delayMs)} ms`
        : `${(delayMs / 1000).toFixed(1)} s`;
      if (outcome.opened) {
        const why = [`code ${outcome.code || 1006}`];
        if (outcome.reason) why.push(JSON.stringify(outcome.reason));
        if (outcome.error) why.push(outcome.error);
        log(
          `streamcast: upstream ${shown} disconnected for ${stream} (${why.join(", ")}); ` +
            `reconnecting in ${wait}`,
        );
      } else {
        log(
          `streamcast: upstream ${shown} for ${stream} failed to connect ` +
            `(${outcome.error ?? `code ${outcome.code}`}); retrying in ${wait}`,
        );
      }
      await sleep(delayMs, halt.signal);
      // Frames of the last connection first: keeps order, and sheds load.
      if (running !== undefined) await running;
    }
  } finally {
    options.signal?.removeEventListener("abort", onAbort);
  }
  if (running !== undefined) await running;
  const dropped = frames.length - head;
  frames = [];
  head = 0;
  if (dropped > 0) {
    log(`streamcast: upstream ${shown} for ${stream}: ${dropped} received frames dropped at stop`);
  }
  await feeder.drain();
  const { accepted, rejected } = feeder.stats;
  log(
    `streamcast: upstream ${shown} stopped for ${stream} ` +
      `(${accepted} rows accepted, ${rejected} rejected)`,
  );
  return { ...feeder.stats };
}

/**
 * Loads the default export of the handler module at `modulePath` (a file path,
 * relative to the working directory, or a URL). Throws an `Error` naming the
 * module if it cannot be imported, and a `TypeError` if it has no default
 * export or that export is not a function.
 *
 * @example
 * ```ts
 * import { type FrameHandler, loadHandler } from "./ingest.ts";
 *
 * // feed.ts: `export default (frame: string) => JSON.parse(frame).trades ?? null;`
 * export async function handlerFromFlag(modulePath: string): Promise<FrameHandler> {
 *   try {
 *     return await loadHandler(modulePath);
 *   } catch (error) {
 *     console.error(`streamcast: ${(error as Error).message}`);
 *     Deno.exit(2);
 *   }
 * }
 * ```
 */
export async function loadHandler(modulePath: string): Promise<FrameHandler> {
  const isUrl = /^[a-zA-Z][a-zA-Z0-9+.-]+:/.test(modulePath) && !/^[a-zA-Z]:[\\/]/.test(modulePath);
  const specifier = isUrl ? modulePath : pathToFileURL(resolve(modulePath)).href;
  let mod: Record<string, unknown>;
  try {
    mod = await import(specifier);
  } catch (error) {
    throw new Error(`Cannot load handler module ${modulePath}: ${errorMessage(error)}`, {
      cause: error,
    });
  }
  if (!("default" in mod)) {
    const names = Object.keys(mod);
    throw new TypeError(
      `Cannot use handler module ${modulePath}: it has no default export ` +
        `(it exports ${names.length > 0 ? names.join(", ") : "nothing"}); ` +
        `export default a function (frame: string) => row | row[] | null`,
    );
  }
  if (typeof mod.default !== "function") {
    throw new TypeError(
      `Cannot use handler module ${modulePath}: its default export is ` +
        `${mod.default === null ? "null" : `a ${typeof mod.default}`}, not a function`,
    );
  }
  return mod.default as FrameHandler;
}

/**
 * The {@linkcode RejectSink} that {@linkcode rejectFile} returns: each call
 * resolves once its line is written; `close()` flushes, syncs and closes.
 *
 * @example
 * ```ts
 * import type { RejectFile, RejectSink } from "./ingest.ts";
 * export async function record(rejects: RejectFile): Promise<void> {
 *   const sink: RejectSink = rejects;
 *   await sink({ line: 1, error: "bad", input: "x" });
 *   await rejects.close();
 * }
 * ```
 */
export interface RejectFile extends RejectSink {
  /** Appends one reject line; resolves once it is written. */
  (rec: RejectRecord): Promise<void>;
  /** Waits for pending lines, syncs and closes the file. Later calls reject. */
  close(): Promise<void>;
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await file.write(bytes.subarray(at));
}

/**
 * Opens `path` for appending rejects (creating it, and its folder, if needed)
 * and returns a {@linkcode RejectSink} that writes each as one NDJSON line
 * `{"line":N,"error":"…","input":"<raw>"}`, in call order, coalescing lines
 * that arrive while a write is in flight. Its promise resolves once the line is
 * written. `close()` waits for pending lines, syncs and closes the file.
 *
 * @example
 * ```ts
 * import { ingestLines, type IngestSink, rejectFile } from "./ingest.ts";
 *
 * // What `serve --stdin trades` runs, with the log of "trades" under data/:
 * export async function stdinToTrades(sink: IngestSink): Promise<void> {
 *   const rejects = await rejectFile("data/trades/rejects.ndjson");
 *   try {
 *     await ingestLines(Deno.stdin.readable, sink, { onReject: rejects });
 *   } finally {
 *     await rejects.close();
 *   }
 * }
 * ```
 */
export async function rejectFile(path: string): Promise<RejectFile> {
  await Deno.mkdir(dirname(path), { recursive: true });
  const file = await Deno.open(path, { append: true, create: true });
  const encoder = new TextEncoder();
  let pending: string[] = [];
  let waiting: { resolve(): void; reject(error: unknown): void }[] = [];
  let writing: Promise<void> | undefined;
  let closed = false;
  let failure: { error: unknown } | undefined;

  const flush = async (): Promise<void> => {
    while (pending.length > 0) {
      const text = pending.join("");
      const batch = waiting;
      pending = [];
      waiting = [];
      try {
        await writeAll(file, encoder.encode(text));
        for (const w of batch) w.resolve();
      } catch (error) {
        failure ??= { error };
        for (const w of batch) w.reject(error);
        for (const w of waiting) w.reject(error);
        pending = [];
        waiting = [];
      }
    }
    writing = undefined;
  };

  const sink = (rec: RejectRecord): Promise<void> => {
    if (closed) {
      return Promise.reject(new Error(`Cannot record a reject in ${path}: the file is closed`));
    }
    if (failure !== undefined) return Promise.reject(failure.error);
    pending.push(JSON.stringify({ line: rec.line, error: rec.error, input: rec.input }) + "\n");
    const written = new Promise<void>((resolve, reject) => waiting.push({ resolve, reject }));
    writing ??= flush();
    return written;
  };
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    while (writing !== undefined) await writing;
    try {
      if (failure === undefined) await file.syncData();
    } finally {
      file.close();
    }
  };
  return Object.assign(sink, { close });
}
