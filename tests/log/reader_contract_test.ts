// One contract, every reader path: the same reads give the same rows whether
// they come from segments, from chunks, or from both (STYLE: one contract
// suite, many implementations).
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { Log, LogEvictedError } from "../../log/mod.ts";
import { rmrf, rng, tempDir, text } from "../harness/util.ts";
import { crashPayload } from "./_crash_payload.ts";

const ROWS = 1500;

type Setup = (dir: string) => Promise<Log>;

async function fill(log: Log, rollEvery: number | null): Promise<void> {
  for (let o = 1; o <= ROWS; o += 30) {
    await log.appendMany(Array.from({ length: 30 }, (_, k) => crashPayload(o + k)));
    if (rollEvery && (o - 1) % rollEvery === 0) await log.roll();
  }
}

const setups: Record<string, Setup> = {
  "segments": async (dir) => {
    const log = await Log.open(dir, {
      segmentBytes: 16 * 1024,
      beaconInterval: 1024,
      timers: false,
    });
    await fill(log, null);
    assert(log.segments().length > 3);
    return log;
  },
  "chunks": async (dir) => {
    const log = await Log.open(dir, { chunks: { fanIn: 3 }, timers: false });
    await fill(log, 90);
    await log.roll();
    await log.chunks.settled();
    assertEquals(log.segments().length, 1);
    assertEquals(log.segments()[0].count, 0, "every row is in a chunk");
    return log;
  },
  "chunks and segments": async (dir) => {
    const log = await Log.open(dir, {
      chunks: { fanIn: 100 },
      segmentBytes: 32 * 1024,
      timers: false,
    });
    await fill(log, null);
    await log.chunks.settled();
    assert(log.chunks.manifest!.chunks.length > 0 && log.segments()[0].count > 0);
    return log;
  },
};

async function readFrom(log: Log, from: number, maxBytes: number): Promise<[number, string][]> {
  const r = log.reader(from);
  const out: [number, string][] = [];
  try {
    while (true) {
      const b = await r.read(maxBytes);
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

for (const [name, setup] of Object.entries(setups)) {
  Deno.test(`reader contract (${name}): every start offset yields the rest, byte for byte`, async () => {
    const dir = await tempDir();
    const log = await setup(dir);
    try {
      assertEquals(log.endOffset, ROWS + 1);
      assertEquals(log.earliest, 1);
      assertEquals(log.rowsBetween(1, ROWS + 1), ROWS);
      const rand = rng(11);
      const starts = [
        1,
        2,
        ROWS,
        ROWS + 1,
        ...Array.from({ length: 25 }, () => 1 + Math.floor(rand() * ROWS)),
      ];
      for (const from of starts) {
        const rows = await readFrom(log, from, 1 + Math.floor(rand() * 20_000));
        assertEquals(rows.length, ROWS + 1 - from, `from ${from}`);
        for (let i = 0; i < rows.length; i++) {
          assertEquals(rows[i][0], from + i);
          assertEquals(rows[i][1], text(crashPayload(from + i)));
        }
      }
    } finally {
      await log.close();
      await rmrf(dir);
    }
  });

  Deno.test(`reader contract (${name}): a reader follows new commits`, async () => {
    const dir = await tempDir();
    const log = await setup(dir);
    try {
      const r = log.reader(ROWS);
      assertEquals(Array.from((await r.read()).offsets), [ROWS]);
      assertEquals((await r.read()).count, 0);
      const w = r.wait();
      await log.append(crashPayload(ROWS + 1));
      await w;
      assertEquals(Array.from((await r.read()).offsets), [ROWS + 1]);
      r.close();
    } finally {
      await log.close();
      await rmrf(dir);
    }
  });
}

Deno.test("reader contract: below the earliest offset throws LogEvictedError on every path", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { chunks: { fanIn: 100, retainBytes: 1 }, timers: false });
    await fill(log, 300);
    await log.roll();
    await log.chunks.settled(true);
    const err = await assertRejects(() => readFrom(log, 1, 4096), LogEvictedError);
    assertEquals(err.offset, 1);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});
