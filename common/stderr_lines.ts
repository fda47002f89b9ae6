/**
 * Lines for stderr, written together: a line is queued and every line queued
 * in one turn of the event loop goes out in one write at the end of it
 * (`setImmediate`), instead of one write (a system call) per line. A server
 * logging an event per subscribe otherwise makes a thousand writes for a
 * thousand subscribes arriving at once.
 *
 * `flush()` writes what is queued at once; the process's exits call it (the
 * `unload` event covers `Deno.exit` and the end of the program), and callers
 * flush before lines that must not wait (an error the process may die of).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { StderrLines } from "./stderr_lines.ts";
 * const written: string[] = [];
 * const lines = new StderrLines((bytes) => {
 *   written.push(new TextDecoder().decode(bytes));
 *   return bytes.length;
 * });
 * lines.write("one");
 * lines.write("two");
 * equal(written.length, 0); // queued until the end of the turn
 * lines.flush();
 * equal(written[0], "one\ntwo\n");
 * ```
 *
 * @module
 */

import { setImmediate } from "node:timers";
import type { LogLevel } from "./logger.ts";

/** Writes some of `bytes` and says how many (as `Deno.stderr.writeSync`). */
export type WriteSync = (bytes: Uint8Array) => number;

/** Most bytes queued before a write is made at once rather than at the end of the turn. */
export const STDERR_FLUSH_BYTES = 64 * 1024;

const encoder = new TextEncoder();

/** Lines queued for one write a turn (see the module doc). */
export class StderrLines {
  readonly #write: WriteSync;
  #queued = "";
  #scheduled = false;

  /** Lines written with `write` (a synchronous, possibly partial, write). */
  constructor(write: WriteSync) {
    this.#write = write;
  }

  /** Queues `line` (without its newline); the queue is written at the end of this turn. */
  write(line: string): void {
    this.#queued += line + "\n";
    if (this.#queued.length >= STDERR_FLUSH_BYTES) {
      this.flush();
      return;
    }
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.flush();
    });
  }

  /** Writes every queued line now. A write that fails (a closed stderr) drops them. */
  flush(): void {
    if (this.#queued === "") return;
    const bytes = encoder.encode(this.#queued);
    this.#queued = "";
    try {
      for (let done = 0; done < bytes.length;) done += this.#write(bytes.subarray(done));
    } catch {
      // A closed stderr must not take the server down with it.
    }
  }
}

/** The process's stderr, one write a turn; flushed when the process exits. */
export const stderrLines: StderrLines = new StderrLines((b) => Deno.stderr.writeSync(b));

globalThis.addEventListener("unload", () => stderrLines.flush());

/**
 * A `Logger`'s `write` for a server process: info and debug lines are
 * queued for one write a turn; a warn or error line goes out at once with
 * everything queued before it, so the line a process dies after is never
 * left in the queue.
 *
 * @example
 * ```ts
 * import { Logger } from "./logger.ts";
 * import { batchedStderr } from "./stderr_lines.ts";
 * const logger = new Logger({ level: "error", write: batchedStderr });
 * logger.info("subscribe", { stream: "trades" }); // below the level: nothing written
 * ```
 */
export function batchedStderr(line: string, level: LogLevel): void {
  stderrLines.write(line);
  if (level === "warn" || level === "error") stderrLines.flush();
}
