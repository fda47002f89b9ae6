import { assert, assertEquals, assertRejects, assertThrows } from "../harness/assert.ts";
import { join } from "node:path";
import { Log, LogCorruptError, LogLockedError, verifyLog } from "../../log/mod.ts";
import { rmrf, rng, tempDir, text, utf8 } from "../harness/util.ts";

function payloadFor(i: number, size: number): Uint8Array {
  // Deterministic content so a reread can be compared byte for byte.
  const s = `{"i":${i},"pad":"${"x".repeat(Math.max(0, size - 20))}"}`;
  return utf8(s);
}

async function readAll(log: Log, from: number): Promise<Map<number, string>> {
  const r = log.reader(from);
  const out = new Map<number, string>();
  while (true) {
    const b = await r.read(64 * 1024);
    if (b.count === 0) break;
    for (let i = 0; i < b.count; i++) {
      out.set(b.offsets[i], text(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i])));
    }
  }
  r.close();
  return out;
}

Deno.test("log round-trips records of random sizes across beacons and segments", async () => {
  const dir = await tempDir();
  try {
    const rand = rng(42);
    const opts = { beaconInterval: 1024, segmentBytes: 20_000, timers: false };
    const log = await Log.open(join(dir, "s"), opts);
    const expected: string[] = [""];
    for (let round = 0; round < 40; round++) {
      const n = 1 + Math.floor(rand() * 30);
      const payloads: Uint8Array[] = [];
      for (let k = 0; k < n; k++) {
        // Sizes around the beacon interval, including records bigger than it.
        const size = Math.floor(rand() < 0.1 ? 900 + rand() * 2500 : rand() * 300);
        payloads.push(payloadFor(expected.length + k, size));
      }
      if (round % 2) await log.appendMany(payloads);
      else await Promise.all(payloads.map((p) => log.append(p)));
      for (const p of payloads) expected.push(text(p));
    }
    const total = expected.length - 1;
    assertEquals(log.endOffset, total + 1);
    assert(log.segments().length > 5, `expected many segments, got ${log.segments().length}`);
    const all = await readAll(log, 1);
    assertEquals(all.size, total);
    for (let i = 1; i <= total; i++) assertEquals(all.get(i), expected[i]);
    // Seek to every offset: the first record returned is that offset.
    for (let o = 1; o <= total; o++) {
      const r = log.reader(o);
      const b = await r.read(4096);
      r.close();
      assertEquals(b.offsets[0], o);
      assertEquals(text(b.buf.subarray(b.starts[0], b.starts[0] + b.lengths[0])), expected[o]);
    }
    await log.close();
    // Reopen (full verification) and keep appending.
    const again = await Log.open(join(dir, "s"), opts);
    assertEquals(again.endOffset, total + 1);
    assertEquals(await again.append(utf8("{}")), total + 1);
    assertEquals((await readAll(again, total)).size, 2);
    await again.close();
    const tailOnly = await Log.open(join(dir, "s"), { ...opts, verify: "tail" });
    assertEquals(tailOnly.endOffset, total + 2);
    await tailOnly.close();
    const report = await verifyLog(join(dir, "s"));
    assertEquals(report.error, null);
    assertEquals(report.rows, total + 1);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log groups concurrent appends into few commits, in call order", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    const commits: [number, number][] = [];
    log.listen({ committed: (first, end) => void commits.push([first, end]) });
    const offsets = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => log.append(utf8(`{"i":${i}}`))),
    );
    assertEquals(offsets, Array.from({ length: 1000 }, (_, i) => i + 1));
    assert(commits.length <= 3, `1000 concurrent appends took ${commits.length} commits`);
    // Commits cover [1, 1001) contiguously, in order.
    let next = 1;
    for (const [first, end] of commits) {
      assertEquals(first, next);
      next = end;
    }
    assertEquals(next, 1001);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log acknowledges only after the commit is visible to readers", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    const p = log.append(utf8('{"a":1}'));
    assertEquals(log.endOffset, 1, "not durable before the commit");
    assertEquals(log.nextOffset, 2, "offset assigned at call time");
    assertEquals(await p, 1);
    assertEquals(log.endOffset, 2);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log refuses a second writer with a clear error", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    const err = await assertRejects(() => Log.open(dir), LogLockedError);
    assert(err.message.includes("already open for writing"), err.message);
    assert(err.message.includes(`pid ${Deno.pid}`), err.message);
    await log.close();
    const again = await Log.open(dir, { timers: false });
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log truncates a torn tail on open and continues at the next offset", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false, beaconInterval: 1024 });
    for (let i = 1; i <= 50; i++) await log.append(payloadFor(i, 100));
    await log.close();
    const seg = join(dir, "00000000000000000001.seg");
    const good = (await Deno.stat(seg)).size;
    // A partial record: a write cut short by a crash.
    const f = await Deno.open(seg, { append: true });
    const torn = new Uint8Array(40);
    new DataView(torn.buffer).setUint32(4, 51); // offset 51
    new DataView(torn.buffer).setUint32(16, 300); // claims 300 bytes of payload
    await f.write(torn);
    f.close();
    const again = await Log.open(dir, { timers: false, beaconInterval: 1024 });
    assertEquals(again.endOffset, 51);
    assertEquals((await Deno.stat(seg)).size, good);
    assertEquals(await again.append(payloadFor(51, 100)), 51);
    const all = await readAll(again, 1);
    assertEquals(all.size, 51);
    assertEquals(all.get(50), text(payloadFor(50, 100)));
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log refuses to open a sealed segment with a flipped byte, naming file and byte", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false, beaconInterval: 1024 });
    for (let i = 1; i <= 100; i++) await log.append(payloadFor(i, 120));
    await log.roll();
    await log.append(payloadFor(101, 120));
    await log.close();
    const seg = join(dir, "00000000000000000001.seg");
    const bytes = await Deno.readFile(seg);
    const at = Math.floor(bytes.length / 2);
    bytes[at] ^= 0x20;
    await Deno.writeFile(seg, bytes);
    const err = await assertRejects(() => Log.open(dir, { timers: false }), LogCorruptError);
    assertEquals(err.path, seg);
    assert(err.message.includes(seg), err.message);
    assert(err.position > 0 && err.position <= at, `position ${err.position} vs flipped ${at}`);
    const report = await verifyLog(dir);
    assert(report.error instanceof LogCorruptError);
    assertEquals(report.error.path, seg);
    assertEquals(report.error.position, err.position);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log refuses a damaged record in the active segment when valid records follow", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    for (let i = 1; i <= 100; i++) await log.append(payloadFor(i, 120));
    await log.close();
    const seg = join(dir, "00000000000000000001.seg");
    const bytes = await Deno.readFile(seg);
    bytes[128 + 40] ^= 0x01; // inside record 1's payload
    await Deno.writeFile(seg, bytes);
    const err = await assertRejects(() => Log.open(dir, { timers: false }), LogCorruptError);
    assert(err.message.includes("valid records follow"), err.message);
    assertEquals(err.position, 128);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log rolls segments by size and by age with an injected clock", async () => {
  const dir = await tempDir();
  try {
    let now = 1_700_000_000_000;
    const log = await Log.open(dir, {
      timers: false,
      clock: () => now,
      sealEveryMs: 60_000,
      segmentBytes: 4096,
    });
    await log.append(utf8('{"a":1}'));
    now += 59_000;
    log.tick();
    await log.flush();
    assertEquals(log.segments().length, 1, "not yet 60 s old");
    now += 1_000;
    log.tick();
    await log.flush();
    assertEquals(log.segments().length, 2, "sealed at 60 s");
    assertEquals(log.segments().filter((s) => s.sealed).map((s) => s.firstOffset), [1]);
    // An empty active segment is never sealed by age.
    now += 120_000;
    log.tick();
    await log.flush();
    assertEquals(log.segments().length, 2);
    // By size: 4096 bytes.
    for (let i = 0; i < 40; i++) await log.append(payloadFor(i, 200));
    assert(log.segments().length >= 3, "rolled by size");
    assert(log.segments().slice(0, -1).every((s) => s.sealed));
    await log.close();
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log refuses an oversized payload and keeps going", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false, maxPayloadBytes: 100 });
    assertThrows(() => log.append(new Uint8Array(101)), RangeError, "limit is 100");
    assertEquals(await log.append(new Uint8Array(100)), 1);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log fence starts a new segment above every issued offset", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    await log.append(utf8("{}"));
    await log.fence(1 + (1 << 20));
    assertEquals(await log.append(utf8("{}")), 1 + (1 << 20));
    assertEquals(log.rowsBetween(1, log.endOffset), 2);
    const all = await readAll(log, 1);
    assertEquals([...all.keys()], [1, 1 + (1 << 20)]);
    await log.close();
    const again = await Log.open(dir, { timers: false });
    assertEquals(again.endOffset, 2 + (1 << 20));
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log reader waits for new commits", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    const r = log.reader(1);
    assertEquals((await r.read()).count, 0);
    const waited = r.wait();
    await log.append(utf8('{"x":1}'));
    await waited;
    const b = await r.read();
    assertEquals(Array.from(b.offsets), [1]);
    r.close();
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log keeps its stream id across reopen; a recreated log gets a new one", async () => {
  const dir = await tempDir();
  try {
    const a = await Log.open(dir, { timers: false });
    const id = a.streamId;
    assert(/^[0-9a-f]{32}$/.test(id));
    await a.close();
    const b = await Log.open(dir, { timers: false });
    assertEquals(b.streamId, id);
    await b.close();
    await rmrf(dir);
    const c = await Log.open(dir, { timers: false });
    assert(c.streamId !== id);
    await c.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log keeps rows appended while a commit's write is still in flight", async () => {
  // Regression: the writer once handed the committer a view of its buffer,
  // and appends made during the write overwrote bytes still being written.
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    const pending: Promise<number>[] = [];
    for (let i = 1; i <= 400; i++) {
      pending.push(log.append(payloadFor(i, 40 + (i % 7) * 30)));
      // Let the committer start its write, then append more behind it.
      if (i % 3 === 0) await new Promise((r) => setTimeout(r, 0));
    }
    assertEquals(await Promise.all(pending), Array.from({ length: 400 }, (_, i) => i + 1));
    const all = await readAll(log, 1);
    for (let i = 1; i <= 400; i++) assertEquals(all.get(i), text(payloadFor(i, 40 + (i % 7) * 30)));
    await log.close();
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log cuts a complete but corrupt last record and keeps the good ones before it", async () => {
  // Regression: a bad record in the same read block as good ones once made
  // recovery cut the file at the start of the block.
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    for (let i = 1; i <= 50; i++) await log.append(payloadFor(i, 60));
    await log.close();
    const seg = join(dir, "00000000000000000001.seg");
    const good = (await Deno.stat(seg)).size;
    // A whole record for offset 51 whose checksum is wrong (power-loss garbage).
    const body = utf8('{"torn":true}');
    const rec = new Uint8Array(25 + body.length);
    const v = new DataView(rec.buffer);
    v.setUint32(4, 51);
    v.setUint32(16, body.length);
    rec.set(body, 20);
    v.setUint32(20 + body.length, 0xdeadbeef);
    rec[24 + body.length] = 0x0d;
    const f = await Deno.open(seg, { append: true });
    await f.write(rec);
    f.close();
    const again = await Log.open(dir, { timers: false });
    assertEquals(again.endOffset, 51);
    assertEquals((await Deno.stat(seg)).size, good);
    assertEquals(await again.append(payloadFor(51, 60)), 51);
    assertEquals((await readAll(again, 1)).size, 51);
    await again.close();
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
  }
});
