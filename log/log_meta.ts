/**
 * The log's metadata file, `log.json`: the stream id, name and first offset,
 * and the empty segments fences left behind. Kept with a checksum (see
 * `disk/meta_file.ts`); one written before checksums existed still reads.
 *
 * @module
 */

import { join } from "node:path";
import { parseSegmentFileName } from "./segment/format.ts";
import { type LogIo, REAL_IO } from "./disk/io.ts";
import { readCheckedJson, writeCheckedJson } from "./disk/meta_file.ts";
import { LogCorruptError } from "./errors.ts";
import { readHeader } from "./segment/reader.ts";

/** The name of the log's metadata file. */
export const META_FILE = "log.json";

/** What `log.json` holds. */
export interface LogMeta {
  format: number;
  name: string;
  stream_id: string;
  created_us: number;
  /** The first offset the log was created with (1, or a fence after a restore). */
  first_offset?: number;
  /**
   * First offsets of the empty segments that fences left behind (the newest
   * few): recovery removes an empty unsealed segment only when it is one of
   * these, and otherwise reports a damaged segment. Absent in logs written
   * before it was recorded.
   */
  fenced?: number[];
}

/** The members of a log.json written before it carried a checksum. */
const META_MEMBERS = ["format", "name", "stream_id", "created_us", "first_offset", "fenced"];

/**
 * Reads and checks `log.json`; `null` when there is none. `checked` says
 * whether it carried a checksum (logs written before checksums did not).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readMeta } from "./log_meta.ts";
 * import { Log } from "./mod.ts";
 * const dir = await Deno.makeTempDir();
 * await (await Log.open(dir)).close();
 * equal((await readMeta(dir))?.checked, true);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readMeta(dir: string): Promise<{ meta: LogMeta; checked: boolean } | null> {
  const path = join(dir, META_FILE);
  const r = await readCheckedJson<LogMeta>(path, META_MEMBERS);
  if (r === null) return null;
  const meta = r.value;
  if (typeof meta.stream_id !== "string" || !/^[0-9a-f]{32}$/.test(meta.stream_id)) {
    throw new LogCorruptError(path, 0, "no valid stream_id");
  }
  meta.name ??= "";
  return { meta, checked: r.checked };
}

/**
 * Writes `log.json` in `dir`, with its checksum, replacing the old one
 * atomically (see `disk/meta_file.ts`).
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { readMeta, writeMeta } from "./log_meta.ts";
 * const dir = await Deno.makeTempDir();
 * const meta = { format: 1, name: "t", stream_id: "a".repeat(32), created_us: 0, fenced: [7] };
 * await writeMeta(dir, meta);
 * deepEqual(await readMeta(dir), { meta, checked: true });
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeMeta(dir: string, meta: LogMeta, io: LogIo = REAL_IO): Promise<void> {
  await writeCheckedJson(join(dir, META_FILE), meta, io);
}

/**
 * Checks that the header of the segment at `segmentPath` names the stream of
 * `log.json` (`meta`, `checked` when its checksum was good), the rule open
 * and verify both apply. Otherwise throws a {@linkcode LogCorruptError}
 * saying which of the two is believed damaged, and why. A header's checksum
 * is good (it was read), so the segment is intact; `log.json` with a good
 * checksum is intact too (the segment belongs to another log), while an
 * unchecked `log.json` (an old one) is blamed unless another segment of `dir`
 * agrees with it.
 *
 * @example
 * ```ts
 * import { rejects } from "node:assert/strict";
 * import { join } from "node:path";
 * import { checkSegmentStreamId } from "./log_meta.ts";
 * const dir = await Deno.makeTempDir();
 * const meta = { format: 1, name: "t", stream_id: "a".repeat(32), created_us: 0 };
 * const segment = join(dir, "00000000000000000001.seg");
 * await checkSegmentStreamId(dir, meta, false, segment, "a".repeat(32));
 * await rejects(
 *   checkSegmentStreamId(dir, meta, true, segment, "b".repeat(32)),
 *   (e: Error & { path?: string }) => e.path === segment, // a segment of another log
 * );
 * await rejects(
 *   checkSegmentStreamId(dir, meta, false, segment, "b".repeat(32)),
 *   (e: Error & { path?: string }) => e.path === join(dir, "log.json"), // log.json is blamed
 * );
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function checkSegmentStreamId(
  dir: string,
  meta: LogMeta,
  checked: boolean,
  segmentPath: string,
  segmentId: string,
): Promise<void> {
  if (segmentId === meta.stream_id) return;
  const agree = !checked && await otherHeadersAgree(dir, segmentPath, meta.stream_id);
  throw streamIdMismatch(dir, meta, checked, segmentPath, segmentId, agree);
}

function streamIdMismatch(
  dir: string,
  meta: LogMeta,
  checked: boolean,
  segmentPath: string,
  segmentId: string,
  othersAgree: boolean,
): LogCorruptError {
  if (checked || othersAgree) {
    return new LogCorruptError(
      segmentPath,
      8,
      `stream id ${segmentId} is not the log's (${META_FILE} says ${meta.stream_id}` +
        (checked ? " and its checksum is good" : ", as other segments do") +
        `): a segment of another log`,
    );
  }
  return new LogCorruptError(
    join(dir, META_FILE),
    0,
    `stream id ${meta.stream_id} is not the one in the header of ${segmentPath} ` +
      `(${segmentId}, whose checksum is good); ${META_FILE} has no checksum and is ` +
      `believed damaged`,
  );
}

// Whether a segment of `dir` other than `path` has a good header naming `streamId`.
async function otherHeadersAgree(
  dir: string,
  path: string,
  streamId: string,
): Promise<boolean> {
  for await (const e of Deno.readDir(dir)) {
    const p = join(dir, e.name);
    if (!e.isFile || parseSegmentFileName(e.name) === null || p === path) continue;
    const f = await Deno.open(p, { read: true });
    try {
      if ((await readHeader(f, p)).streamId === streamId) return true;
    } catch (err) {
      if (!(err instanceof LogCorruptError)) throw err;
    } finally {
      f.close();
    }
  }
  return false;
}

/**
 * Whether an empty, unsealed segment starting at `first` before the last one
 * may be a fence's leftover (removed by open, passed by verify): `log.json`
 * names it in `fenced`, or has no such list (written before it existed).
 * Anything else is a damaged segment.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { mayBeFenceLeftover } from "./log_meta.ts";
 * const meta = { format: 1, name: "t", stream_id: "0".repeat(32), created_us: 0, fenced: [7] };
 * equal(mayBeFenceLeftover(meta, 7), true);
 * equal(mayBeFenceLeftover(meta, 8), false);
 * ```
 */
export function mayBeFenceLeftover(meta: LogMeta, first: number): boolean {
  return meta.fenced === undefined || meta.fenced.includes(first);
}
