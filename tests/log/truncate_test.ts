// Cutting a closed log's tail (log/replica/truncate.ts) on real files: every cut
// point of a log of three segments (two sealed), a cut interrupted between
// its steps, the refusals, the producer state after a cut, and a deposed
// leader and a lagging follower converging on the leader's rows through the
// term histories (log/replica/term_history.ts).
import { join } from "node:path";
import { assertEquals, assertRejects } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { Log, LogLockedError, type PublishResult, verifyLog } from "../../log/mod.ts";
import { truncateLog } from "../../log/replica/truncate.ts";
import { TermHistory, truncationPoint } from "../../log/replica/term_history.ts";

const dec = new TextDecoder();
const row = (tag: string, i: number) => `{"i":${i},"from":"${tag}"}`;

/** [offset, payload] of every row from `from`. */
async function rowsOf(log: Log, from = 1): Promise<[number, string][]> {
  const out: [number, string][] = [];
  const r = log.reader(from);
  try {
    while (true) {
      const b = await r.read(1 << 20);
      if (b.count === 0) break;
      for (let k = 0; k < b.count; k++) {
        out.push([
          b.offsets[k],
          dec.decode(b.buf.subarray(b.starts[k], b.starts[k] + b.lengths[k])),
        ]);
      }
    }
  } finally {
    r.close();
  }
  return out;
}

async function stored(r: PublishResult): Promise<void> {
  if (r.status !== "stored") throw new Error(`expected stored, got ${r.status}`);
  await r.done;
}

// Rows 1..10 in commits of two; segments 1..4 and 5..8 sealed, 9..10 active.
async function threeSegments(dir: string): Promise<[number, string][]> {
  const log = await Log.open(dir, { timers: false });
  for (let i = 1; i <= 10; i += 2) {
    await log.appendMany([row("a", i), row("a", i + 1)]);
    if (i + 1 === 4 || i + 1 === 8) await log.roll();
  }
  assertEquals(log.segments().map((s) => [s.firstOffset, s.count, s.sealed]), [
    [1, 4, true],
    [5, 4, true],
    [9, 2, false],
  ]);
  const rows = await rowsOf(log);
  await log.close();
  return rows;
}

Deno.test("truncateLog: at every offset of three segments, the rows before it stay byte for byte and appends go on from it", async () => {
  for (let at = 1; at <= 11; at++) {
    const dir = await tempDir();
    try {
      const before = await threeSegments(dir);
      const t = await truncateLog(dir, at);
      assertEquals(t, { end: at, rows: 11 - at }, `cut at ${at}`);
      assertEquals((await verifyLog(dir)).error, null, `verify after the cut at ${at}`);
      const log = await Log.open(dir, { timers: false });
      assertEquals(log.endOffset, at);
      assertEquals(await rowsOf(log), before.slice(0, at - 1), `rows kept by the cut at ${at}`);
      assertEquals(await log.appendMany([row("b", at), row("b", at + 1)]), at);
      assertEquals((await rowsOf(log, at)).map(([o]) => o), [at, at + 1]);
      await log.close();
      assertEquals(
        (await verifyLog(dir)).error,
        null,
        `verify after appending past the cut at ${at}`,
      );
    } finally {
      await rmrf(dir);
    }
  }
});

Deno.test("truncateLog interrupted after removing the newest segment: the log opens, and cutting again finishes", async () => {
  const dir = await tempDir();
  try {
    const before = await threeSegments(dir);
    // What the first step leaves if the process dies right after it.
    await Deno.remove(join(dir, "00000000000000000009.seg"));
    const mid = await Log.open(dir, { timers: false });
    assertEquals(mid.endOffset, 9);
    await mid.close();
    assertEquals(await truncateLog(dir, 6), { end: 6, rows: 3 });
    const log = await Log.open(dir, { timers: false });
    assertEquals(await rowsOf(log), before.slice(0, 5));
    await log.close();
    // Cutting again at the same offset (a retry) changes nothing.
    assertEquals(await truncateLog(dir, 6), { end: 6, rows: 0 });
  } finally {
    await rmrf(dir);
  }
});

