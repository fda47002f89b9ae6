// A chunk's time index (chunks/SHA256.times): since= inside a chunk's span is
// exact (between commits, at a commit), also after a merge; a chunk without
// an index answers chunk-grained; a damaged index is reported by verify and
// ignored by the lookup; orphan indexes go at open; an index is deleted with
// its chunk (grace period, retention). Real files, an injected clock.
import { assert, assertEquals, assertThrows } from "../harness/assert.ts";
import { join } from "node:path";
import { ChunkCorruptError, type ChunkEntry } from "../../log/chunk/chunk.ts";
import {
  decodeTimes,
  encodeTimes,
  mergeTimes,
  readChunkTimes,
  timesPath,
} from "../../log/chunk/times.ts";
import { FolderReader, Log, type LogOptions, verifyLog } from "../../log/mod.ts";
import { rmrf, tempDir } from "../harness/util.ts";

const S = 1_000_000; // µs per second
const GROUPS = 30;
const PER = 5;

// Commit g (0-based) holds offsets g·PER+1 .. (g+1)·PER, appended at (g+1) s.
async function timedLog(dir: string, chunks: LogOptions["chunks"]): Promise<Log> {
  let now = 0;
  const log = await Log.open(dir, {
    clock: () => now,
    timers: false,
    fsync: false,
    sealEveryMs: 0,
    beaconInterval: 1024,
    segmentBytes: 1024,
    chunks,
  });
  for (let g = 0; g < GROUPS; g++) {
    now = (g + 1) * 1000;
    await log.appendMany(Array.from({ length: PER }, (_, k) => `{"i":${g * PER + k + 1}}`));
  }
  await log.roll();
  await log.chunks.settled(true);
  return log;
}

// The first row at or after `us` (rows of commit g at (g+1) s).
function expected(us: number): { offset: number; ts: number } {
  const g = Math.max(0, Math.ceil(us / S) - 1);
  return { offset: g * PER + 1, ts: (g + 1) * S };
}

// Times inside the chunks' spans: at each commit after a chunk's first, and 1 µs before it.
function inside(chunks: readonly ChunkEntry[]): number[] {
  const out: number[] = [];
  for (const c of chunks) {
    for (let t = c.first_ts + S; t <= c.last_ts; t += S) out.push(t, t - 1);
  }
  return out;
}

async function files(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(join(dir, "chunks"))) names.push(e.name);
  return names.sort();
}

Deno.test("time index: encodes and decodes runs, large times and offsets included", () => {
  const t = { first: 2 ** 40, offsets: [2 ** 40, 2 ** 40 + 1, 2 ** 40 + 300], times: [0, 0, 0] };
  t.times = [1_764_581_400_000_000, 1_764_581_400_000_001, 1_764_581_460_123_456];
  const bytes = encodeTimes(t);
  assertEquals(decodeTimes(bytes, "x"), t);
  assertEquals([...bytes.subarray(0, 5)], [0x53, 0x43, 0x54, 0x49, 1]);
  // Each damage is named.
  const damaged: [string, (b: Uint8Array) => Uint8Array][] = [
    ["magic", (b) => (b[1] ^= 1, b)],
    ["version", (b) => (b[4] = 2, b)],
    ["checksum", (b) => (b[b.length - 6] ^= 0x40, b)],
    ["too short", (b) => b.subarray(0, 10)],
    ["checksum", (b) => b.subarray(0, b.length - 1)],
  ];
  for (const [what, hurt] of damaged) {
    const err = assertThrows(() => decodeTimes(hurt(bytes.slice()), "f.times"), ChunkCorruptError);
    assert(err.message.includes(what) && err.message.includes("f.times"), err.message);
  }
  assertThrows(() => encodeTimes({ first: 1, offsets: [], times: [] }), RangeError);
  // Merging joins a time shared across the boundary.
  const a = { first: 1, offsets: [1, 4], times: [10, 20] };
  const b = { first: 9, offsets: [9, 12], times: [20, 30] };
  assertEquals(mergeTimes([a, b]), { first: 1, offsets: [1, 4, 12], times: [10, 20, 30] });
});

