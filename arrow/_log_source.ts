/**
 * The rows an export reads, as record batches of a range: the {@linkcode Source}
 * interface, and the source over an open log (its own readers). The source over
 * a log folder without its lock is the log's `FolderReader`.
 *
 * @module
 */

import type { Log, RecordBatch, TimeLookup } from "../log/mod.ts";
import { clipBatch } from "../log/segment/reader.ts";

/**
 * Bytes read from the log per step.
 */
export const READ_BYTES = 1 << 20;

/**
 * Where an export's rows come from: an open log, or a folder read without its lock.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log/mod.ts";
 * import { openLog, type Source } from "./_log_source.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * const source: Source = openLog(log);
 * equal(source.earliest, null);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export interface Source {
  /** The earliest offset held, or null when the log holds no row. */
  earliest: number | null;
  /** The last offset held when the export started, or null. */
  last: number | null;
  /** Record batches with offsets in `[from, to]`, in order. */
  read(from: number, to: number): AsyncIterable<RecordBatch>;
  /** Where a time (µs) starts: the log's time lookup (for `since`/`until`). */
  offsetAt(sinceUs: number): Promise<TimeLookup>;
}

/**
 * An open log as a {@linkcode Source}, read through its own readers.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Log } from "../log/mod.ts";
 * import { openLog } from "./_log_source.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.appendMany(["1", "2"].map((t) => new TextEncoder().encode(t)));
 * const source = openLog(log);
 * const offsets: number[] = [];
 * for await (const batch of source.read(2, 2)) offsets.push(...batch.offsets);
 * deepStrictEqual(offsets, [2]);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function openLog(log: Log): Source {
  const last = log.endOffset - 1;
  return {
    earliest: log.earliest,
    last: log.earliest === null ? null : last,
    offsetAt: (us) => log.offsetAt(us),
    async *read(from, to) {
      const reader = log.reader(from);
      try {
        while (true) {
          const batch = await reader.read(READ_BYTES);
          if (batch.count === 0) return;
          const out = clipBatch(batch, from, to);
          if (out.count > 0) yield out;
          if (batch.offsets[batch.count - 1] >= to) return;
        }
      } finally {
        reader.close();
      }
    },
  };
}
