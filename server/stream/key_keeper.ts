/**
 * A keyed stream's index kept in step with its log's commits: each commit's
 * rows are applied as they reach the fan-out (the appender's `committed`);
 * a commit whose rows the appender does not have (rows reaching the
 * subscribers through the log: a fence, a cluster follower's commits it could
 * not track) sends the index to the log, where it reads from its `end` to the
 * log's durable end, then takes commits' rows again. At each seal (and at
 * close) the index is saved to the key file (`key_file.ts`); at start it is
 * the key file's, then the rows after it read from the log.
 *
 * Invariants:
 * - every committed row is applied once: the index's `end` says which were
 *   (see `key_index.ts`), and a row given twice, or a commit overlapping rows
 *   read from the log, is skipped below it;
 * - while it reads from the log, commits' rows are not applied (the reads
 *   reach them); it takes them again in the step in which it finds its `end`
 *   at the log's durable end;
 * - saves are one at a time, each of the index as it was when the save began.
 *
 * @module
 */

import { type Log, LogEvictedError } from "../../log/mod.ts";
import type { Logger } from "../../common/logger.ts";
import type { KeyIndex } from "./key_index.ts";
import { KeyFileError, readKeyFile, saveKeyFile } from "./key_file.ts";

const decoder = new TextDecoder();

// Lets other work run between the slices of a save.
const yieldTurn = (): Promise<void> => new Promise((r) => setTimeout(r, 0));

/** Bytes read from the log per step of a catch-up. */
const READ_BYTES = 1 << 20;

/**
 * Keeps a {@linkcode KeyIndex} in step with `log` (see the module doc).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../../log/mod.ts";
 * import { compileSchema } from "../../schema/compile.ts";
 * import { KeyColumns } from "./key_columns.ts";
 * import { KeyIndex } from "./key_index.ts";
 * import { KeyKeeper } from "./key_keeper.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { timers: false });
 * await log.appendMany(['{"s":"a"}', '{"s":"b"}', '{"s":"a"}']);
 * const schema = compileSchema({ type: "object", properties: { s: { type: "string" } }, required: ["s"] });
 * const keeper = new KeyKeeper(log, new KeyIndex(KeyColumns.of(schema, ["s"]), 10, log.firstOffset));
 * await keeper.start();
 * equal(keeper.index.end, 4);
 * equal(keeper.index.size, 2);
 * await keeper.close();
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class KeyKeeper {
  /** The index kept. */
  readonly index: KeyIndex;
  readonly #log: Log;
  readonly #logger: Logger;
  // A catch-up from the log is running (commits' rows are not applied meanwhile).
  #behind = false;
  #reading: Promise<void> | null = null;
  #saving: Promise<void> | null = null;
  #saveAgain = false;
  #closed = false;

  /** Keeps `index` for `log`. */
  constructor(log: Log, index: KeyIndex) {
    this.#log = log;
    this.index = index;
    this.#logger = log.logger;
  }

  /**
   * Loads the key file (a damaged or another log's file is warned about and
   * left: the index is rebuilt from what the log holds), then reads the rows
   * after it from the log. Resolves once the index reached the log's end.
   */
  async start(): Promise<void> {
    const log = this.#log;
    const index = this.index;
    try {
      const body = await readKeyFile(log.dir, log.streamId, index.columns.names);
      if (body !== null && body.end <= log.endOffset) index.load(body.end, body.entries);
      else if (body !== null) {
        this.#logger.warn("key_file_ahead", {
          stream: log.name,
          end: body.end,
          end_offset: log.endOffset,
          detail: "the key file is past the log's end: rebuilt from the log",
        });
      }
    } catch (err) {
      if (!(err instanceof KeyFileError)) throw err;
      this.#logger.warn("key_file_unusable", {
        stream: log.name,
        error: err.message,
        detail: "rebuilt from the log",
      });
    }
    this.fromLog();
    await this.#reading;
  }

  /**
   * A commit made `[first, end)` durable; `rows` are its rows (null: the
   * appender does not have them, they are read from the log).
   */
  committed(first: number, end: number, rows: readonly string[] | null): void {
    if (this.#behind || end <= this.index.end) return;
    if (rows === null || !this.index.apply(first, rows)) this.fromLog();
  }

  /** Reads the rows past the index's end from the log (unless reading already). */
  fromLog(): void {
    if (this.#behind || this.#closed) return;
    this.#behind = true;
    this.#reading = this.#read().catch((err) => {
      this.#behind = false;
      this.#logger.error("key_index_failed", { stream: this.#log.name, error: String(err) });
    });
  }

  async #read(): Promise<void> {
    const log = this.#log;
    const index = this.index;
    while (!this.#closed && index.end < log.endOffset) {
      const earliest = log.earliest;
      if (earliest === null || earliest > index.end) {
        // Rows below the earliest held are gone: the index skips them.
        if (index.end > log.firstOffset || index.size > 0) {
          this.#logger.warn("key_rows_dropped", {
            stream: log.name,
            from: index.end,
            to: earliest ?? log.endOffset,
          });
        }
        index.skipTo(earliest ?? log.endOffset);
        continue;
      }
      const reader = log.reader(index.end);
      try {
        while (!this.#closed && index.end < log.endOffset) {
          const batch = await reader.read(READ_BYTES);
          if (batch.count === 0) {
            // A gap (a fence) below the end: nothing there to apply.
            index.skipTo(Math.min(reader.offset, log.endOffset));
            if (index.end < log.endOffset) await new Promise((r) => setTimeout(r, 1));
            continue;
          }
          const rows: string[] = new Array(batch.count);
          for (let i = 0; i < batch.count; i++) {
            const at = batch.starts[i];
            rows[i] = decoder.decode(batch.buf.subarray(at, at + batch.lengths[i]));
          }
          const first = batch.offsets[0];
          index.skipTo(first); // a gap before it
          index.apply(first, rows);
        }
      } catch (err) {
        if (!(err instanceof LogEvictedError)) throw err;
        // Retention dropped rows meanwhile: start again from what is held.
      } finally {
        reader.close();
      }
    }
    // In the step that finds the end: commits' rows are applied from the next one.
    this.#behind = false;
  }

  /** The log sealed a segment: save the index to the key file. */
  sealed(): void {
    if (this.#closed) return;
    void this.save();
  }

  /**
   * Saves the index to the key file (after the save running, if any);
   * resolves once saved. A failed save is logged: the old file stays.
   */
  save(): Promise<void> {
    if (this.#saving !== null) {
      this.#saveAgain = true;
      return this.#saving;
    }
    const log = this.#log;
    const index = this.index;
    const body = {
      streamId: log.streamId,
      columns: index.columns.names,
      end: index.end,
      entries: index.entries(),
    };
    this.#saving = saveKeyFile(log.dir, body, log.io, yieldTurn).catch((err) => {
      this.#logger.warn("key_file_not_saved", { stream: log.name, error: String(err) });
    }).finally(() => {
      this.#saving = null;
      if (this.#saveAgain && !this.#closed) {
        this.#saveAgain = false;
        void this.save();
      }
    });
    return this.#saving;
  }

  /** Stops reading, waits for a save running, and saves the index once more. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#reading;
    await this.#saving;
    await this.save();
  }
}
