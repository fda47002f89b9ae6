// verify beside a live writer: segments are chunked and deleted, chunks merged
// and retired, while verifyLog runs again and again. A file that disappears
// because the manifest now covers it is no finding; one that is really
// missing still is.
import { join } from "node:path";
import { assert, assertEquals } from "../harness/assert.ts";
import { chunkPath, Log, verifyLog } from "../../log/mod.ts";
import { rmrf, tempDir } from "../harness/util.ts";

function payload(i: number): string {
  return JSON.stringify({ seq: i, pad: "p".repeat(40 + (i % 50)) });
}

async function segmentFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) if (e.name.endsWith(".seg")) out.push(e.name);
  return out.sort();
}

Deno.test("verify never reports a false error beside a log that chunks, merges and deletes", async () => {
  const dir = await tempDir();
  const log = await Log.open(dir, {
    fsync: false,
    segmentBytes: 16 * 1024,
    sealEveryMs: 10,
    maintainEveryMs: 50,
    // Merged often, retired chunks deleted at once, old ones dropped by retention.
    chunks: { fanIn: 2, maxChunkBytes: 32 * 1024, graceMs: 0, retainBytes: 256 * 1024 },
  });
  let stop = false;
  let appended = 0;
  const writer = (async () => {
    while (!stop) {
      const batch = Array.from({ length: 20 }, (_, k) => payload(appended + k + 1));
      await log.appendMany(batch);
      appended += batch.length;
      // Drives sealing by age and the worker's maintenance (merge, retire, retain).
      log.tick();
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  try {
    let runs = 0;
    let sawChunks = 0;
    let sawSegments = 0;
    const deadline = Date.now() + 3000;
    while (Date.now() < deadline || runs < 30) {
      const report = await verifyLog(dir);
      runs++;
      assertEquals(report.error, null, `run ${runs}: ${report.error?.message}`);
      assert(report.rows > 0 || appended === 0, `run ${runs}: no rows`);
      if ((report.manifest?.chunks.length ?? 0) > 0) sawChunks++;
      if (report.segments.length > 1) sawSegments++;
    }
    // The race was really run: the worker kept chunking, merging and
    // deleting while verify ran, and verify saw chunks and segments side by side.
    const generation = log.chunks.manifest?.generation ?? 0;
    assert(generation > 20, `manifest generation ${generation} after ${appended} rows`);
    assert(sawChunks > 0, `chunks in none of ${runs} runs`);
    assert(sawSegments > 0, `more than one segment in none of ${runs} runs`);
  } finally {
    stop = true;
    await writer;
    await log.close();
    await rmrf(dir);
  }
});

Deno.test("verify still reports a segment or a chunk that is really missing", async () => {
  const dir = await tempDir();
  try {
    // Sealed segments that are not chunked: a missing one is not explained.
    const plain = join(dir, "plain");
    const log = await Log.open(plain, { segmentBytes: 1024, timers: false });
    for (let i = 1; i <= 100; i++) await log.append(payload(i));
    await log.close();
    const segs = await segmentFiles(plain);
    assert(segs.length >= 3, `${segs.length} segments`);
    assertEquals((await verifyLog(plain)).error, null);
    // Deleted while verify reads the first segment: listed, then gone, and no chunk holds it.
    let deleted = false;
    const gone = await verifyLog(plain, {
      onProgress: () => {
        if (deleted) return;
        deleted = true;
        Deno.removeSync(join(plain, segs[1]));
      },
    });
    assert(deleted, "verify reported no progress");
    assert(gone.error !== null, "a missing segment went unreported");
    assertEquals(gone.error.path, join(plain, segs[1]));
    assert(/segment disappeared during the check/.test(gone.error.message), gone.error.message);

    // A chunk listed in the manifest whose file is gone.
    const chunked = join(dir, "chunked");
    const c = await Log.open(chunked, { segmentBytes: 1024, timers: false, chunks: true });
    for (let i = 1; i <= 100; i++) await c.append(payload(i));
    await c.chunks.settled();
    const m = c.chunks.manifest!;
    await c.close();
    assert(m.chunks.length >= 2, `${m.chunks.length} chunks`);
    await Deno.remove(chunkPath(chunked, m.chunks[1].sha256));
    const report = await verifyLog(chunked);
    assert(report.error !== null, "a missing chunk went unreported");
    assert(
      /chunk listed in the manifest is missing/.test(report.error.message),
      report.error.message,
    );
  } finally {
    await rmrf(dir);
  }
});

Deno.test("verify takes a newest segment without a whole header for one being created", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { segmentBytes: 1024, timers: false });
    for (let i = 1; i <= 40; i++) await log.append(payload(i));
    // Sealed: the newest segment is then a fresh one, as just after a roll.
    await log.roll();
    await log.close();
    const segs = await segmentFiles(dir);
    const newest = join(dir, segs.at(-1)!);
    for (const bytes of [0, 50, 128]) {
      await Deno.truncate(newest, bytes);
      const report = await verifyLog(dir);
      assertEquals(report.error, null, `header cut to ${bytes} bytes: ${report.error?.message}`);
      assertEquals(report.rows, 40);
    }
    // Not the newest: damage.
    await Deno.truncate(join(dir, segs[0]), 50);
    const report = await verifyLog(dir);
    assert(report.error !== null, "a cut header of a sealed segment went unreported");
    assertEquals(report.error.path, join(dir, segs[0]));
  } finally {
    await rmrf(dir);
  }
});
