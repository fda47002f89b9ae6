/**
 * Ingest of NDJSON lines (`serve --stdin NAME`): each line one JSON row.
 *
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { ingestLines } from "./lines.ts";
 * import type { IngestSink } from "./options.ts";
 * import { RowError } from "../stream/row_error.ts";
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
 * deepStrictEqual(stats, { lines: 3, accepted: 2, rejected: 1 });
 * ```
 *
 * @module
 */

import { setImmediate } from "node:timers";
import { DEFAULT_MAX_ROW_BYTES } from "../limits.ts";
import { decodeLine, lossyUtf8 } from "./_decode.ts";
import { errorMessage, eventsTo, Feeder } from "./_feeder.ts";
import { LineSplitter, type TooLong } from "./_line_splitter.ts";
import type { IngestOptions, IngestSink, IngestStats } from "./options.ts";

/**
 * The longest line {@linkcode ingestLines} accepts by default: the default
 * row limit (16 MiB), as a row's line is its JSON.
 */
export const MAX_LINE_BYTES: number = DEFAULT_MAX_ROW_BYTES;

/**
 * Rows {@linkcode ingestLines} sends before awaiting the oldest, by default.
 * A commit takes the rows sent while the one before it was being written and
 * synced, so with W rows in flight a commit holds at most about W / 2: at
 * 4096 and a 2–4 ms `syncData`, that alone held ingest under 1–2 M rows/s.
 * 65536 rows of trade-sized lines hold about 10 MB.
 */
export const LINES_IN_FLIGHT: number = 65536;

// An input loop that has not yielded to the event loop for this long does, so
// a fast in-memory input cannot starve timers and sockets.
const YIELD_EVERY_MS = 10;
const BLANK = /^[ \t\r]*$/;

/**
 * Bytes {@linkcode ingestLines} reads from a {@linkcode ByteSource} at once,
 * into one buffer it keeps for the whole input.
 */
export const READ_BUFFER_BYTES: number = 64 * 1024;

/**
 * An input read into a buffer the reader gives, as `Deno.stdin` is: resolves
 * with the bytes read into its front, or null at the end of the input.
 *
 * {@linkcode ingestLines} reads such an input into one buffer it reuses, so a
 * read allocates nothing (a `ReadableStream` of bytes hands out a new chunk a
 * read), and splits each read's lines before it reads again. A read is taken
 * to complete in a turn of the event loop of its own, as an I/O call's does
 * (timers and sockets have run by then), so ingest adds no turn to yield.
 */
export interface ByteSource {
  /** Reads into `buffer`; the count read, or null at the end of the input. */
  read(buffer: Uint8Array): Promise<number | null>;
}

// The next chunk of `input`, or null at its end. `stop` ends a read in
// flight at once (a read of stdin cannot be cancelled: when it completes,
// its bytes land in a buffer no one reads).
interface Chunks {
  next(): Promise<Uint8Array | null>;
  // Whether a read completes in a turn of the event loop (see ByteSource).
  readonly turns: boolean;
  stop(reason: unknown): void;
  done(): void;
}

function streamChunks(input: ReadableStream<Uint8Array>): Chunks {
  const reader = input.getReader();
  return {
    async next() {
      const { done, value } = await reader.read();
      return done ? null : value;
    },
    // Ends a pending read; its own failure (input already errored) is moot.
    stop: (reason) => void reader.cancel(reason).catch(() => {}),
    done: () => reader.releaseLock(),
    // Chunks already queued come in microtasks, not turns.
    turns: false,
  };
}

function sourceChunks(input: ByteSource): Chunks {
  const buffer = new Uint8Array(READ_BUFFER_BYTES);
  let stopped = false;
  let end: (() => void) | null = null;
  return {
    next() {
      if (stopped) return Promise.resolve(null);
      return new Promise((resolve, reject) => {
        end = () => resolve(null);
        input.read(buffer).then((n) => {
          end = null;
          resolve(n === null ? null : buffer.subarray(0, n));
        }, reject);
      });
    },
    stop() {
      stopped = true;
      end?.();
    },
    done() {},
    turns: true,
  };
}

