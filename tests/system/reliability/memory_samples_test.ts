// The soaks' memory arithmetic: the least-squares slope, and the levels
// (means per step) that tell memory still rising from memory that has
// levelled off, including samples read back from JSON with nulls.
import { assert, assertEquals } from "../../harness/assert.ts";
import {
  memoryLevels,
  type MemorySample,
  rssSample,
  slope,
} from "../../harness/soak/memory_samples.ts";

// A sample at `t` seconds with RSS `rss` and nothing else read.
const at = (t: number, rss: number): MemorySample => rssSample(t, rss, rss - 50);

Deno.test("memory samples: the slope of a line is its slope; of one point, NaN", () => {
  assertEquals(slope([0, 1, 2, 3], [5, 7, 9, 11]), 2);
  assert(Number.isNaN(slope([1], [3])));
  assertEquals(slope([0, 1, NaN, 2], [0, 1, 99, 2]), 1);
});

Deno.test("memory samples: levels are the means per step, and show a rise that stops", () => {
  // 30 minutes, a sample every 30 s: rising 2 MiB/min for 20 minutes, then flat.
  const samples: MemorySample[] = [];
  for (let t = 0; t < 1800; t += 30) samples.push(at(t, 100 + 2 * Math.min(t, 1200) / 60));
  const levels = memoryLevels(samples, 10);
  assertEquals(levels.map((l) => l.fromMinute), [0, 10, 20]);
  assertEquals(levels.map((l) => l.rss), [109.5, 129.5, 140]);
  assertEquals(levels.map((l) => l.rssAnon), [59.5, 79.5, 90]);
  assert(levels.every((l) => Number.isNaN(l.mallocArenas)));
});

Deno.test("memory samples: levels of samples read back from JSON count null as not sampled", () => {
  const written = JSON.stringify([at(0, 100), { ...at(60, 110), mallocArenas: 40 }]);
  const levels = memoryLevels(JSON.parse(written), 5);
  assertEquals(levels.length, 1);
  assertEquals(levels[0].rss, 105);
  assertEquals(levels[0].mallocArenas, 40);
  assert(Number.isNaN(levels[0].otherAnon));
});
