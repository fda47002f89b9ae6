// The term history beside a log's segments (log/replica/term_history.ts), on real
// files: kept across opens, terms and starts that only grow, an empty term
// replaced, damage named, and where a term ends as Kafka's leader epochs say.
import { join } from "node:path";
import { assertEquals, assertRejects } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { LogCorruptError } from "../../log/mod.ts";
import {
  termEnd,
  TermHistory,
  TERMS_FILE,
  truncationPoint,
} from "../../log/replica/term_history.ts";

Deno.test("term history: kept across opens; terms and starts only grow; a term with no row is replaced", async () => {
  const dir = await tempDir();
  try {
    const h = await TermHistory.open(dir);
    assertEquals(h.latest, null);
    await h.begin(2, 1);
    await h.begin(2, 1); // recorded again (a retry): nothing changes
    await h.begin(3, 40);
    await assertRejects(() => h.begin(3, 50), RangeError, "term 3 does not follow term 3");
    await assertRejects(() => h.begin(1, 60), RangeError, "terms only grow");
    await assertRejects(() => h.begin(5, 39), RangeError, "before term 3 began (40)");
    await h.begin(4, 40); // term 3 wrote nothing: 4 replaces it
    assertEquals((await TermHistory.open(dir)).entries, [{ term: 2, start: 1 }, {
      term: 4,
      start: 40,
    }]);
    await h.truncateFrom(41);
    assertEquals(h.entries.length, 2, "term 4 still holds row 40");
    await h.truncateFrom(40);
    assertEquals((await TermHistory.open(dir)).entries, [{ term: 2, start: 1 }]);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("term history: a damaged file is named, never read as empty", async () => {
  const dir = await tempDir();
  try {
    const h = await TermHistory.open(dir);
    await h.begin(1, 1);
    await h.begin(2, 10);
    const path = join(dir, TERMS_FILE);
    const text = await Deno.readTextFile(path);
    await Deno.writeTextFile(path, text.replace('"start":10', '"start":19'));
    const err = await assertRejects(
      () => TermHistory.open(dir),
      LogCorruptError,
      "checksum mismatch",
    );
    assertEquals(err.path, path);
    await Deno.writeTextFile(path, '{"terms":[{"term":2,"start":5},{"term":1,"start":9}]}\n');
    await assertRejects(() => TermHistory.open(dir), LogCorruptError, "terms must grow");
  } finally {
    await rmrf(dir);
  }
});

Deno.test("term history: where a term ends, and where a rejoining log is cut, for every term asked", () => {
  const leader = [{ term: 1, start: 1 }, { term: 3, start: 11 }, { term: 6, start: 31 }];
  const end = 50;
  const want: Record<number, { term: number; end: number }> = {
    0: { term: 0, end: 1 },
    1: { term: 1, end: 11 },
    2: { term: 1, end: 11 },
    3: { term: 3, end: 31 },
    4: { term: 3, end: 31 },
    5: { term: 3, end: 31 },
    6: { term: 6, end: 50 },
    7: { term: 6, end: 50 },
  };
  for (let t = 0; t <= 7; t++) assertEquals(termEnd(leader, t, end), want[t], `term ${t}`);
  // A deposed leader of term 5 (never seen by the leader) wrote 25..40.
  const mine = [{ term: 1, start: 1 }, { term: 3, start: 11 }, { term: 5, start: 25 }];
  assertEquals(truncationPoint(mine, 41, leader, end), 25);
  // Asked again after that cut: nothing more goes.
  assertEquals(truncationPoint(mine.slice(0, 2), 25, leader, end), 25);
  // A log from before any term (term 0) against a leader whose first term began at 1.
  assertEquals(truncationPoint([], 20, leader, end), 1);
  assertEquals(truncationPoint([], 20, [{ term: 1, start: 20 }], 30), 20);
  // Term 1 ran on here past where the leader began term 3 (11..18), then a
  // term 4 the leader never had: the logs part at 11.
  assertEquals(
    truncationPoint([{ term: 1, start: 1 }, { term: 4, start: 19 }], 22, leader, end),
    11,
  );
  // The same logs, the leader shorter than this one: cut at the leader's end.
  assertEquals(truncationPoint(leader, 60, leader, end), 50);
  assertEquals(truncationPoint(leader, 40, leader, end), 40);
  // A log that copied from 35 on (a gap past rows the leader no longer held),
  // its first term recorded at 35, knowing 1..39 committed: nothing goes; the
  // rows after 40 part only where the terms do.
  assertEquals(truncationPoint([{ term: 6, start: 35 }], 45, leader, end, 40), 45);
  assertEquals(
    truncationPoint([{ term: 6, start: 35 }, { term: 8, start: 42 }], 45, leader, end, 40),
    42,
  );
  // Without what it knows committed, the gap's missing terms would cut it all.
  assertEquals(truncationPoint([{ term: 6, start: 35 }], 45, leader, end), 1);
});
