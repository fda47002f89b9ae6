/**
 * The feeder between an input and its sink: pipelines up to `maxInFlight`
 * rows, and reports outcomes (accepted, reject, failure) strictly in input
 * order. Private to the ingest modules.
 *
 * @module
 */

import { RowError } from "../stream/row_error.ts";
import { DiskFullError } from "../stream/disk_gate.ts";
import { isNoSpace } from "../../common/free_space.ts";
import { sleep } from "../../common/backoff.ts";
import type {
  IngestBatch,
  IngestEvent,
  IngestOptions,
  IngestOrigin,
  IngestSink,
  IngestStats,
  RejectSink,
} from "./options.ts";

// How long a feeder waits before sending again what a full disk refused,
// when its sink cannot say when it takes rows again.
const DISK_RETRY_MS = 1000;

/**
 * Where an ingest's events go: `onEvent`, else each event's `msg` to `log`
 * (stderr by default).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { eventsTo } from "./_feeder.ts";
 * const lines: string[] = [];
 * const emit = eventsTo({ log: (m) => lines.push(m) });
 * emit({ event: "upstream_connected", stream: "t", url: "ws://h/", msg: "streamcast: hi" });
 * deepStrictEqual(lines, ["streamcast: hi"]);
 * ```
 */
export function eventsTo(options: IngestOptions): (event: IngestEvent) => void {
  if (options.onEvent !== undefined) return options.onEvent;
  const log = options.log ?? console.error;
  return (event) => log(event.msg);
}

/**
 * A reject found before the sink saw anything: bad JSON, UTF-8, length, handler.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { InputReject } from "./_feeder.ts";
 * equal(new InputReject("line is not valid UTF-8").message, "line is not valid UTF-8");
 * ```
 */
export class InputReject {
  readonly message: string;
  constructor(message: string) {
    this.message = message;
  }
}

// One row, or (`count` > 1) a run of consecutive rows stored by one
// `sendJson` call, which settle together. What was sent is kept (`row`, or
// the run's `lines` and `texts`) until it settles, to be sent again when a
// full disk refused it.
interface Pending {
  readonly line: number;
  readonly input: string;
  readonly count: number;
  settled: boolean;
  ok: boolean;
  error: unknown;
  row?: unknown;
  lines?: readonly number[];
  texts?: readonly string[];
}

// Sent while the feeder waits for a full disk: held, and sent after the rows it refused.
const HELD = Symbol("held behind a full disk");

// Whether `error` (of a settled entry) is the sink's full disk.
function diskFull(error: unknown): boolean {
  const e = error instanceof Unstored ? error.error : error;
  return e === HELD || e instanceof DiskFullError || isNoSpace(e);
}

/**
 * What a feeder does with rows a full disk refused: `resend` them once the
 * sink takes rows again (`IngestSink.ready`), in order, reading no more
 * input meanwhile (stdin); or drop them and tell `dropped` (an upstream,
 * which disconnects and says what it missed).
 */
export type DiskFullPolicy = { resend: true } | {
  resend: false;
  dropped(rows: number, error: unknown): void;
};

/**
 * Pipelines rows into a sink and reports outcomes strictly in input order.
 * Input rejects queue behind the rows sent before them, so `onReject` sees
 * line 5 after line 3 even when line 3's verdict comes from an async sink.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Feeder } from "./_feeder.ts";
 * const sink = { name: "t", send: () => Promise.resolve(1) };
 * const feeder = new Feeder(sink, { log: () => {} }, (n) => `stdin line ${n}`, () => {}, {
 *   source: "stdin",
 * });
 * feeder.send(1, '{"x":1}', { x: 1 });
 * await feeder.drain();
 * equal(feeder.stats.accepted, 1);
 * ```
 */
