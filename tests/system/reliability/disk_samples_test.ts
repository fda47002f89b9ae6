// The soak's disk arithmetic: a folder's files added up by kind (chunks,
// segments, the rest) on a real folder, and the slope of the samples.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { diskLevels, diskSample, diskTrend } from "../../harness/soak/disk_samples.ts";
import { rmrf, tempDir } from "../../harness/util.ts";

const MIB = 1024 * 1024;

Deno.test("disk samples: a folder's files are added up as chunks, segments and the rest", async () => {
  const dir = await tempDir();
  try {
    await Deno.mkdir(join(dir, "t", "chunks"), { recursive: true });
    await Deno.writeFile(join(dir, "t", "chunks", "a.ndjson.zst"), new Uint8Array(MIB));
    await Deno.writeFile(join(dir, "t", "chunks", "a.times"), new Uint8Array(MIB / 4));
    await Deno.writeFile(join(dir, "t", "00000000000000000001.seg"), new Uint8Array(MIB / 2));
    await Deno.writeFile(join(dir, "t", "producers.log"), new Uint8Array(MIB / 8));
    const s = await diskSample(dir, 7);
    assertEquals(s, { t: 7, total: 1.875, chunks: 1.25, segments: 0.5, other: 0.125, files: 4 });
    assertEquals((await diskSample(join(dir, "gone"), 0)).total, 0);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("disk samples: the trend is the slope over the last minutes, flat after a rise", () => {
  // 30 minutes, a sample every 10 s: rising 1 MiB/min for 10 minutes, then level.
  const samples = [];
  for (let t = 0; t <= 1800; t += 10) {
    const total = 5 + Math.min(t, 600) / 60;
    samples.push({ t, total, chunks: total, segments: 0, other: 0, files: 1 });
  }
  const all = diskTrend(samples, 30);
  assert(all.totalSlopeMiBPerMin > 0.2, `${all.totalSlopeMiBPerMin}`);
  const last = diskTrend(samples, 20);
  assertEquals(last.windowMinutes, 20);
  assertEquals(last.totalSlopeMiBPerMin, 0);
  assertEquals([last.firstMiB, last.maxMiB, last.lastMiB], [5, 15, 15]);
});

Deno.test("disk samples: levels are the means per step", () => {
  const samples = [0, 60, 120, 180].map((t) => ({
    t,
    total: t / 60,
    chunks: 1,
    segments: 0,
    other: t / 60 - 1,
    files: 1,
  }));
  assertEquals(diskLevels(samples, 2).map((l) => [l.fromMinute, l.total, l.chunks]), [
    [0, 0.5, 1],
    [2, 2.5, 1],
  ]);
});
