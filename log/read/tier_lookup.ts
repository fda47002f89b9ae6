/**
 * Which tier holds an offset — a segment, a local chunk, an archived chunk —
 * computed from plain data (the segment list and the manifests), without
 * touching a file: the log's readers and the lock-free folder reader both
 * ask it, so they agree on fence gaps and eviction.
 *
 * Rules:
 * - at or above the first segment, the newest segment starting at or below
 *   the offset holds it when the offset is within its rows or the segment is
 *   not sealed; past a sealed segment's rows, a chunk holding the offset
 *   below the next segment (the next segment was chunked first), else the
 *   gap is a fence's: the next segment (or the end);
 * - below the first segment: at or above the durable end nothing (`end`);
 *   below the earliest offset held, `evicted`; below the local tier, an
 *   archived chunk; else the first local chunk that reaches the offset;
 *   else the first segment.
 *
 * Time (`planSince`): append times never decrease in offset order, so the
 * tiers, taken in offset order (archived chunks below the local tier, local
 * chunks below the first segment, then the segments), are searched by their
 * last append time — a binary search — for the first one that reaches the
 * time. A chunk answers with its first row: chunk lines carry no time, so
 * the plan is exact only when the time is at or before the chunk's
 * `first_ts` (otherwise it is the chunk's first row, an earlier start, never
 * a later one, which the caller refines through the chunk's time index,
 * `../chunk/times.ts`, when it has one). A segment is searched further in its
 * file, through its beacons (`time_seek.ts`).
 *
 * @module
 */

import type { ChunkEntry } from "../chunk/chunk.ts";

/**
 * What the lookup knows of one segment. A segment whose rows are not known
 * yet (a folder read without the writer) is `sealed: false` with
 * `count: Infinity`: it may hold any offset from its first on.
 */
export interface TierSegment {
  /** First offset the segment may hold. */
  firstOffset: number;
  /** Records it holds. */
  count: number;
  /** Whether it is sealed (complete). */
  sealed: boolean;
  /**
   * Append time of its last record, µs (0 or absent: not known; only
   * {@linkcode planSince} reads it).
   */
  lastTimeUs?: number;
}

/** The tiers of a log, oldest first in each. */
export interface Tiers {
  /** The segments, oldest first. */
  segments: readonly TierSegment[];
  /** The local manifest's chunks, in offset order. */
  chunks: readonly ChunkEntry[];
  /** The archive's chunks when replay from the archive is on (else empty). */
  archived: readonly ChunkEntry[];
  /** The durable end, exclusive (Infinity when unknown). */
  end: number;
}

/** Where an offset is held. */
export type Tier =
  | { kind: "segment"; index: number }
  | { kind: "chunk"; entry: ChunkEntry }
  | { kind: "archive"; entry: ChunkEntry }
  | { kind: "evicted"; earliest: number | null }
  | { kind: "end" };

/**
 * The earliest offset held on local disk (chunks and segments), or `null`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { localEarliest } from "./tier_lookup.ts";
 * const segments = [{ firstOffset: 10, count: 5, sealed: false }];
 * equal(localEarliest({ segments, chunks: [], archived: [], end: 15 }), 10);
 * ```
 */
export function localEarliest(t: Tiers): number | null {
  const c = t.chunks[0];
  for (const s of t.segments) {
    if (s.count > 0) return c ? Math.min(c.first, s.firstOffset) : s.firstOffset;
  }
  return c ? c.first : null;
}

/**
 * The archived chunks below the local tier.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { archivedBelow } from "./tier_lookup.ts";
 * const c = { first: 1, last: 9, rows: 9, bytes: 1, sha256: "", first_ts: 0, last_ts: 0 };
 * const segments = [{ firstOffset: 10, count: 5, sealed: false }];
 * equal(archivedBelow({ segments, chunks: [], archived: [c], end: 15 }).length, 1);
 * ```
 */
export function archivedBelow(t: Tiers): ChunkEntry[] {
  const local = localEarliest(t) ?? t.end;
  return t.archived.filter((c) => c.first < local);
}

/**
 * The earliest offset held in any tier, or `null` when none holds a row.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { earliestOffset } from "./tier_lookup.ts";
 * equal(earliestOffset({ segments: [], chunks: [], archived: [], end: 1 }), null);
 * ```
 */
export function earliestOffset(t: Tiers): number | null {
  const local = localEarliest(t);
  const a = archivedBelow(t)[0];
  if (a && (local === null || a.first < local)) return a.first;
  return local;
}

/**
 * Which tier holds `offset` (see the rules above).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { locateOffset } from "./tier_lookup.ts";
 * const c = { first: 1, last: 9, rows: 9, bytes: 1, sha256: "ab", first_ts: 0, last_ts: 0 };
 * const t = { segments: [{ firstOffset: 10, count: 5, sealed: false }], chunks: [c], archived: [], end: 15 };
 * equal(locateOffset(t, 3).kind, "chunk");
 * equal(locateOffset(t, 12).kind, "segment");
 * equal(locateOffset(t, 15).kind, "segment");
 * ```
 */
