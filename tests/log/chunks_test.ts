import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { join } from "node:path";
import zlib from "node:zlib";
import { chunkPath, Log, LogEvictedError, verifyLog } from "../../log/mod.ts";
import { readChunkTimes } from "../../log/chunk/times.ts";
import { readManifest } from "../../log/chunk/manifest_file.ts";
import { RETENTION_SLICES } from "../../log/chunk/merge_plan.ts";
import { rmrf, tempDir, text, utf8 } from "../harness/util.ts";
import { crashPayload } from "./_crash_payload.ts";

async function readAll(log: Log, from = 1): Promise<[number, string][]> {
  const r = log.reader(from);
  const out: [number, string][] = [];
  try {
    while (true) {
      const b = await r.read(32 * 1024);
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) {
        out.push([b.offsets[i], text(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]))]);
      }
    }
  } finally {
    r.close();
  }
  return out;
}

function checkAll(rows: [number, string][], first: number, last: number): void {
  assertEquals(rows.length, last - first + 1, `rows ${first}..${last}`);
  for (let i = 0; i < rows.length; i++) {
    assertEquals(rows[i][0], first + i);
    assertEquals(rows[i][1], text(crashPayload(first + i)));
  }
}

async function segmentFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) if (e.name.endsWith(".seg")) out.push(e.name);
  return out.sort();
}

