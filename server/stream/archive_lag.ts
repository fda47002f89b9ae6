/**
 * How far a log's archive lags the log (`/head` `archive_lag`).
 *
 * @module
 */

import type { Log } from "../../log/mod.ts";

/** Rows the log holds beyond the archive's end, the age of the oldest of them, the last upload error. */
export interface ArchiveLag {
  /** Rows not archived yet. */
  rows: number;
  /** Age in seconds of the oldest row not archived (0 when none). */
  seconds: number;
  /** The archive's last error, or null. */
  error: string | null;
}

/**
 * How far `log`'s archive lags it: rows beyond the archive's end, and the age
 * of the oldest of them (0 when none).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../../log/mod.ts";
 * import { archiveLagOf } from "./archive_lag.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { timers: false });
 * await log.append(new TextEncoder().encode("{}"));
 * equal(archiveLagOf(log).rows, 1);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function archiveLagOf(log: Log): ArchiveLag {
  const st = log.archive.state;
  const through = st?.through ?? 0;
  const rows = log.rowsBetween(through + 1, log.endOffset);
  let seconds = 0;
  if (rows > 0) {
    // The oldest row not archived: in the first local chunk or segment after `through`.
    const c = log.chunks.manifest?.chunks.find((x) => x.last > through);
    const firstUs = c?.first_ts ??
      log.segments().find((x) => x.count > 0 && x.firstOffset + x.count - 1 > through)
        ?.firstTimeUs ??
      0;
    if (firstUs) seconds = Math.max(0, (Date.now() * 1000 - firstUs) / 1e6);
  }
  return { rows, seconds, error: st?.lastError ?? null };
}
