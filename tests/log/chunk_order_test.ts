// Chunks are made in offset order, whatever seals a segment first. The kill
// loop found a restart where the log's timer sealed the recovered tail
// segment before the older sealed segments were handed to the chunk worker:
// the worker chunked the tail first, refused the older segment ("overlaps the
// manifest"), and a reader from offset 1 skipped the tail's rows.
import { assert, assertEquals } from "../harness/assert.ts";
import { Log, verifyLog } from "../../log/mod.ts";
import { rmrf, tempDir, text } from "../harness/util.ts";
import { crashPayload } from "./_crash_payload.ts";

async function readAll(log: Log, from = 1): Promise<number[]> {
  const r = log.reader(from);
  const out: number[] = [];
  try {
    while (true) {
      const b = await r.read(32 * 1024);
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) {
        assertEquals(
          text(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i])),
          text(crashPayload(b.offsets[i])),
        );
        out.push(b.offsets[i]);
      }
    }
  } finally {
    r.close();
  }
  return out;
}

function range(first: number, last: number): number[] {
  return Array.from({ length: last - first + 1 }, (_, i) => first + i);
}

async function append(log: Log, first: number, last: number): Promise<void> {
  await log.appendMany(range(first, last).map(crashPayload));
}

Deno.test("a restart with sealed segments and a tail due to seal chunks them in offset order", async () => {
  const dir = await tempDir();
  try {
    // Sealed segments nobody chunked, and a tail with rows, as a crash leaves
    // them (here: written without the chunk worker).
    let now = 1_800_000_000_000;
    const plain = await Log.open(dir, { chunks: false, timers: false, clock: () => now });
    await append(plain, 1, 100);
    await plain.roll();
    await append(plain, 101, 200);
    await plain.roll();
    await append(plain, 201, 300);
    await plain.close();
    // Reopened long after: the tail is due to seal at the first tick, which
    // comes (every millisecond) while the worker is still loading.
    now += 60_000;
    const log = await Log.open(dir, { chunks: true, sealEveryMs: 4, clock: () => now });
    try {
      await log.chunks.settled();
      assertEquals(log.chunks.error, null);
      assertEquals(
        log.chunks.manifest!.chunks.map((c) => [c.first, c.last]),
        [[1, 100], [101, 200], [201, 300]],
      );
      assertEquals(await readAll(log), range(1, 300));
    } finally {
      await log.close();
    }
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("a sealed segment left behind by out-of-order chunking fills its gap, and no reader skips it", async () => {
  const dir = await tempDir();
  const aside = await tempDir();
  try {
    // The state the bug left: chunks 1..100 and 151..200, the segment of
    // 101..150 still sealed on disk, not in any chunk.
    const first = await Log.open(dir, { chunks: true, timers: false });
    await append(first, 1, 100);
    await first.roll();
    await first.chunks.settled();
    await first.close();
    const plain = await Log.open(dir, { chunks: false, timers: false });
    await append(plain, 101, 150);
    await plain.roll();
    await append(plain, 151, 200);
    await plain.roll();
    await plain.close();
    const s101 = plain.segments().find((s) => s.firstOffset === 101)!.path;
    const moved = `${aside}/held.seg`;
    await Deno.rename(s101, moved);
    const skip = await Log.open(dir, { chunks: true, timers: false });
    await skip.chunks.settled();
    assertEquals(skip.chunks.manifest!.chunks.map((c) => [c.first, c.last]), [[1, 100], [
      151,
      200,
    ]]);
    await skip.close();
    await Deno.rename(moved, s101);

    // Before the worker has seen it, a reader from 1 reads every row.
    const log = await Log.open(dir, { chunks: true, timers: false });
    try {
      assertEquals(await readAll(log), range(1, 200));
      await log.chunks.settled();
      assertEquals(log.chunks.error, null);
      assertEquals(
        log.chunks.manifest!.chunks.map((c) => [c.first, c.last]),
        [[1, 100], [101, 150], [151, 200]],
      );
      assert(!log.segments().some((s) => s.firstOffset === 101), "the segment was chunked");
      for (const from of [1, 100, 101, 150, 151, 200]) {
        assertEquals(await readAll(log, from), range(from, 200));
      }
    } finally {
      await log.close();
    }
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
    await rmrf(aside);
  }
});