Deno.test("chunks replace sealed segments; readers cross chunks and segments seamlessly", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, {
      segmentBytes: 16 * 1024,
      chunks: { fanIn: 100 },
      timers: false,
    });
    for (let o = 1; o <= 2000; o += 50) {
      await log.appendMany(Array.from({ length: 50 }, (_, k) => crashPayload(o + k)));
    }
    await log.chunks.settled();
    const m = log.chunks.manifest!;
    assert(m.chunks.length >= 5, `${m.chunks.length} chunks`);
    assertEquals(m.chunks[0].first, 1);
    assertEquals(m.stream_id, log.streamId);
    // Only the active segment is left; sealed ones are now chunks.
    assertEquals((await segmentFiles(dir)).length, 1);
    // A chunk decompresses to the exact wire lines.
    const c = m.chunks[0];
    const lines = text(zlib.zstdDecompressSync(await Deno.readFile(chunkPath(dir, c.sha256))));
    assertEquals(lines.split("\n")[0], `[1,${text(crashPayload(1))}]`);
    assert(lines.endsWith("\n"));
    assertEquals(lines.split("\n").length - 1, c.rows);
    // Every start offset reads the same rows, whichever tier holds them.
    checkAll(await readAll(log), 1, 2000);
    for (const from of [1, c.last, c.last + 1, m.through, m.through + 1, 1999, 2000]) {
      checkAll(await readAll(log, from), from, 2000);
    }
    assertEquals(log.rowsBetween(1, log.endOffset), 2000);
    await log.close();
    // Reopen: the manifest is read back; verify checks chunks too.
    const again = await Log.open(dir, { chunks: true, timers: false });
    assertEquals(again.chunks.manifest!.generation, m.generation);
    checkAll(await readAll(again), 1, 2000);
    await again.close();
    const report = await verifyLog(dir);
    assertEquals(report.error, null);
    assertEquals(report.rows, 2000);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("chunks seal by age with an injected clock", async () => {
  const dir = await tempDir();
  try {
    let now = 1_800_000_000_000;
    const log = await Log.open(dir, {
      chunks: true,
      timers: false,
      clock: () => now,
      sealEveryMs: 1000,
    });
    await log.append(utf8('{"a":1}'));
    now += 999;
    log.tick();
    await log.chunks.settled();
    assertEquals(log.chunks.manifest!.chunks.length, 0);
    now += 1;
    log.tick();
    await log.chunks.settled();
    assertEquals(log.chunks.manifest!.chunks.map((c) => [c.first, c.last]), [[1, 1]]);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("chunks merge size-tiered: the count grows logarithmically; replaced chunks stay readable for the grace period", async () => {
  const dir = await tempDir();
  try {
    let now = 1_800_000_000_000;
    const log = await Log.open(dir, {
      chunks: { fanIn: 4, graceMs: 60_000 },
      timers: false,
      clock: () => now,
    });
    let seals = 0;
    for (let o = 1; o <= 64 * 10; o += 10) {
      await log.appendMany(Array.from({ length: 10 }, (_, k) => crashPayload(o + k)));
      await log.roll();
      seals++;
    }
    await log.chunks.settled();
    const m = log.chunks.manifest!;
    // 64 seals of equal size with fan-in 4: 64 → 16 → 4 → 1 chunk.
    assert(m.chunks.length <= 4, `${m.chunks.length} chunks after ${seals} seals`);
    assert(m.retired.length > 0, "merges retired chunks");
    checkAll(await readAll(log), 1, 640);
    // A reader part way through an old manifest can still fetch a replaced chunk.
    const old = m.retired[0].sha256;
    assert((await Deno.stat(chunkPath(dir, old))).isFile);
    now += 61_000;
    await log.chunks.settled(true);
    assertEquals(log.chunks.manifest!.retired.length, 0);
    await assertRejects(() => Deno.stat(chunkPath(dir, old)), Deno.errors.NotFound);
    checkAll(await readAll(log), 1, 640);
    await log.close();
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("retention drops the oldest chunks and moves earliest up", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { chunks: { fanIn: 1000, retainBytes: 3000 }, timers: false });
    for (let o = 1; o <= 400; o += 40) {
      await log.appendMany(Array.from({ length: 40 }, (_, k) => crashPayload(o + k)));
      await log.roll();
    }
    await log.chunks.settled(true);
    const m = log.chunks.manifest!;
    const bytes = m.chunks.reduce((n, c) => n + c.bytes, 0);
    assert(bytes <= 3000, `kept ${bytes} bytes`);
    const earliest = log.earliest!;
    assert(earliest > 1, `earliest ${earliest}`);
    assertEquals(earliest, m.chunks[0].first);
    const err = await assertRejects(() => readAll(log, 1), LogEvictedError);
    assertEquals(err.earliest, earliest);
    checkAll(await readAll(log, earliest), earliest, 400);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

const child = new URL("./_chunk_child.ts", import.meta.url).pathname;
for (
  const step of [
    "chunk-written",
    "times-written",
    "manifest-written",
    "merge-written",
    "merge-times-written",
    "merge-manifest-written",
    "retain-manifest-written",
  ]
) {
  Deno.test(`chunks recover from a SIGKILL at ${step}`, async () => {
    const dir = await tempDir();
    try {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", child, dir, "600"],
        env: { STREAMCAST_CRASH_AT: step },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const said = text(out.stdout);
      if (step !== "retain-manifest-written") {
        assertEquals(out.signal, "SIGKILL", `killed at ${step}: ${said} ${text(out.stderr)}`);
      }
      if (step === "times-written" || step === "merge-times-written") {
        // Killed between the index and the manifest: an index nothing lists.
        const on = await readManifest(dir);
        const known = new Set([...(on?.chunks ?? []), ...(on?.retired ?? [])].map((c) => c.sha256));
        const left: string[] = [];
        for await (const e of Deno.readDir(join(dir, "chunks"))) {
          if (e.name.endsWith(".times") && !known.has(e.name.slice(0, 64))) left.push(e.name);
        }
        assertEquals(left.length, 1, `one unlisted index at ${step}`);
      }
      const log = await Log.open(dir, { chunks: { fanIn: 2, graceMs: 0 }, timers: false });
      await log.chunks.settled(true);
      const rows = await readAll(log);
      const end = log.endOffset - 1;
      assert(end >= 1, "rows survived");
      checkAll(rows, 1, end);
      // The manifest's chunks exist and hold exactly what they claim.
      const m = log.chunks.manifest!;
      assert(
        log.chunks.manifest === m,
        "the log shares its manifest until it changes, no copy per call",
      );
      let prev = 0;
      for (const c of m.chunks) {
        assert(c.first > prev);
        prev = c.last;
        assert((await Deno.stat(chunkPath(dir, c.sha256))).isFile);
        // Every listed chunk of a new log has its time index, complete.
        assert(await readChunkTimes(dir, c) !== null, `no time index for ${c.sha256}`);
      }
      // No orphan chunk files, nor orphan time indexes.
      const files: string[] = [];
      for await (const e of Deno.readDir(join(dir, "chunks"))) files.push(e.name);
      const listed = new Set(
        [...m.chunks, ...m.retired].flatMap((c) => [`${c.sha256}.ndjson.zst`, `${c.sha256}.times`]),
      );
      for (const f of files) assert(listed.has(f), `orphan ${f}`);
      // Appends continue.
      assertEquals(await log.append(crashPayload(end + 1)), end + 1);
      await log.close();
      assertEquals((await verifyLog(dir)).error, null);
    } finally {
      await rmrf(dir);
    }
  });
}

Deno.test("a chunk reader hands out rows longer than one read's worth whole", async () => {
  // Regression: a cursor that takes about `maxBytes` of decompressed output at
  // a time once refused a chunk whose rows were each longer than that.
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, {
      segmentBytes: 4 << 20,
      chunks: { fanIn: 100 },
      timers: false,
    });
    const rows = Array.from(
      { length: 12 },
      (_, i) => utf8(`{"i":${i + 1},"pad":"${"y".repeat(300_000 + i)}"}`),
    );
    for (const r of rows) await log.append(r);
    await log.roll();
    await log.chunks.settled();
    assert(log.chunks.manifest!.chunks.length >= 1, "a chunk was made");
    const got = await readAll(log);
    assertEquals(got.length, rows.length);
    for (let i = 0; i < rows.length; i++) assertEquals(got[i][1], text(rows[i]));
  } finally {
    await rmrf(dir);
  }
});

Deno.test("merges stay within a slice of retainBytes, so retention keeps dropping the oldest chunks", async () => {
  const dir = await tempDir();
  try {
    const retainBytes = 8000;
    const log = await Log.open(dir, {
      chunks: { fanIn: 4, graceMs: 0, retainBytes },
      timers: false,
    });
    let moves = 0;
    let earliest = 1;
    for (let o = 1; o <= 2000; o += 20) {
      await log.appendMany(Array.from({ length: 20 }, (_, k) => crashPayload(o + k)));
      await log.roll();
      await log.chunks.settled(true);
      const m = log.chunks.manifest!;
      for (const c of m.chunks) {
        // A merged chunk is at most a slice; a single seal may be bigger, but none is here.
        assert(
          c.bytes <= retainBytes / RETENTION_SLICES,
          `chunk ${c.first}..${c.last}: ${c.bytes} B`,
        );
      }
      const kept = m.chunks.reduce((n, c) => n + c.bytes, 0);
      assert(kept <= retainBytes, `kept ${kept} B`);
      if (log.earliest! > earliest) moves++;
      earliest = log.earliest!;
    }
    const m = log.chunks.manifest!;
    assert(m.chunks.some((c) => c.rows > 20), "some chunks were merged");
    // Retention dropped, again and again, and keeps at least all but one slice of the bound.
    assert(moves >= 3, `earliest moved up ${moves} times in 100 seals`);
    const kept = m.chunks.reduce((n, c) => n + c.bytes, 0);
    assert(kept >= retainBytes - 2 * (retainBytes / RETENTION_SLICES), `kept ${kept} B`);
    checkAll(await readAll(log, log.earliest!), log.earliest!, 2000);
    await log.close();
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("merges span at most a slice of retainAge, so retention by age keeps dropping the oldest chunks", async () => {
  const dir = await tempDir();
  try {
    let now = 1_800_000_000_000;
    const retainAgeMs = 60_000;
    const log = await Log.open(dir, {
      chunks: { fanIn: 4, graceMs: 0, retainAgeMs },
      timers: false,
      clock: () => now,
    });
    // One seal every 2 s for 10 minutes: small chunks that would all merge into one.
    for (let o = 1; o <= 3000; o += 10) {
      await log.appendMany(Array.from({ length: 10 }, (_, k) => crashPayload(o + k)));
      await log.roll();
      now += 2000;
      await log.chunks.settled(true);
      for (const c of log.chunks.manifest!.chunks) {
        const spanMs = (c.last_ts - c.first_ts) / 1000;
        assert(
          spanMs <= retainAgeMs / RETENTION_SLICES,
          `chunk ${c.first}..${c.last} spans ${spanMs} ms`,
        );
      }
    }
    const m = log.chunks.manifest!;
    assert(m.chunks.some((c) => c.rows > 10), "some chunks were merged");
    // What is kept is no older than the bound plus one slice.
    const oldestMs = now - m.chunks[0].first_ts / 1000;
    assert(
      oldestMs <= retainAgeMs * (1 + 1 / RETENTION_SLICES) + 2000,
      `oldest row ${oldestMs} ms`,
    );
    assert(log.earliest! > 2500, `earliest ${log.earliest}`);
    checkAll(await readAll(log, log.earliest!), log.earliest!, 3000);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("chunks a merge replaced stay no longer than retention by age would keep their rows", async () => {
  const dir = await tempDir();
  try {
    let now = 1_800_000_000_000;
    const retainAgeMs = 60_000;
    const log = await Log.open(dir, {
      chunks: { fanIn: 4, graceMs: 15 * 60_000, retainAgeMs },
      timers: false,
      clock: () => now,
    });
    // One seal every 2 s for 10 minutes: merges all along, each replacing chunks.
    for (let o = 1; o <= 3000; o += 10) {
      await log.appendMany(Array.from({ length: 10 }, (_, k) => crashPayload(o + k)));
      await log.roll();
      now += 2000;
      await log.chunks.settled(true);
      for (const r of log.chunks.manifest!.retired) {
        // Not the 15-minute grace: its rows were appended at most 2 s ago.
        assert(r.until_us <= (now + retainAgeMs) * 1000, `retired until ${r.until_us}`);
      }
    }
    const m = log.chunks.manifest!;
    assert(m.retired.length > 0, "merges retired chunks");
    // What is on disk is what the manifest lists or retires: the rest was deleted.
    const files = (await Array.fromAsync(Deno.readDir(join(dir, "chunks"))))
      .filter((e) => e.name.endsWith(".ndjson.zst")).length;
    assertEquals(files, m.chunks.length + m.retired.length);
    // About a minute and a quarter of seals listed, a minute of replaced ones: not ten minutes'.
    assert(files < 150, `${files} chunk files after 300 seals`);
    checkAll(await readAll(log, log.earliest!), log.earliest!, 3000);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});
