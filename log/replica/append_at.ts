/**
 * Appending rows at offsets another log chose (a mirror writing the
 * primary's rows): rows at or below what the replica holds are skipped (a
 * reconnect may send some again); a run of consecutive offsets is one
 * commit; a jump forward is kept as a fenced gap — a new segment starts at
 * the next offset given, as {@linkcode Log.fence} does — so that the replica's
 * offsets are exactly the primary's.
 *
 * @module
 */

/** What {@linkcode appendAt} needs of a log. */
export interface AppendAtLog {
  /** The next offset the log would assign. */
  readonly nextOffset: number;
  /** Starts a new segment at `offset` (above everything issued). */
  fence(offset: number): Promise<void>;
  /** Appends payloads in one commit at the next offsets. */
  appendMany(payloads: readonly (Uint8Array | string)[]): Promise<number>;
}

/**
 * Appends `payloads[i]` at `offsets[i]` (increasing), one commit per run of
 * consecutive offsets; `appended(from, to)` is told, synchronously after
 * each run is handed to the log and before it is durable, which indexes
 * `[from, to)` of `payloads` it holds. Resolves with the number of rows
 * appended once all are durable.
 *
 * @throws {RangeError} when offsets do not increase or the lengths differ.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../mod.ts";
 * import { appendAt } from "./append_at.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { timers: false });
 * equal(await appendAt(log, [1, 2, 10], ["{}", "{}", "{}"]), 3);
 * equal(log.endOffset, 11);
 * equal(log.rowsBetween(1, 11), 3);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function appendAt(
  log: AppendAtLog,
  offsets: readonly number[],
  payloads: readonly (Uint8Array | string)[],
  appended?: (from: number, to: number) => void,
): Promise<number> {
  if (offsets.length !== payloads.length) {
    throw new RangeError(`${offsets.length} offsets for ${payloads.length} payloads`);
  }
  for (let i = 0; i < offsets.length; i++) {
    const o = offsets[i];
    if (!Number.isSafeInteger(o) || o < 1 || (i > 0 && o <= offsets[i - 1])) {
      throw new RangeError(`offsets must be integers ≥ 1 that increase; got ${o} at ${i}`);
    }
  }
  let i = 0;
  // What the log holds already.
  while (i < offsets.length && offsets[i] < log.nextOffset) i++;
  let rows = 0;
  while (i < offsets.length) {
    let j = i + 1;
    while (j < offsets.length && offsets[j] === offsets[j - 1] + 1) j++;
    if (offsets[i] > log.nextOffset) await log.fence(offsets[i]);
    const done = log.appendMany(payloads.slice(i, j));
    appended?.(i, j);
    await done;
    rows += j - i;
    i = j;
  }
  return rows;
}
