/**
 * The rejects file (`ROOT/NAME/rejects.ndjson`): one NDJSON line per bad
 * input line or frame, `{"line":N,"error":"…","input":"<raw>"}`.
 *
 * @module
 */

import { dirname } from "node:path";
import { writeAll } from "../../common/write_all.ts";
import type { RejectRecord, RejectSink } from "./options.ts";

/**
 * The {@linkcode RejectSink} that {@linkcode rejectFile} returns: each call
 * resolves once its line is written; `close()` flushes, syncs and closes.
 */
export interface RejectFile extends RejectSink {
  /** Appends one reject line; resolves once it is written. */
  (rec: RejectRecord): Promise<void>;
  /** Waits for pending lines, syncs and closes the file. Later calls reject. */
  close(): Promise<void>;
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
 * import { ingestLines } from "./lines.ts";
 * import type { IngestSink } from "./options.ts";
 * import { rejectFile } from "./reject_file.ts";
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