export function locateOffset(t: Tiers, offset: number): Tier {
  const segs = t.segments;
  const segStart = segs[0]?.firstOffset ?? Infinity;
  if (offset >= segStart) {
    for (let i = segs.length - 1; i >= 0; i--) {
      const s = segs[i];
      if (s.firstOffset > offset) continue;
      if (offset < s.firstOffset + s.count || !s.sealed) return { kind: "segment", index: i };
      // Past a sealed segment: a chunk when one holds the offset (the next
      // segment was chunked first), else a gap (a fence): the next segment.
      const next = segs[i + 1];
      const bound = next ? next.firstOffset : t.end;
      for (const c of t.chunks) {
        if (c.last >= offset && c.first < bound) return { kind: "chunk", entry: c };
      }
      return next ? { kind: "segment", index: i + 1 } : { kind: "end" };
    }
  }
  const earliest = earliestOffset(t);
  if (offset >= t.end) return { kind: "end" };
  // Below the end, nothing held (all evicted), or below what is held.
  if (earliest === null || offset < earliest) return { kind: "evicted", earliest };
  const local = localEarliest(t);
  if (local === null || offset < local) {
    for (const c of archivedBelow(t)) {
      if (c.last >= offset) return { kind: "archive", entry: c };
    }
  }
  for (const c of t.chunks) {
    if (c.last >= offset) return { kind: "chunk", entry: c };
  }
  return segs.length > 0 ? { kind: "segment", index: 0 } : { kind: "end" };
}

/**
 * Rows held in `[from, to)`; offsets skipped by a fence are not rows.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { rowsBetween } from "./tier_lookup.ts";
 * const t = { segments: [{ firstOffset: 1, count: 10, sealed: false }], chunks: [], archived: [], end: 11 };
 * equal(rowsBetween(t, 5, 100), 6);
 * ```
 */
export function rowsBetween(t: Tiers, from: number, to: number): number {
  let rows = 0;
  // Chunks count below the first segment (a segment listed in a chunk but
  // not yet deleted is counted once, as a segment).
  const segStart = t.segments[0]?.firstOffset ?? Infinity;
  const chunkStart = t.chunks[0]?.first ?? segStart;
  for (const c of archivedBelow(t)) {
    const lo = Math.max(from, c.first);
    const hi = Math.min(to, c.last + 1, chunkStart, segStart);
    if (hi > lo) rows += c.rows === c.last - c.first + 1 ? hi - lo : Math.min(c.rows, hi - lo);
  }
  for (const c of t.chunks) {
    const lo = Math.max(from, c.first);
    const hi = Math.min(to, c.last + 1, segStart);
    if (hi <= lo) continue;
    // Rows are contiguous within a chunk unless it spans a fence.
    rows += c.rows === c.last - c.first + 1 ? hi - lo : Math.min(c.rows, hi - lo);
  }
  for (const s of t.segments) {
    const lo = Math.max(from, s.firstOffset);
    const hi = Math.min(to, s.firstOffset + s.count);
    if (hi > lo) rows += hi - lo;
  }
  return rows;
}

/** Where the first row at or after a time is, as far as plain data tells. */
export type SincePlan =
  /** A chunk's first row (`exact`: the time is at or before the chunk's first). */
  | { kind: "row"; offset: number; ts: number; exact: boolean; tier: "chunk" | "archive" }
  /** Somewhere in segment `index`: search its file. */
  | { kind: "segment"; index: number }
  /** Every row held is older: the durable end. */
  | { kind: "end" };

/**
 * Plans the search for the first row whose append time is at or after
 * `sinceUs` (see the module doc): a binary search over the tiers by their
 * last append time.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { planSince } from "./tier_lookup.ts";
 * const c = { first: 1, last: 9, rows: 9, bytes: 1, sha256: "ab", first_ts: 100, last_ts: 190 };
 * const segments = [{ firstOffset: 10, count: 5, sealed: false, lastTimeUs: 250 }];
 * const t = { segments, chunks: [c], archived: [], end: 15 };
 * equal(planSince(t, 50).kind, "row");
 * equal(planSince(t, 200).kind, "segment");
 * equal(planSince(t, 300).kind, "end");
 * ```
 */
export function planSince(t: Tiers, sinceUs: number): SincePlan {
  const segStart = t.segments[0]?.firstOffset ?? Infinity;
  const local = localEarliest(t) ?? t.end;
  const archived = t.archived.filter((c) => c.first < local);
  const chunks = t.chunks.filter((c) => c.first < segStart);
  const segs: number[] = [];
  for (let i = 0; i < t.segments.length; i++) if (t.segments[i].count > 0) segs.push(i);
  const n = archived.length + chunks.length + segs.length;
  // Piece i's last append time, the pieces in offset order.
  const lastTs = (i: number): number => {
    if (i < archived.length) return archived[i].last_ts;
    i -= archived.length;
    if (i < chunks.length) return chunks[i].last_ts;
    const s = t.segments[segs[i - chunks.length]];
    // Unknown (a segment not read yet): it may hold any time.
    return s.lastTimeUs ? s.lastTimeUs : Infinity;
  };
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (lastTs(mid) >= sinceUs) hi = mid;
    else lo = mid + 1;
  }
  if (lo >= n) return { kind: "end" };
  if (lo < archived.length + chunks.length) {
    const inArchive = lo < archived.length;
    const c = inArchive ? archived[lo] : chunks[lo - archived.length];
    return {
      kind: "row",
      offset: c.first,
      ts: c.first_ts,
      exact: sinceUs <= c.first_ts,
      tier: inArchive ? "archive" : "chunk",
    };
  }
  return { kind: "segment", index: segs[lo - archived.length - chunks.length] };
}
