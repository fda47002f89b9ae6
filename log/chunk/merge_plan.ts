/**
 * Which chunks the worker merges next (size-tiered, as Cassandra's and
 * RocksDB's universal compaction do): the oldest run of `fanIn` adjacent
 * chunks of one size class (`floor(log4(bytes / 64 KiB))`) whose merged
 * chunk stays within the bounds below. With a steady feed the chunk count
 * grows logarithmically.
 *
 * A merged chunk is dropped by retention only as a whole, so it must stay
 * small against the retention bounds, or one chunk would come to cover all
 * history and retention could never drop it (while the disk grows with
 * every seal). It is held to at most `maxChunkBytes`, to a
 * {@linkcode RETENTION_SLICES}th of `retainBytes`, and to a span of append
 * times of a {@linkcode RETENTION_SLICES}th of `retainAgeMs`, when those
 * are set: retention then drops something every time a bound is passed by
 * that much, and keeps at most a slice more than the bound.
 *
 * @module
 */

import type { ChunkEntry } from "./chunk.ts";
import type { ChunkPolicy } from "./protocol.ts";

/**
 * Into how many chunks, at least, a merge leaves the history a retention
 * bound covers: a merged chunk is at most this fraction of `retainBytes`,
 * and spans at most this fraction of `retainAgeMs`.
 */
export const RETENTION_SLICES = 4;

function sizeClass(bytes: number): number {
  return Math.floor(Math.log(Math.max(1, bytes / 65536)) / Math.log(4));
}

/**
 * The largest chunk a merge may make under `policy`, compressed bytes: the
 * smaller of `maxChunkBytes` and `retainBytes` / {@linkcode RETENTION_SLICES}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { mergeBytesLimit } from "./merge_plan.ts";
 * equal(mergeBytesLimit({ maxChunkBytes: 1 << 20, retainBytes: 400_000 }), 100_000);
 * equal(mergeBytesLimit({ maxChunkBytes: 1 << 20, retainBytes: null }), 1 << 20);
 * ```
 */
export function mergeBytesLimit(
  policy: Pick<ChunkPolicy, "maxChunkBytes" | "retainBytes">,
): number {
  const { maxChunkBytes, retainBytes } = policy;
  if (retainBytes === null) return maxChunkBytes;
  return Math.min(maxChunkBytes, Math.floor(retainBytes / RETENTION_SLICES));
}

/**
 * The widest span of append times (first row to last) a merged chunk may
 * have under `policy`, µs: `retainAgeMs` / {@linkcode RETENTION_SLICES}
 * (Infinity without an age bound).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { mergeSpanLimitUs } from "./merge_plan.ts";
 * equal(mergeSpanLimitUs({ retainAgeMs: 60_000 }), 15_000_000);
 * equal(mergeSpanLimitUs({ retainAgeMs: null }), Infinity);
 * ```
 */
export function mergeSpanLimitUs(policy: Pick<ChunkPolicy, "retainAgeMs">): number {
  if (policy.retainAgeMs === null) return Infinity;
  return (policy.retainAgeMs * 1000) / RETENTION_SLICES;
}

/**
 * Where the next merge starts in `chunks` (the manifest's, in offset
 * order): the index of the oldest run of `policy.fanIn` adjacent chunks
 * that may be merged (see the module doc), or -1 when none may.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { planMerge } from "./merge_plan.ts";
 * const c = (i: number, bytes: number) => ({ first: i, last: i, rows: 1, bytes,
 *   sha256: String(i), first_ts: i * 1e6, last_ts: i * 1e6 });
 * const chunks = [c(1, 900), c(2, 100), c(3, 100), c(4, 100), c(5, 100)];
 * const policy = { fanIn: 4, maxChunkBytes: 1 << 20, retainBytes: null, retainAgeMs: null };
 * equal(planMerge(chunks, policy), 0);
 * equal(planMerge(chunks, { ...policy, retainBytes: 4000 }), 1);
 * ```
 */
export function planMerge(
  chunks: readonly ChunkEntry[],
  policy: Pick<ChunkPolicy, "fanIn" | "maxChunkBytes" | "retainBytes" | "retainAgeMs">,
): number {
  const { fanIn } = policy;
  const maxBytes = mergeBytesLimit(policy);
  const maxSpanUs = mergeSpanLimitUs(policy);
  for (let i = 0; i + fanIn <= chunks.length; i++) {
    const cls = sizeClass(chunks[i].bytes);
    let total = 0;
    let same = true;
    for (let k = i; k < i + fanIn; k++) {
      total += chunks[k].bytes;
      if (sizeClass(chunks[k].bytes) !== cls) same = false;
    }
    const spanUs = chunks[i + fanIn - 1].last_ts - chunks[i].first_ts;
    if (same && total <= maxBytes && spanUs <= maxSpanUs) return i;
  }
  return -1;
}
