/**
 * Fencing: starting a new, empty segment at an offset above everything ever
 * issued (restore after failover), so that no offset is handed out twice. The
 * log's part is the bookkeeping; this is the part on disk, in a crash-safe
 * order.
 *
 * @module
 */

import { readMeta, writeMeta } from "./log_meta.ts";
import type { ResolvedOptions } from "./options.ts";
import { SegmentWriter } from "./segment/writer.ts";
import { type Active, createSegmentFile, initialState, newSegmentState } from "./segment/state.ts";
import type { CommitLog } from "./committer.ts";

/**
 * Replaces the empty active segment `old` of `log` by a new one starting at
 * `offset`, on disk; returns the new active segment. The caller has sealed
 * what `old` held.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "./mod.ts";
 * // The log calls it from Log.fence:
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { timers: false });
 * await log.append("{}");
 * await log.fence(1000);
 * equal(log.nextOffset, 1000);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function fenceSegment(
  log: CommitLog,
  old: Active,
  offset: number,
  opts: ResolvedOptions,
): Promise<Active> {
  // Say which empty segment the fence leaves behind before leaving it: a
  // crash before its removal below must not look like a damaged segment,
  // and a damaged segment must not look like a fence's leftover.
  const meta = (await readMeta(log.dir))?.meta;
  if (meta) {
    meta.fenced = [...(meta.fenced ?? []).slice(-7), old.seg.info.firstOffset];
    await writeMeta(log.dir, meta, opts.io);
  }
  const seg = newSegmentState(log.dir, log.streamId, log.name, offset, opts);
  // Make the fenced segment first: a crash before the removal below leaves an
  // empty unsealed segment, which open removes.
  const file = await createSegmentFile(seg, opts.io);
  old.file?.close();
  await opts.io.remove(old.seg.info.path).catch((err) => {
    // A segment whose file a full disk kept from being made: none to remove.
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  await opts.io.syncDir(log.dir);
  const st = initialState();
  return { seg, writer: new SegmentWriter(seg.layout.interval, st), file, durable: st };
}