Deno.test("truncateLog refuses an open log, a cut inside a producer commit, and a cut into a chunk", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(join(dir, "p"), { timers: false });
    await stored(log.publish([row("a", 1), row("a", 2)], { producer: "p1", seq: 1 }));
    await stored(log.publish([row("a", 3), row("a", 4), row("a", 5)], { producer: "p1", seq: 2 }));
    await assertRejects(() => truncateLog(join(dir, "p"), 3), LogLockedError);
    await log.close();
    await assertRejects(
      () => truncateLog(join(dir, "p"), 4),
      RangeError,
      'producer "p1" seq 2 holds rows 3..5 (a commit is cut whole)',
    );
    // At the commit's start: its producer state goes back to seq 1.
    assertEquals(await truncateLog(join(dir, "p"), 3), { end: 3, rows: 3 });
    const again = await Log.open(join(dir, "p"), { timers: false });
    assertEquals(again.producers.state("p1"), { seq: 1, first: 1, last: 2 });
    // seq 2 was cut: a resend is stored anew, not answered as a duplicate.
    await stored(again.publish([row("b", 3)], { producer: "p1", seq: 2 }));
    await again.close();

    const chunked = await Log.open(join(dir, "c"), { chunks: true, timers: false });
    await chunked.appendMany([row("a", 1), row("a", 2)]);
    await chunked.roll();
    await chunked.chunks.settled();
    await chunked.appendMany([row("a", 3)]);
    const sha = chunked.chunks.manifest!.chunks[0].sha256;
    await chunked.close();
    await assertRejects(
      () => truncateLog(join(dir, "c"), 2),
      RangeError,
      `chunk ${sha} holds rows 1..2 (chunks are never cut)`,
    );
    assertEquals(await truncateLog(join(dir, "c"), 3), { end: 3, rows: 1 });
    await assertRejects(() => truncateLog(join(dir, "none"), 1), Deno.errors.NotFound);
  } finally {
    await rmrf(dir);
  }
});

// Copies the leader's rows from `from` into `log` with the leader's terms.
async function follow(log: Log, terms: TermHistory, leader: Log, leaderTerms: TermHistory) {
  for (const t of leaderTerms.entries) {
    if (t.start >= log.endOffset && t.term > (terms.latest?.term ?? 0)) {
      await terms.begin(t.term, t.start);
    }
  }
  const rows = await rowsOf(leader, log.endOffset);
  await log.appendAt(rows.map(([o]) => o), rows.map(([, p]) => p));
}

