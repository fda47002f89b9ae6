/**
 * Telling a torn tail from damage: see `segment_scan.ts`, which holds the one
 * reading rule. Kept for `server/export.ts` until it reads through the
 * folder reader.
 *
 * @module
 */

import type { Layout } from "./format.ts";
import { findLaterRecord as find } from "./segment_scan.ts";

/**
 * Searches the file bytes after `fromPhys` for a valid record whose offset is
 * above `expectOffset`; returns its physical position or `null`.
 */
export function findLaterRecord(
  file: Deno.FsFile,
  _layout: Layout,
  fromPhys: number,
  size: number,
  expectOffset: number,
): Promise<number | null> {
  return find(file, fromPhys, size, expectOffset);
}