/**
 * Options of {@linkcode ingestLines}.
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
  /**
   * Rows sent to the sink before awaiting the oldest.
   *
   * @default {65536}
   */
  maxInFlight?: number;
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Reads NDJSON from `input` (a byte stream, or a {@linkcode ByteSource} such as
 * `Deno.stdin`, read into one reused buffer) — each line one JSON row — and sends the rows to
 * `sink` in order, pipelining up to `maxInFlight`. Blank lines are skipped (not
 * rejects, but they count in the line numbering). A line that is not UTF-8, not
 * JSON, too long, or refused by the sink with `RowError` or
 * `RangeError` (a row too big for the log: `row too big: payload is N bytes;
 * the limit is M`) is reported (a `reject` event, logged as
 * `streamcast: stdin line 3 for stream "trades": …`), passed to `onReject`,
 * counted, and ingest continues. Handles `\r\n`, a last line without newline,
 * and multi-byte characters split across chunks.
 *
 * Resolves when input ends, after every accepted row is durable, and reports
 * `end_of_input`, logged as
 * `streamcast: end of stdin for stream "NAME" (N rows accepted, M rejected);
 * still serving`. If `signal` aborts, input is cancelled and it resolves once
 * the rows sent have settled (without that message). Any other
 * rejection from the sink, a failing `onReject`, or an input read error stops
 * ingest, cancels the input, and is thrown once sent rows settle.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { ingestLines } from "./lines.ts";
 * import { RowError } from "../stream/row_error.ts";
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
 * deepStrictEqual(stats, { lines: 4, accepted: 2, rejected: 1 }); // a blank line is no row
 * equal(lines[0], 'streamcast: stdin line 3 for stream "trades": must be object');
 * ```
 */
export async function ingestLines(
  input: ReadableStream<Uint8Array> | ByteSource,
  sink: IngestSink,
  options: LinesOptions = {},
): Promise<IngestStats> {
  const source = options.source ?? "stdin";
  const maxLineBytes = options.maxLineBytes ?? MAX_LINE_BYTES;
  if (!Number.isInteger(maxLineBytes) || maxLineBytes < 1) {
    throw new RangeError(`Cannot ingest with maxLineBytes ${maxLineBytes}: need an integer ≥ 1`);
  }
  const emit = eventsTo(options);
  const signal = options.signal;
  let stopped = false;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    chunks.stop(signal?.reason);
  };
  // Before the input is read, so that bad options leave it unlocked.
  const feeder = new Feeder(
    sink,
    { ...options, maxInFlight: options.maxInFlight ?? LINES_IN_FLIGHT },
    (n) => `${source} line ${n}`,
    stop,
    { source },
  );
  const chunks = input instanceof ReadableStream ? streamChunks(input) : sourceChunks(input);
  const splitter = new LineSplitter(maxLineBytes);

  // With a sink that takes JSON texts (a stream: `IngestSink.sendJson`), the
  // lines of the chunk being read are sent together (it parses what it must):
  // before any input reject (so rejects stay in line order), before waiting
  // for room, and at the end of the chunk. Otherwise each row is parsed here
  // and sent on its own.
  const batches = feeder.batches;
  let lines: number[] = [];
  let texts: string[] = [];
  const flush = (): void => {
    if (texts.length === 0) return;
    feeder.sendJson(lines, texts);
    lines = [];
    texts = [];
  };
  const reject = (n: number, input: string, message: string): void => {
    flush();
    feeder.reject(n, input, message);
  };

  const handle = (line: string | Uint8Array | TooLong): void => {
    const n = ++feeder.stats.lines;
    let text: string | undefined;
    if (typeof line === "string") text = line;
    else if (!(line instanceof Uint8Array)) {
      reject(
        n,
        lossyUtf8.decode(line.preview),
        `line is ${line.bytes} bytes, longer than the limit of ${maxLineBytes} bytes ` +
          `(skipped to the next newline; input holds its first ${line.preview.length} bytes)`,
      );
      return;
    } else {
      text = decodeLine(line);
      if (text === undefined) {
        reject(n, lossyUtf8.decode(line), "line is not valid UTF-8");
        return;
      }
    }
    if (text.length === 0) return;
    if (batches) {
      // A line of only blanks is skipped; JSON allows them around a value.
      if (text.charCodeAt(0) <= 32 && BLANK.test(text)) return;
      lines.push(n);
      texts.push(text);
      return;
    }
    let row: unknown;
    try {
      row = JSON.parse(text);
    } catch (error) {
      if (!BLANK.test(text)) reject(n, text, errorMessage(error));
      return;
    }
    feeder.send(n, text, row);
  };

  signal?.addEventListener("abort", stop, { once: true });
  try {
    if (signal?.aborted) stop();
    let yielded = performance.now();
    while (!stopped) {
      const value = await chunks.next();
      if (value === null || stopped) break;
      if (chunks.turns) yielded = performance.now();
      // The chunk may be a view of a buffer the next read reuses: its lines
      // are all handed out (the splitter copies what it holds) before then.
      splitter.feed(value);
      for (let line = splitter.next(); line !== null && !stopped; line = splitter.next()) {
        handle(line);
        if (texts.length >= feeder.space) {
          flush();
          if (feeder.full) {
            await feeder.room();
            yielded = performance.now();
          }
        }
      }
      flush();
      if (feeder.full) {
        await feeder.room();
        yielded = performance.now();
      }
      if (performance.now() - yielded > YIELD_EVERY_MS) {
        await yieldToEventLoop();
        yielded = performance.now();
      }
    }
    if (!stopped) {
      const last = splitter.end();
      if (last !== null) handle(last);
      flush();
      chunks.done();
    }
  } catch (error) {
    feeder.fail(error);
  } finally {
    signal?.removeEventListener("abort", stop);
  }
  await feeder.drain();
  if (!signal?.aborted) {
    const { accepted, rejected } = feeder.stats;
    emit({
      event: "end_of_input",
      stream: sink.name,
      source,
      accepted,
      rejected,
      msg: `streamcast: end of ${source} for stream "${sink.name}" ` +
        `(${accepted} rows accepted, ${rejected} rejected); still serving`,
    });
  }
  return { ...feeder.stats };
}
