/**
 * Cutting the active segment back to an offset, on open: the rows of a
 * commit that was never acknowledged, which the producer journal says must
 * go (see `../producer/table.ts`). The file is truncated at the record boundary
 * before the offset and synced; the caller then recovers the log again.
 *
 * @module
 */

import { RECORD_OVERHEAD } from "./format.ts";
import { LogCorruptError } from "../errors.ts";
import { seekStart, segmentStart } from "./reader.ts";
import { readSegmentRecords } from "./scan.ts";
import type { Active } from "./state.ts";
import { type LogIo, REAL_IO } from "../disk/io.ts";

/**
 * Truncates the active segment so that its last record is `offset - 1`
 * (through `io`).
 * Throws {@linkcode LogCorruptError} when `offset` is not in it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * import { recoverLog } from "../recovery.ts";
 * import { resolveOptions } from "../options.ts";
 * import { cutActiveAt } from "./tail_cut.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.appendMany(["{}", "{}", "{}"]);
 * await log.close();
 * const opts = resolveOptions({});
 * const r = await recoverLog(dir, {}, opts);
 * await cutActiveAt(r.active, 2, opts.maxPayloadBytes);
 * r.active.file!.close();
 * const again = await Log.open(dir);
 * equal(again.endOffset, 2);
 * await again.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function cutActiveAt(
  active: Active,
  offset: number,
  maxPayloadBytes: number,
  io: LogIo = REAL_IO,
): Promise<void> {
  const { info, header, layout } = active.seg;
  const end = info.firstOffset + info.count;
  const file = active.file!;
  if (offset < info.firstOffset || offset > end) {
    throw new LogCorruptError(
      info.path,
      0,
      `the producer journal asks to cut the log at offset ${offset}, outside the active ` +
        `segment (offsets ${info.firstOffset}..${end - 1})`,
    );
  }
  if (offset === end) return;
  let cut: number | null = null;
  if (offset === info.firstOffset) cut = segmentStart(header).phys;
  else {
    const start = await seekStart(file, header, info.size, offset);
    if (start.offset === offset) cut = start.phys;
    else {
      let physicalEnd = start.phys;
      const records = readSegmentRecords(file, info.path, header, {
        size: info.size,
        last: true,
        start,
        maxPayloadBytes,
        onRead: (p) => (physicalEnd = p),
      });
      for await (const batch of records) {
        if (batch.offsets[batch.count - 1] < offset) continue;
        let logical = layout.logicalSize(physicalEnd);
        for (let j = batch.count - 1; j >= 0 && batch.offsets[j] >= offset; j--) {
          logical -= RECORD_OVERHEAD + batch.lengths[j];
        }
        cut = layout.toPhysicalEnd(logical);
        break;
      }
    }
  }
  if (cut === null) {
    throw new LogCorruptError(info.path, info.size, `offset ${offset} was not found to cut at`);
  }
  await io.truncate(file, cut);
  await io.syncData(file);
}