export class Feeder {
  readonly stats: IngestStats = { lines: 0, accepted: 0, rejected: 0 };
  readonly #sink: IngestSink;
  readonly #onReject: RejectSink | undefined;
  readonly #emit: (event: IngestEvent) => void;
  readonly #origin: IngestOrigin;
  readonly #maxInFlight: number;
  readonly #where: (line: number) => string;
  readonly #onFatal: () => void;
  #queue: Pending[] = [];
  #head = 0;
  // Rows in the queue (a run counts its rows).
  #inFlight = 0;
  #rejectsWriting = 0;
  #fatal: { error: unknown } | undefined;
  #waiters: (() => void)[] = [];
  readonly #diskFull: DiskFullPolicy;
  readonly #signal: AbortSignal | undefined;
  // Waiting for the sink to take rows again, to send again what it refused.
  #retrying = false;

  constructor(
    sink: IngestSink,
    options: IngestOptions,
    where: (line: number) => string,
    onFatal: () => void,
    origin: IngestOrigin,
    diskFull: DiskFullPolicy = { resend: true },
  ) {
    const maxInFlight = options.maxInFlight ?? 4096;
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) {
      throw new RangeError(`Cannot ingest with maxInFlight ${maxInFlight}: need an integer ≥ 1`);
    }
    this.#sink = sink;
    this.#onReject = options.onReject;
    this.#emit = eventsTo(options);
    this.#origin = origin;
    this.#maxInFlight = maxInFlight;
    this.#where = where;
    this.#onFatal = onFatal;
    this.#diskFull = diskFull;
    this.#signal = options.signal;
  }

  get failed(): boolean {
    return this.#fatal !== undefined;
  }

  /** Whether no more may be sent now: `maxInFlight` is reached, or a full disk is waited for. */
  get full(): boolean {
    return this.#retrying || this.space <= 0;
  }

  /** How many more rows may be sent before `maxInFlight` is reached. */
  get space(): number {
    return this.#maxInFlight - this.#inFlight - this.#rejectsWriting;
  }

  send(line: number, input: string, row: unknown): void {
    const entry: Pending = { line, input, count: 1, settled: false, ok: false, error: undefined };
    if (this.#diskFull.resend) entry.row = row;
    this.#queue.push(entry);
    this.#inFlight++;
    if (this.#retrying) {
      // Behind rows a full disk refused: sent after them.
      entry.settled = true;
      entry.error = HELD;
      return;
    }
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

  /** Whether the sink takes rows as JSON texts, in batches (`sendJson`). */
  get batches(): boolean {
    return this.#sink.sendJson !== undefined;
  }

  /**
   * Sends rows given as JSON texts (of lines `lines`) together, through the
   * sink's `sendJson` (see `batches`): a run of stored rows is one entry,
   * each refused text one of its own, all in line order. The arrays are
   * kept until their rows settle (to be sent again after a full disk): the
   * caller does not change them afterwards.
   */
  sendJson(lines: readonly number[], texts: readonly string[]): void {
    if (texts.length === 0) return;
    let batch: IngestBatch;
    if (this.#retrying) {
      // Behind rows a full disk refused: sent after them.
      batch = { refused: null, durable: Promise.reject(HELD) };
      batch.durable.catch(() => {});
    } else {
      try {
        batch = this.#sink.sendJson!(texts);
      } catch (error) {
        batch = { refused: null, durable: Promise.reject(error) };
      }
    }
    const refused = batch.refused;
    const runs: Pending[] = [];
    let start = 0;
    const run = (end: number): void => {
      if (end === start) return;
      const entry: Pending = {
        line: lines[start],
        input: "",
        count: end - start,
        settled: false,
        ok: false,
        error: undefined,
      };
      if (this.#diskFull.resend) {
        // The arrays are the caller's to give away (lines.ts makes new ones
        // each batch): a run of all of them is kept as it is, not copied.
        const whole = start === 0 && end === texts.length;
        entry.lines = whole ? lines : lines.slice(start, end);
        entry.texts = whole ? texts : texts.slice(start, end);
      }
      runs.push(entry);
      this.#queue.push(entry);
      this.#inFlight += entry.count;
    };
    if (refused !== null) {
      for (let i = 0; i < texts.length; i++) {
        const error = refused[i];
        if (error === undefined) continue;
        run(i);
        start = i + 1;
        this.#queue.push({
          line: lines[i],
          input: texts[i],
          count: 1,
          settled: true,
          ok: false,
          // A text that is not JSON is a reject of the input, as when parsed here.
          error: error instanceof SyntaxError ? new InputReject(error.message) : error,
        });
        this.#inFlight++;
      }
    }
    run(texts.length);
    batch.durable.then(
      () => {
        for (const entry of runs) entry.settled = entry.ok = true;
        this.#pump();
      },
      (error) => {
        for (const entry of runs) {
          entry.settled = true;
          // Not a reject, whatever the error: stored rows that did not become durable.
          entry.error = new Unstored(error);
        }
        this.#pump();
      },
    );
    if (refused !== null) this.#pump();
  }

  reject(line: number, input: string, message: string): void {
    this.#queue.push({
      line,
      input,
      count: 1,
      settled: true,
      ok: false,
      error: new InputReject(message),
    });
    this.#inFlight++;
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
    if (this.#retrying) {
      this.#notify(); // the retry waits for what is in flight to settle
      return;
    }
    const queue = this.#queue;
    while (this.#head < queue.length && queue[this.#head].settled) {
      const entry = queue[this.#head];
      if (!entry.ok && diskFull(entry.error)) {
        if (this.#diskFull.resend) {
          void this.#retry();
          return;
        }
        this.#diskFull.dropped(
          entry.count,
          entry.error instanceof Unstored ? entry.error.error : entry.error,
        );
        queue[this.#head++] = undefined as unknown as Pending;
        this.#inFlight -= entry.count;
        continue;
      }
      queue[this.#head++] = undefined as unknown as Pending;
      this.#inFlight -= entry.count;
      if (entry.ok) this.stats.accepted += entry.count;
      else if (entry.error instanceof Unstored) this.fail(entry.error.error);
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

  // A full disk refused the entry at the head (and, the stream having
  // stopped at once, every one after it): once the sink takes rows again,
  // everything from it on is sent again, in order; what did not reach the
  // sink (input rejects) keeps its place. No input is read meanwhile. When
  // ingest stops first, the rows not stored fail it.
  async #retry(): Promise<void> {
    this.#retrying = true;
    const stopped = new Promise<void>((resolve) => {
      if (this.#signal?.aborted) resolve();
      this.#signal?.addEventListener("abort", () => resolve(), { once: true });
    });
    const ready = this.#sink.ready?.() ?? sleep(DISK_RETRY_MS);
    await Promise.race([ready, stopped]);
    const queue = this.#queue;
    while (queue.slice(this.#head).some((e) => !e.settled)) await this.#wait();
    const rest = queue.splice(this.#head);
    for (const e of rest) this.#inFlight -= e.count;
    this.#retrying = false;
    if (this.#signal?.aborted) {
      const failed = rest.find((e) => !e.ok && diskFull(e.error));
      this.fail(failed?.error instanceof Unstored ? failed.error.error : failed?.error);
      this.#notify();
      return;
    }
    for (const e of rest) {
      if (e.ok || !diskFull(e.error)) {
        queue.push(e);
        this.#inFlight += e.count;
      } else if (e.texts !== undefined) this.sendJson(e.lines!, e.texts);
      else this.send(e.line, e.input, e.row);
    }
    this.#pump();
  }

  #report(entry: Pending, message: string): void {
    this.stats.rejected++;
    try {
      const stream = this.#sink.name;
      this.#emit({
        event: "reject",
        stream,
        ...this.#origin,
        line: entry.line,
        error: message,
        input: entry.input,
        msg: `streamcast: ${this.#where(entry.line)} for stream "${stream}": ${message}`,
      });
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

// A failure of stored rows (from `sendJson`'s `durable`), whatever its class:
// never a reject.
class Unstored {
  readonly error: unknown;
  constructor(error: unknown) {
    this.error = error;
  }
}

/**
 * An error's message, or the thrown value as text.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { errorMessage } from "./_feeder.ts";
 * equal(errorMessage(new Error("bad")), "bad");
 * equal(errorMessage("worse"), "worse");
 * ```
 */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
