/**
 * Telling a torn tail from damage: after a bad record in the last segment, a
 * valid record with a later offset further on means data that was written
 * after the bad spot survived, so the bad spot is corruption, not a tear.
 *
 * @module
 */

import { checksum, getU64, type Layout, RECORD_HEAD_BYTES, TERMINATOR } from "./format.ts";
import { readAt } from "./segment_reader.ts";

/**
 * Searches the file bytes after `fromPhys` for a valid record whose offset is
 * above `expectOffset`; returns its physical position or `null`.
 */
export async function findLaterRecord(
  file: Deno.FsFile,
  _layout: Layout,
  fromPhys: number,
  size: number,
  expectOffset: number,
): Promise<number | null> {
  if (fromPhys >= size) return null;
  const buf = await readAt(file, fromPhys, size - fromPhys);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.length);
  const lo = expectOffset + 1;
  const hi = expectOffset + 0x1_0000_0000;
  for (let i = 1; i + RECORD_HEAD_BYTES + 5 <= buf.length; i++) {
    // Offsets are below 2^53: the top byte of a record's first word is zero.
    if (buf[i] !== 0 || buf[i + 1] !== 0) continue;
    const offset = getU64(view, i);
    if (offset < lo || offset > hi) continue;
    const n = view.getUint32(i + 16);
    const end = i + RECORD_HEAD_BYTES + n;
    if (end + 5 > buf.length || buf[end + 4] !== TERMINATOR) continue;
    if (checksum(buf.subarray(i, end)) === view.getUint32(end)) return fromPhys + i;
  }
  return null;
}
