// The lock-free folder reader: the same rows as the log's own reader, beside
// a live writer that seals, chunks, merges and deletes under it.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { join } from "node:path";
import {
  FolderReader,
  Log,
  LogCorruptError,
  LogEvictedError,
  type RecordBatch,
} from "../../log/mod.ts";
import { recordSpans } from "../harness/mutate.ts";
import { rmrf, tempDir, text, utf8 } from "../harness/util.ts";

const row = (i: number): string => `{"i":${i},"pad":"${"x".repeat(i % 50)}"}`;

async function collect(it: AsyncIterable<RecordBatch>): Promise<[number, string][]> {
  const out: [number, string][] = [];
  for await (const b of it) {
    for (let i = 0; i < b.count; i++) {
      out.push([b.offsets[i], text(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]))]);
    }
  }
  return out;
}

function expectRows(got: [number, string][], from: number, to: number, where: string): void {
  assertEquals(got.length, to - from + 1, `${where}: ${got.length} rows`);
  for (let k = 0; k < got.length; k++) {
    assertEquals(got[k][0], from + k, `${where}: offset`);
    assertEquals(got[k][1], row(from + k), `${where}: row ${from + k}`);
  }
}

Deno.test("folder reader reads chunks, segments and a fence's gap like the log's reader", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, {
      timers: false,
      segmentBytes: 2048,
      beaconInterval: 1024,
      chunks: { fanIn: 1000 },
    });
    for (let i = 1; i <= 120; i++) await log.append(row(i));
    await log.chunks.settled();
    await log.fence(1000);
    for (let i = 1000; i < 1010; i++) await log.append(row(i));
    await log.close();
    const reader = await FolderReader.open(dir);
    assertEquals(reader.earliest, 1);
    assertEquals(reader.last, 1009);
    const all = await collect(reader.read(1, 2000));
    assertEquals(all.length, 130);
    expectRows(all.slice(0, 120), 1, 120, "before the fence");
    expectRows(all.slice(120), 1000, 1009, "after the fence");
    expectRows(await collect(reader.read(37, 83)), 37, 83, "a range inside the chunks");
    expectRows(await collect(reader.read(500, 1003)), 1000, 1003, "from inside the gap");
  } finally {
    await rmrf(dir);
  }
});

Deno.test("folder reader leaves a torn tail out and refuses damage followed by valid records", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    for (let i = 1; i <= 20; i++) await log.append(row(i));
    await log.close();
    const seg = join(dir, "00000000000000000001.seg");
    const bytes = await Deno.readFile(seg);
    await Deno.writeFile(seg, bytes.subarray(0, bytes.length - 3));
    expectRows(await collect((await FolderReader.open(dir)).read(1, 100)), 1, 19, "torn");
    // A damaged record with valid ones after it: corruption, as open says.
    const spans = recordSpans(bytes, 1 << 20);
    const damaged = bytes.slice();
    damaged[spans[4].start + 22] ^= 0xff;
    await Deno.writeFile(seg, damaged);
    const reader = await FolderReader.open(dir);
    const err = await assertRejects(() => collect(reader.read(1, 100)), LogCorruptError);
    assertEquals(err.path, seg);
    assert(err.message.includes("valid records follow"), err.message);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("folder reader refuses offsets the folder no longer holds", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false, firstOffset: 100 });
    await log.appendMany([row(100), row(101)]);
    await log.close();
    const reader = await FolderReader.open(dir);
    assertEquals(reader.earliest, 100);
    const err = await assertRejects(() => collect(reader.read(5, 200)), LogEvictedError);
    assertEquals(err.earliest, 100);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("folder reader reads right beside a writer that seals, chunks, merges and deletes", async () => {
  const dir = await tempDir();
  const log = await Log.open(dir, {
    timers: false,
    segmentBytes: 1024,
    beaconInterval: 1024,
    // Merge four into one and delete merged chunks at once: files go away
    // under the reader all the time.
    chunks: { fanIn: 4, graceMs: 0 },
  });
  let writing = true;
  let written = 0;
  const writer = (async () => {
    while (writing) {
      const n = 1 + (written % 5);
      await log.appendMany(Array.from({ length: n }, (_, k) => utf8(row(written + 1 + k))));
      written += n;
      if (written % 40 < 5) await log.chunks.settled(true);
    }
  })();
  try {
    let reads = 0;
    const stop = Date.now() + 3000;
    while (Date.now() < stop || reads < 10) {
      const to = written;
      if (to < 10) {
        await new Promise((r) => setTimeout(r, 5));
        continue;
      }
      const reader = await FolderReader.open(dir);
      const from = 1 + (reads * 7) % Math.max(1, to - 5);
      expectRows(await collect(reader.read(from, to)), from, to, `read ${reads} of ${from}..${to}`);
      reads++;
    }
    assert(log.chunks.manifest!.chunks.length > 0, "the writer made chunks");
  } finally {
    writing = false;
    await writer;
    await log.close();
    await rmrf(dir);
  }
});
