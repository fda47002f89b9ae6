// The tier lookup with plain data: no files, no log.
import { assertEquals } from "../harness/assert.ts";
import type { ChunkEntry } from "../../log/chunk/chunk.ts";
import {
  archivedBelow,
  earliestOffset,
  localEarliest,
  locateOffset,
  rowsBetween,
  type Tiers,
  type TierSegment,
} from "../../log/read/tier_lookup.ts";

function chunk(first: number, last: number, rows = last - first + 1): ChunkEntry {
  return {
    first,
    last,
    rows,
    bytes: 100,
    sha256: `${first}-${last}`,
    first_ts: 0,
    last_ts: 0,
  };
}

function seg(firstOffset: number, count: number, sealed = true): TierSegment {
  return { firstOffset, count, sealed };
}

function tiers(t: Partial<Tiers>): Tiers {
  return { segments: [], chunks: [], archived: [], end: 1, ...t };
}

Deno.test("tier lookup: segments hold their rows; the active one holds everything from its first", () => {
  const t = tiers({ segments: [seg(1, 10), seg(11, 5, false)], end: 16 });
  assertEquals(locateOffset(t, 1), { kind: "segment", index: 0 });
  assertEquals(locateOffset(t, 10), { kind: "segment", index: 0 });
  assertEquals(locateOffset(t, 11), { kind: "segment", index: 1 });
  assertEquals(locateOffset(t, 15), { kind: "segment", index: 1 });
  assertEquals(locateOffset(t, 99), { kind: "segment", index: 1 }, "the reader waits there");
  assertEquals(earliestOffset(t), 1);
});

Deno.test("tier lookup: chunks below the segments, and a segment already chunked", () => {
  const c1 = chunk(1, 10);
  const c2 = chunk(11, 20);
  // 11..20 chunked, its segment not yet deleted; 21.. active.
  const t = tiers({ segments: [seg(11, 10), seg(21, 3, false)], chunks: [c1, c2], end: 24 });
  assertEquals(locateOffset(t, 5), { kind: "chunk", entry: c1 });
  assertEquals(locateOffset(t, 11), { kind: "segment", index: 0 }, "the segment is still there");
  assertEquals(locateOffset(t, 22), { kind: "segment", index: 1 });
  assertEquals(earliestOffset(t), 1);
  assertEquals(localEarliest(t), 1);
  // Rows are counted once: chunks below the first segment, then segments.
  assertEquals(rowsBetween(t, 1, 24), 23);
  assertEquals(rowsBetween(t, 5, 15), 10);
});

Deno.test("tier lookup: past a sealed segment, a chunk that holds the next offsets (the next segment was chunked first)", () => {
  const c = chunk(11, 20);
  const t = tiers({ segments: [seg(1, 10), seg(21, 0, false)], chunks: [c], end: 21 });
  assertEquals(locateOffset(t, 15), { kind: "chunk", entry: c });
});

Deno.test("tier lookup: a fence's gap leads to the next segment, or to the end", () => {
  const t = tiers({ segments: [seg(1, 10), seg(1000, 2, false)], end: 1002 });
  assertEquals(locateOffset(t, 11), { kind: "segment", index: 1 });
  assertEquals(locateOffset(t, 500), { kind: "segment", index: 1 });
  assertEquals(rowsBetween(t, 1, 1002), 12, "offsets skipped by a fence are not rows");
  const sealedLast = tiers({ segments: [seg(1, 10)], end: 11 });
  assertEquals(locateOffset(sealedLast, 11), { kind: "end" });
});

Deno.test("tier lookup: below what is held is evicted; at or past the end is the end", () => {
  const t = tiers({ segments: [seg(50, 10, false)], chunks: [chunk(20, 49)], end: 60 });
  assertEquals(locateOffset(t, 5), { kind: "evicted", earliest: 20 });
  assertEquals(earliestOffset(t), 20);
  const empty = tiers({ segments: [], end: 1 });
  assertEquals(locateOffset(empty, 1), { kind: "end" });
  const allEvicted = tiers({ segments: [seg(60, 0, false)], end: 60 });
  assertEquals(locateOffset(allEvicted, 10), { kind: "evicted", earliest: null });
});

Deno.test("tier lookup: the archive serves what the local tier dropped", () => {
  const a1 = chunk(1, 19);
  const a2 = chunk(20, 49);
  const local = chunk(20, 49);
  const t = tiers({
    segments: [seg(50, 10, false)],
    chunks: [local],
    archived: [a1, a2],
    end: 60,
  });
  assertEquals(archivedBelow(t), [a1], "only what is below the local tier");
  assertEquals(earliestOffset(t), 1);
  assertEquals(locateOffset(t, 5), { kind: "archive", entry: a1 });
  assertEquals(locateOffset(t, 25), { kind: "chunk", entry: local });
  assertEquals(rowsBetween(t, 1, 60), 59);
});

Deno.test("tier lookup: segments of unknown length (a folder read without the writer)", () => {
  const unknown = (f: number): TierSegment => ({ firstOffset: f, count: Infinity, sealed: false });
  const t = tiers({ segments: [unknown(11), unknown(30)], chunks: [chunk(1, 10)], end: Infinity });
  assertEquals(locateOffset(t, 3).kind, "chunk");
  assertEquals(locateOffset(t, 20), { kind: "segment", index: 0 });
  assertEquals(locateOffset(t, 31), { kind: "segment", index: 1 });
  // Once the first is known to be sealed with 19 rows, 30 is the next segment's.
  const known = tiers({
    segments: [seg(11, 19), unknown(30)],
    chunks: [chunk(1, 10)],
    end: Infinity,
  });
  assertEquals(locateOffset(known, 30), { kind: "segment", index: 1 });
});