Deno.test("time index: since inside a chunk is exact, between commits and at one; log and folder", async () => {
  const dir = await tempDir();
  try {
    const log = await timedLog(dir, { fanIn: 1000 });
    const chunks = log.chunks.manifest!.chunks;
    assert(chunks.length >= 3, `${chunks.length} chunks`);
    assert(chunks.some((c) => c.last_ts > c.first_ts), "a chunk holds several commits");
    // One run per commit in each index.
    for (const c of chunks) {
      const t = (await readChunkTimes(dir, c))!;
      assertEquals(t.offsets.length, Math.round((c.last_ts - c.first_ts) / S) + 1);
    }
    const folder = await FolderReader.open(dir);
    const probes = inside(chunks);
    assert(probes.length > 0);
    for (const us of [...probes, 0, 1, chunks[0].first_ts, chunks.at(-1)!.last_ts]) {
      const want = expected(us);
      const got = await log.offsetAt(us);
      assertEquals([got.offset, got.ts, got.exact], [want.offset, want.ts, true], `since ${us}`);
      const f = await folder.offsetAt(us);
      assertEquals([f.offset, f.ts, f.exact], [want.offset, want.ts, true], `folder ${us}`);
    }
    await log.close();
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("time index: merged chunks get their sources' runs; replaced ones lose theirs after the grace period", async () => {
  const dir = await tempDir();
  try {
    const log = await timedLog(dir, { fanIn: 2, graceMs: 0 });
    const m = log.chunks.manifest!;
    assert(m.chunks.some((c) => c.rows > 2 * PER), "chunks were merged");
    for (const c of m.chunks) {
      const t = (await readChunkTimes(dir, c))!;
      assert(t !== null, `merged chunk ${c.sha256} has an index`);
      assertEquals(t.offsets.length, Math.round((c.last_ts - c.first_ts) / S) + 1);
    }
    for (const us of inside(m.chunks)) {
      const want = expected(us);
      const got = await log.offsetAt(us);
      assertEquals([got.offset, got.ts, got.exact], [want.offset, want.ts, true], `since ${us}`);
    }
    // Every replaced chunk is gone past its grace period, and its index with it.
    await log.chunks.settled(true);
    const want = log.chunks.manifest!.chunks.flatMap((
      c,
    ) => [`${c.sha256}.ndjson.zst`, `${c.sha256}.times`]);
    assertEquals(await files(dir), want.sort());
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("time index: retention deletes a chunk's index with the chunk", async () => {
  const dir = await tempDir();
  try {
    const log = await timedLog(dir, { fanIn: 1000 });
    const chunks = log.chunks.manifest!.chunks;
    log.chunks.setRetention({ retainBytes: chunks.slice(2).reduce((n, e) => n + e.bytes, 0) });
    await log.chunks.settled(true);
    const kept = log.chunks.manifest!.chunks;
    assert(kept.length < chunks.length);
    const want = kept.flatMap((c) => [`${c.sha256}.ndjson.zst`, `${c.sha256}.times`]);
    assertEquals(await files(dir), want.sort());
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("time index: chunks without one (an older log) answer chunk-grained, and verify passes", async () => {
  const dir = await tempDir();
  try {
    const log = await timedLog(dir, { fanIn: 1000 });
    await log.close();
    for (const f of await files(dir)) {
      if (f.endsWith(".times")) await Deno.remove(join(dir, "chunks", f));
    }
    const again = await Log.open(dir, { timers: false, chunks: { fanIn: 1000 } });
    await again.chunks.settled();
    const chunks = again.chunks.manifest!.chunks;
    const folder = await FolderReader.open(dir);
    for (const c of chunks) {
      for (let t = c.first_ts + S; t <= c.last_ts; t += S) {
        const got = await again.offsetAt(t);
        assertEquals([got.offset, got.ts, got.exact], [c.first, c.first_ts, false], `since ${t}`);
        const f = await folder.offsetAt(t - 1);
        assertEquals([f.offset, f.ts, f.exact], [c.first, c.first_ts, false], `folder ${t - 1}`);
      }
      // At the chunk's first time: exact, as before.
      assertEquals((await again.offsetAt(c.first_ts)).exact, true);
    }
    await again.close();
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("time index: a damaged one is reported by verify (naming it) and ignored by the lookup", async () => {
  const dir = await tempDir();
  try {
    const log = await timedLog(dir, { fanIn: 1000 });
    const c = log.chunks.manifest!.chunks.find((e) => e.last_ts > e.first_ts)!;
    await log.close();
    const path = timesPath(dir, c.sha256);
    const good = await Deno.readFile(path);
    const damages: [string, Uint8Array][] = [
      ["checksum", good.map((b, i) => (i === 21 ? b ^ 1 : b))],
      ["magic", good.map((b, i) => (i === 0 ? 0x58 : b))],
      ["too short", good.subarray(0, 7)],
    ];
    for (const [what, bytes] of damages) {
      await Deno.writeFile(path, bytes);
      const err = (await verifyLog(dir)).error;
      assert(err !== null, `verify finds the damaged index (${what})`);
      assertEquals(err.path, path);
      assert(err.message.includes(what), err.message);
      const folder = await FolderReader.open(dir);
      const got = await folder.offsetAt(c.last_ts);
      assertEquals([got.offset, got.ts, got.exact], [c.first, c.first_ts, false], what);
      const open = await Log.open(dir, { timers: false, chunks: { fanIn: 1000 } });
      await open.chunks.settled();
      const l = await open.offsetAt(c.last_ts - 1);
      assertEquals([l.offset, l.ts, l.exact], [c.first, c.first_ts, false], what);
      await open.close();
    }
    // An index that is sound but not this chunk's is damage too.
    const other = { ...c, sha256: "0".repeat(64), first_ts: c.first_ts + 1 };
    await Deno.writeFile(path, good);
    assertEquals(await readChunkTimes(dir, { ...c }) !== null, true);
    await Deno.writeFile(timesPath(dir, other.sha256), good);
    let seen: unknown = null;
    await readChunkTimes(dir, other).catch((e) => (seen = e));
    assert(seen instanceof ChunkCorruptError && seen.message.includes("times"), String(seen));
  } finally {
    await rmrf(dir);
  }
});

Deno.test("time index: an orphan index (its chunk never listed) goes at open; listed ones stay", async () => {
  const dir = await tempDir();
  try {
    const log = await timedLog(dir, { fanIn: 1000 });
    const listed = log.chunks.manifest!.chunks;
    await log.close();
    const before = await files(dir);
    const orphan = "ab".repeat(32);
    const c = listed[0];
    // A crash between the index and the manifest leaves an index (and chunk)
    // nothing lists; also an index alone.
    await Deno.copyFile(timesPath(dir, c.sha256), timesPath(dir, orphan));
    await Deno.copyFile(timesPath(dir, c.sha256), timesPath(dir, "cd".repeat(32)));
    await Deno.writeFile(join(dir, "chunks", `${orphan}.ndjson.zst`), new Uint8Array([1, 2]));
    const again = await Log.open(dir, { timers: false, chunks: { fanIn: 1000 } });
    await again.chunks.settled();
    assertEquals(await files(dir), before);
    for (const e of listed) assert(await readChunkTimes(dir, e) !== null);
    await again.close();
  } finally {
    await rmrf(dir);
  }
});
