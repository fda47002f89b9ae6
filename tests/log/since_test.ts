// since=: append times never decrease (a clock stepping back is clamped, also
// across a restart), and time → offset resolution in the log and the folder
// reader, across segments and chunks, after eviction, at a cost that does not
// grow with the log.
import { assert, assertEquals } from "../harness/assert.ts";
import { FolderReader, Log } from "../../log/mod.ts";
import { lookupStats } from "../../log/read/time_seek.ts";
import { timesPath } from "../../log/chunk/times.ts";
import { planSince, type Tiers } from "../../log/read/tier_lookup.ts";
import type { ChunkEntry } from "../../log/chunk/chunk.ts";
import { rmrf, tempDir } from "../harness/util.ts";

const MS = 1000; // µs per ms

async function times(log: Log): Promise<[number, number][]> {
  const r = log.reader(1);
  const out: [number, number][] = [];
  try {
    while (true) {
      const b = await r.read();
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) out.push([b.offsets[i], b.times[i]]);
    }
  } finally {
    r.close();
  }
  return out;
}

Deno.test("log clamps a clock that steps back, also across a restart", async () => {
  const dir = await tempDir();
  try {
    let now = 10_000;
    const log = await Log.open(dir, { clock: () => now, timers: false });
    await log.append("{}"); // 1 @ 10 s
    now = 9_000;
    await log.append("{}"); // 2: clamped to 10 s
    now = 12_000;
    await log.append("{}"); // 3 @ 12 s
    await log.close();
    now = 5_000; // the machine came back with its clock far behind
    const again = await Log.open(dir, { clock: () => now, timers: false });
    await again.append("{}"); // 4: clamped to 12 s, the last row on disk
    now = 13_000;
    await again.append("{}"); // 5 @ 13 s
    assertEquals(await times(again), [
      [1, 10_000 * MS],
      [2, 10_000 * MS],
      [3, 12_000 * MS],
      [4, 12_000 * MS],
      [5, 13_000 * MS],
    ]);
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log clamps to its chunks' last time when every segment was chunked", async () => {
  const dir = await tempDir();
  try {
    let now = 50_000;
    const log = await Log.open(dir, { clock: () => now, timers: false, chunks: { fanIn: 100 } });
    await log.appendMany(["{}", "{}"]);
    await log.roll();
    await log.chunks.settled();
    assertEquals(log.segments().length, 1, "only the empty active segment is left");
    await log.close();
    now = 1_000;
    const again = await Log.open(dir, { clock: () => now, timers: false });
    await again.append("{}");
    assertEquals((await times(again)).at(-1), [3, 50_000 * MS]);
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

// A log of `groups` commits of `per` rows, commit g at (g + 1) s, over small
// segments and beacons.
async function timedLog(
  dir: string,
  groups: number,
  per: number,
  options: { segmentBytes?: number; chunks?: boolean; payload?: string } = {},
): Promise<Log> {
  let now = 0;
  const log = await Log.open(dir, {
    clock: () => now,
    timers: false,
    fsync: false,
    sealEveryMs: 0,
    beaconInterval: 1024,
    segmentBytes: options.segmentBytes ?? 8 * 1024,
    chunks: options.chunks ? { fanIn: 1000 } : false,
  });
  const row = options.payload ?? '{"x":1}';
  for (let g = 0; g < groups; g++) {
    now = (g + 1) * 1000;
    await log.appendMany(Array.from({ length: per }, () => row));
  }
  return log;
}

// The first offset at or after `us` in a log made by timedLog (rows at (g+1) s).
function expected(groups: number, per: number, us: number): { offset: number; ts: number | null } {
  const g = Math.max(0, Math.ceil(us / (1000 * MS)) - 1);
  if (g >= groups) return { offset: groups * per + 1, ts: null };
  return { offset: g * per + 1, ts: (g + 1) * 1000 * MS };
}

Deno.test("log offsetAt: before the first row, exact hits, between commits, after the last; across segments", async () => {
  const dir = await tempDir();
  try {
    const groups = 200;
    const per = 7;
    const log = await timedLog(dir, groups, per, { payload: `{"pad":"${"p".repeat(80)}"}` });
    assert(log.segments().length > 5, `${log.segments().length} segments`);
    const probes = [0, 1, 999_999, 1_000_000, 1_000_001, 1_500_000, 2_000_000, 77_000_000];
    probes.push(77_000_001, 199_999_999, 200_000_000, 200_000_001, 10 ** 15);
    for (let i = 0; i < 40; i++) probes.push(Math.floor(Math.random() * 210_000_000));
    const folder = await FolderReader.open(dir);
    for (const us of probes) {
      const want = expected(groups, per, us);
      const got = await log.offsetAt(us);
      assertEquals({ offset: got.offset, ts: got.ts }, want, `since ${us}`);
      assertEquals(got.evicted, false);
      assertEquals(got.exact, true);
      const f = await folder.offsetAt(us);
      assertEquals({ offset: f.offset, ts: f.ts }, want, `folder, since ${us}`);
    }
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log offsetAt through chunks: exact at chunk boundaries and inside one (its time index); evicted after retention", async () => {
  const dir = await tempDir();
  try {
    const groups = 60;
    const per = 10;
    const log = await timedLog(dir, groups, per, { chunks: true, segmentBytes: 4 * 1024 });
    await log.chunks.settled();
    const chunks = log.chunks.manifest!.chunks;
    assert(chunks.length >= 3, `${chunks.length} chunks`);
    const c = chunks[1];
    // At or before a chunk's first time: exact, its first row.
    const at = await log.offsetAt(c.first_ts);
    assertEquals([at.offset, at.ts, at.exact], [c.first, c.first_ts, true]);
    const before = await log.offsetAt(chunks[0].last_ts + 1);
    assertEquals([before.offset, before.exact], [c.first, true]);
    // Inside a chunk: its time index gives the exact row — at a commit and
    // between two commits.
    assert(c.last_ts > c.first_ts, "the chunk holds several commits");
    const folder = await FolderReader.open(dir);
    for (const us of [c.last_ts, c.last_ts - 1, c.first_ts + 1, c.first_ts + 1000 * MS]) {
      const want = expected(groups, per, us);
      const inside = await log.offsetAt(us);
      assertEquals([inside.offset, inside.ts, inside.exact], [want.offset, want.ts, true], `${us}`);
      assert(inside.offset > c.first, `since ${us} is past the chunk's first row`);
      // The same answers from the folder, without the lock.
      const f = await folder.offsetAt(us);
      assertEquals([f.offset, f.ts, f.exact], [want.offset, want.ts, true], `folder, ${us}`);
    }
    assertEquals((await folder.offsetAt(c.first_ts)).offset, c.first);
    // Past the chunks: the segments answer exactly.
    const seg = log.segments().find((s) => s.count > 0)!;
    const g = Math.round(seg.lastTimeUs / (1000 * MS));
    assertEquals((await log.offsetAt(seg.lastTimeUs)).offset, (g - 1) * per + 1);
    assertEquals((await log.offsetAt(0)).evicted, false, "nothing was ever dropped");
    // Retention drops the oldest chunks: a time before the earliest row held is evicted.
    log.chunks.setRetention({ retainBytes: chunks.slice(2).reduce((n, e) => n + e.bytes, 0) });
    await log.chunks.settled(true);
    const earliest = log.earliest!;
    assert(earliest > 1, `earliest ${earliest}`);
    const old = await log.offsetAt(0);
    assertEquals([old.offset, old.evicted], [earliest, true]);
    const later = await log.offsetAt(log.segments().at(-1)!.lastTimeUs || 10 ** 15);
    assertEquals(later.evicted, false);
    const f = await (await FolderReader.open(dir)).offsetAt(0);
    assertEquals([f.offset, f.evicted], [earliest, true]);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log offsetAt: a time inside the earliest chunk held, answered chunk-grained, is not evicted", async () => {
  const dir = await tempDir();
  try {
    const groups = 60;
    const per = 10;
    const log = await timedLog(dir, groups, per, { chunks: true, segmentBytes: 4 * 1024 });
    await log.chunks.settled();
    const chunks = log.chunks.manifest!.chunks;
    assert(chunks.length >= 4, `${chunks.length} chunks`);
    log.chunks.setRetention({ retainBytes: chunks.slice(2).reduce((n, e) => n + e.bytes, 0) });
    await log.chunks.settled(true);
    const first = log.chunks.manifest!.chunks[0];
    assertEquals(log.earliest, first.first);
    assert(first.first > 1, "rows were dropped");
    assert(first.last_ts > first.first_ts, "the earliest chunk holds several commits");
    // Without its time index (a chunk of an older log, or from the archive),
    // a time inside the earliest chunk is answered with the chunk's first row.
    await Deno.remove(timesPath(dir, first.sha256));
    const folder = await FolderReader.open(dir);
    for (const us of [first.first_ts + 1, first.last_ts]) {
      for (
        const [who, got] of [["log", await log.offsetAt(us)], [
          "folder",
          await folder.offsetAt(us),
        ]] as const
      ) {
        // Every dropped row is older than the chunk's first: none was at or after the time.
        assertEquals(
          [got.offset, got.ts, got.exact, got.evicted],
          [first.first, first.first_ts, false, false],
          `${who}, since ${us}`,
        );
      }
    }
    // At or before the earliest row's time, dropped rows may have reached it.
    for (const us of [0, first.first_ts]) {
      assertEquals((await log.offsetAt(us)).evicted, true, `log, since ${us}`);
      assertEquals((await folder.offsetAt(us)).evicted, true, `folder, since ${us}`);
    }
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("tier lookup planSince: binary search over chunks and segments by time", () => {
  const chunk = (first: number, last: number, first_ts: number, last_ts: number): ChunkEntry => ({
    first,
    last,
    rows: last - first + 1,
    bytes: 1,
    sha256: "",
    first_ts,
    last_ts,
  });
  const t: Tiers = {
    archived: [chunk(1, 9, 10, 19)],
    chunks: [chunk(10, 19, 20, 29), chunk(20, 29, 30, 39)],
    segments: [
      { firstOffset: 30, count: 10, sealed: true, lastTimeUs: 49 },
      { firstOffset: 40, count: 0, sealed: false },
    ],
    end: 40,
  };
  assertEquals(planSince(t, 0), { kind: "row", offset: 1, ts: 10, exact: true, tier: "archive" });
  assertEquals(planSince(t, 15), { kind: "row", offset: 1, ts: 10, exact: false, tier: "archive" });
  assertEquals(planSince(t, 20), { kind: "row", offset: 10, ts: 20, exact: true, tier: "chunk" });
  assertEquals(planSince(t, 39), { kind: "row", offset: 20, ts: 30, exact: false, tier: "chunk" });
  assertEquals(planSince(t, 40), { kind: "segment", index: 0 });
  assertEquals(planSince(t, 49), { kind: "segment", index: 0 });
  assertEquals(planSince(t, 50), { kind: "end" });
  assertEquals(planSince({ ...t, archived: [] }, 0).kind, "row");
  assertEquals(planSince({ segments: [], chunks: [], archived: [], end: 1 }, 5), { kind: "end" });
});

Deno.test("log offsetAt cost does not grow with the log: reads grow at most logarithmically", async () => {
  const small = await tempDir();
  const large = await tempDir();
  try {
    const pad = `{"pad":"${"p".repeat(200)}"}`;
    // 1 row per commit, a second apart: ~40 KB vs ~16 MB in 64 MiB segments.
    const a = await timedLog(small, 160, 1, { payload: pad, segmentBytes: 64 << 20 });
    const b = await timedLog(large, 64_000, 1, { payload: pad, segmentBytes: 64 << 20 });
    assert(b.sizeBytes > 300 * a.sizeBytes, `${b.sizeBytes} vs ${a.sizeBytes}`);
    const cost = async (log: Log, groups: number) => {
      let reads = 0;
      let bytes = 0;
      for (const frac of [0.1, 0.37, 0.5, 0.81, 0.99]) {
        const us = Math.floor(groups * frac) * 1000 * MS + 1;
        const s = lookupStats();
        const got = await log.offsetAt(us, s);
        assertEquals(got.offset, expected(groups, 1, us).offset);
        reads = Math.max(reads, s.reads);
        bytes = Math.max(bytes, s.bytes);
      }
      return { reads, bytes };
    };
    const cs = await cost(a, 160);
    const cl = await cost(b, 64_000);
    console.log("lookup cost, small log:", cs, "large log:", cl);
    // The log is ~400× larger: log2 adds ~9 beacon reads per search (two searches).
    assert(cl.reads <= cs.reads + 2 * 10, `reads ${cl.reads} vs ${cs.reads}`);
    // The scan is bounded by about two beacon intervals (1 KiB here), whatever the size.
    assert(cl.bytes <= 3 * 1024, `bytes ${cl.bytes}`);
    assert(cs.bytes <= 3 * 1024, `bytes ${cs.bytes}`);
    // The folder reader's lookup is bounded the same way.
    const f = lookupStats();
    const fr = await FolderReader.open(large);
    assertEquals((await fr.offsetAt(32_000 * 1000 * MS + 1, f)).offset, 32_001);
    assert(f.reads <= cl.reads + 4 && f.bytes <= 3 * 1024, JSON.stringify(f));
    await a.close();
    await b.close();
  } finally {
    await rmrf(small);
    await rmrf(large);
  }
});