Deno.test("a deposed leader cuts its uncommitted tail by the term histories and converges on the new leader's rows", async () => {
  const dir = await tempDir();
  try {
    const a = await Log.open(join(dir, "a"), { timers: false });
    const b = await Log.open(join(dir, "b"), { timers: false, replica: true });
    const c = await Log.open(join(dir, "c"), { timers: false, replica: true });
    const ta = await TermHistory.open(a.dir);
    const tb = await TermHistory.open(b.dir);
    const tc = await TermHistory.open(c.dir);
    // Term 1: a leads; rows 1..5 committed on a and b; c holds 1..3.
    await ta.begin(1, 1);
    await a.appendMany([1, 2, 3, 4, 5].map((i) => row("a", i)));
    await follow(b, tb, a, ta);
    await tc.begin(1, 1);
    await c.appendAt([1, 2, 3], [1, 2, 3].map((i) => row("a", i)));
    // a writes 6..8 that nobody else gets (never committed), then is deposed.
    await a.appendMany([6, 7, 8].map((i) => row("a", i)));
    // Term 2: b leads from 6.
    await tb.begin(2, b.endOffset);
    await b.appendMany([6, 7, 8, 9].map((i) => row("b", i)));

    // a rejoins: where did its last term end in b's log?
    const aEnd = a.endOffset;
    await a.close();
    const cut = truncationPoint(ta.entries, aEnd, tb.entries, b.endOffset);
    assertEquals(cut, 6);
    assertEquals(await truncateLog(a.dir, cut), { end: 6, rows: 3 });
    const a2 = await Log.open(a.dir, { timers: false, replica: true });
    const ta2 = await TermHistory.open(a.dir);
    await follow(a2, ta2, b, tb);
    // c lags: nothing to cut, it copies the rest.
    assertEquals(truncationPoint(tc.entries, c.endOffset, tb.entries, b.endOffset), 4);
    await follow(c, tc, b, tb);

    const want = await rowsOf(b);
    assertEquals(want.map(([, p]) => JSON.parse(p).from).join(""), "aaaaabbbb");
    assertEquals(await rowsOf(a2), want);
    assertEquals(await rowsOf(c), want);
    assertEquals(ta2.entries, tb.entries);
    assertEquals(tc.entries, tb.entries);
    assertEquals((await TermHistory.open(a.dir)).entries, [{ term: 1, start: 1 }, {
      term: 2,
      start: 6,
    }]);
    await a2.close();
    await b.close();
    await c.close();
    for (const d of [a.dir, b.dir, c.dir]) assertEquals((await verifyLog(d)).error, null, d);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("a log whose last term the leader never had is cut where an earlier term parts, not where that term ended", async () => {
  const dir = await tempDir();
  try {
    const a = await Log.open(join(dir, "a"), { timers: false });
    const b = await Log.open(join(dir, "b"), { timers: false, replica: true });
    const c = await Log.open(join(dir, "c"), { timers: false, replica: true });
    const ta = await TermHistory.open(a.dir);
    const tb = await TermHistory.open(b.dir);
    const tc = await TermHistory.open(c.dir);
    // Term 1: a leads; rows 1..5 on every node, row 6 reaches c only.
    await ta.begin(1, 1);
    await a.appendMany([1, 2, 3, 4, 5].map((i) => row("a", i)));
    await follow(b, tb, a, ta);
    await follow(c, tc, a, ta);
    await a.appendMany([row("a", 6)]);
    await follow(c, tc, a, ta);
    await a.close();
    // Term 2: b leads from 6 and writes 6..7, which nobody else gets.
    await tb.begin(2, 6);
    await b.appendMany([row("b", 6), row("b", 7)]);
    // Term 3: c leads from 7 and writes 7, which nobody else gets.
    await tc.begin(3, 7);
    await c.appendMany([row("c", 7)]);
    // Term 4: b leads again and writes 8..9.
    await tb.begin(4, 8);
    await b.appendMany([row("b", 8), row("b", 9)]);

    // c rejoins b. Its last term (3) ends, in b's history, where term 2 ends
    // (8); term 2, in c's, where term 1 does (7): one round of that answer
    // would keep c's row 6 of term 1, which b wrote in term 2. The rows part at 6.
    const cEnd = c.endOffset;
    await c.close();
    const cut = truncationPoint(tc.entries, cEnd, tb.entries, b.endOffset);
    assertEquals(cut, 6);
    assertEquals(await truncateLog(c.dir, cut), { end: 6, rows: 2 });
    const c2 = await Log.open(c.dir, { timers: false, replica: true });
    const tc2 = await TermHistory.open(c.dir);
    assertEquals(tc2.entries, [{ term: 1, start: 1 }]);
    await follow(c2, tc2, b, tb);
    const want = await rowsOf(b);
    assertEquals(want.map(([, p]) => JSON.parse(p).from).join(""), "aaaaabbbb");
    assertEquals(await rowsOf(c2), want);
    assertEquals(tc2.entries, tb.entries);
    await c2.close();
    await b.close();
    for (const d of [a.dir, b.dir, c.dir]) assertEquals((await verifyLog(d)).error, null, d);
  } finally {
    await rmrf(dir);
  }
});
