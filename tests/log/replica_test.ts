// A replica log (a mirror's): rows at the primary's offsets, fenced gaps,
// the primary's chunks adopted (checked, same names), covered segments
// deleted, no chunks of its own — through the real log, worker and files.
import { assertEquals, assertRejects } from "../harness/assert.ts";
import { join } from "node:path";
import { Log, verifyLog } from "../../log/mod.ts";
import { encodeTimes } from "../../log/chunk/times.ts";
import { ChunkDigestError, storeAdoptedChunk } from "../../log/chunk/adoption.ts";
import { chunkPath } from "../../log/chunk/chunk.ts";
import { timesPath } from "../../log/chunk/times.ts";
import { rmrf, tempDir } from "../harness/util.ts";

const row = (i: number) => `{"i":${i}}`;
const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, k) => a + k);

async function lines(log: Log, from: number): Promise<string[]> {
  const out: string[] = [];
  const r = log.reader(from);
  try {
    while (true) {
      const b = await r.read(1 << 20);
      if (b.count === 0) break;
      for (let k = 0; k < b.count; k++) out.push(`${b.offsets[k]}`);
    }
  } finally {
    r.close();
  }
  return out;
}

Deno.test("replica log: appendAt keeps the primary's offsets, skips what it holds, fences a jump", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(join(dir, "r"), { replica: true, timers: false, firstOffset: 5 });
    assertEquals(await log.appendAt([5, 6, 7], [row(5), row(6), row(7)]), 3);
    // A reconnect sends some again: skipped; a jump is a gap, kept.
    assertEquals(
      await log.appendAt([6, 7, 8, 20, 21], [row(6), row(7), row(8), row(20), row(21)]),
      3,
    );
    assertEquals(log.endOffset, 22);
    assertEquals(log.rowsBetween(5, 22), 6);
    assertEquals(await lines(log, 5), ["5", "6", "7", "8", "20", "21"]);
    await assertRejects(() => log.appendAt([30, 29], ["{}", "{}"]), RangeError);
    // A replica makes no chunks of its own.
    await log.roll();
    await log.chunks.settled(true);
    assertEquals(log.chunks.manifest?.chunks.length, 0);
    await log.close();
    // Reopened (after a crash too): offsets and the gap are still there.
    const again = await Log.open(join(dir, "r"), { replica: true, timers: false });
    assertEquals(again.endOffset, 22);
    assertEquals(await lines(again, 5), ["5", "6", "7", "8", "20", "21"]);
    assertEquals((await verifyLog(join(dir, "r"))).error, null);
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replica log: the primary's chunks are adopted by name, checked, and replace covered segments", async () => {
  const dir = await tempDir();
  try {
    // The primary: makes chunks of 1..100 and 101..150.
    const primary = await Log.open(join(dir, "p"), { chunks: true, timers: false });
    await primary.appendMany(range(1, 100).map(row));
    await primary.roll();
    await primary.appendMany(range(101, 150).map(row));
    await primary.roll();
    await primary.chunks.settled();
    const m = primary.chunks.manifest!;
    assertEquals(m.chunks.length, 2);
    // The replica holds 1..120 from its tail, in two sealed segments and an active one.
    const rdir = join(dir, "r");
    const log = await Log.open(rdir, { replica: true, timers: false, streamId: primary.streamId });
    await log.appendAt(range(1, 60), range(1, 60).map(row));
    await log.roll();
    await log.appendAt(range(61, 110), range(61, 110).map(row));
    await log.roll();
    await log.appendAt(range(111, 120), range(111, 120).map(row));
    assertEquals(log.segments().length, 3);
    // A damaged copy is refused, nothing kept.
    const c0 = m.chunks[0];
    const bytes = await Deno.readFile(chunkPath(primary.dir, c0.sha256));
    const bad = bytes.slice();
    bad[10] ^= 1;
    await assertRejects(() => storeAdoptedChunk(rdir, c0, bad, null), ChunkDigestError);
    const times = await Deno.readFile(timesPath(primary.dir, c0.sha256));
    const lying = encodeTimes({ first: c0.first, offsets: [c0.first], times: [c0.first_ts + 1] });
    await assertRejects(() => storeAdoptedChunk(rdir, c0, bytes, lying), ChunkDigestError);
    // The first chunk (rows the replica holds): adopted; the segment it covers goes.
    await storeAdoptedChunk(rdir, c0, bytes, times);
    await log.adoptChunks([c0]);
    assertEquals(log.chunks.manifest!.chunks.map((c) => c.sha256), [c0.sha256]);
    assertEquals(log.segments().map((s) => s.firstOffset), [61, 111]);
    assertEquals(await Deno.readFile(timesPath(rdir, c0.sha256)), times);
    // The second reaches past the replica's end: adopted, and the next offset moves past it.
    const c1 = m.chunks[1];
    await storeAdoptedChunk(rdir, c1, await Deno.readFile(chunkPath(primary.dir, c1.sha256)), null);
    await log.adoptChunks([c0, c1]);
    assertEquals(log.endOffset, 151);
    assertEquals(log.segments().map((s) => s.firstOffset), [151]);
    assertEquals(log.chunks.manifest!.chunks, m.chunks);
    assertEquals(await lines(log, 1), range(1, 150).map(String));
    // Time lookups use the primary's times, through the adopted index.
    assertEquals((await log.offsetAt(c1.first_ts)).offset, 101);
    await log.close();
    // Reopened: the manifest is the primary's, files and all.
    const again = await Log.open(rdir, { replica: true, timers: false });
    assertEquals(again.chunks.manifest!.chunks, m.chunks);
    assertEquals(again.endOffset, 151);
    await again.close();
    assertEquals((await verifyLog(rdir)).error, null);
    await primary.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replica log: a merge upstream replaces the chunks it merged", async () => {
  const dir = await tempDir();
  try {
    const primary = await Log.open(join(dir, "p"), {
      chunks: { fanIn: 2 },
      timers: false,
    });
    const rdir = join(dir, "r");
    const log = await Log.open(rdir, { replica: true, timers: false, streamId: primary.streamId });
    await primary.appendMany(range(1, 10).map(row));
    await primary.roll();
    await primary.chunks.settled();
    const first = [...primary.chunks.manifest!.chunks];
    for (const c of first) {
      await storeAdoptedChunk(rdir, c, await Deno.readFile(chunkPath(primary.dir, c.sha256)), null);
    }
    await log.adoptChunks(first);
    await primary.appendMany(range(11, 20).map(row));
    await primary.roll();
    await primary.chunks.settled();
    const merged = [...primary.chunks.manifest!.chunks];
    assertEquals(merged.length, 1);
    for (const c of merged) {
      await storeAdoptedChunk(rdir, c, await Deno.readFile(chunkPath(primary.dir, c.sha256)), null);
    }
    await log.adoptChunks(merged);
    assertEquals(log.chunks.manifest!.chunks, merged);
    assertEquals(log.chunks.manifest!.retired.map((r) => r.sha256), first.map((c) => c.sha256));
    assertEquals(await lines(log, 1), range(1, 20).map(String));
    await log.close();
    await primary.close();
  } finally {
    await rmrf(dir);
  }
});
