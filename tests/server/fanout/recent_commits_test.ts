// A subscriber that starts a few rows behind the end is sent them from the
// stream's recent commits (server/fanout/recent_commits.ts) and goes live;
// any other start catches up from the log. Either way it gets every row from
// its start, once, in order: checked here with real sockets on a real server
// while rows keep coming, at starts picked at random (a fresh seed each run,
// printed) — at commit boundaries inside and outside what is held, inside
// commits, at the end — in single and batched frames, and after every
// subscriber was away while rows were published.
import { assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { rmrf, rng, tempDir, until } from "../../harness/util.ts";
import { fuzzCases, seedBanner } from "../../harness/seeds.ts";
import { RECENT_CHARS, RECENT_ROWS, RecentCommits } from "../../../server/fanout/recent_commits.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" } },
  required: ["i"],
};

const frame = (o: number) => `[${o},{"i":${o}}]`;
const commit = (first: number, n: number) => Array.from({ length: n }, (_, k) => frame(first + k));

Deno.test("recent commits hold the last commits within their bounds, contiguous", () => {
  const r = new RecentCommits();
  r.add(1, commit(1, 3));
  r.add(4, commit(4, 2));
  assertEquals(r.from(1, 6), commit(1, 5));
  assertEquals(r.from(4, 6), commit(4, 2));
  assertEquals(r.from(2, 6), null); // inside a commit
  assertEquals(r.from(6, 6), null); // nothing behind
  assertEquals(r.from(4, 7), null); // the log's end is past what is held
  // A commit that does not follow (a cut tail) replaces them all.
  r.add(3, commit(3, 2));
  assertEquals(r.from(1, 5), null);
  assertEquals(r.from(3, 5), commit(3, 2));
  // The oldest go first past RECENT_ROWS rows.
  let next = 5;
  for (let k = 0; k < RECENT_ROWS / 8 + 1; k++, next += 8) r.add(next, commit(next, 8));
  assertEquals(r.from(3, next), null);
  assertEquals(r.from(next - RECENT_ROWS, next)?.length, RECENT_ROWS);
  // A commit over RECENT_CHARS is not held, and nothing before it either.
  const big = Array.from({ length: 2 }, () => "x".repeat(RECENT_CHARS / 2 + 1));
  r.add(next, big);
  assertEquals(r.from(next, next + 2), null);
  assertEquals(r.from(next - 8, next), null);
  r.add(next + 2, commit(next + 2, 1));
  assertEquals(r.from(next + 2, next + 3), [frame(next + 2)]);
  r.clear();
  assertEquals(r.from(next + 2, next + 3), null);
});

console.log(seedBanner("recent_commits"));

for (const c of fuzzCases(4, "recent_commits")) {
  Deno.test(`subscribers starting behind get every row once, in order (seed ${c.seed} case ${c.index})`, async () => {
    const rand = rng(c.seed * 1000 + c.index);
    const root = await tempDir();
    const stream = await Stream.open("t", {
      schema: SCHEMA,
      root,
      maxReplay: null,
      logOptions: { fsync: false },
    });
    const server = serve([stream], { port: 0, onListen: () => {} });
    const base = `ws://127.0.0.1:${server.addr.port}/t`;
    let i = 0; // rows published; offsets start at 1
    const boundaries: number[] = [1];
    const publish = async (n: number) => {
      await stream.sendMany(Array.from({ length: n }, () => ({ i: ++i })));
      boundaries.push(i + 1);
    };
    const subs: { sub: TestSub; from: number }[] = [];
    // A start: a commit boundary (recent or old), inside a commit, or the end.
    const pickStart = () => {
      const end = i + 1;
      const x = rand();
      if (x < 0.5) return boundaries[boundaries.length - 1 - Math.floor(rand() * 8)] ?? end;
      if (x < 0.7) return boundaries[Math.floor(rand() * boundaries.length)];
      if (x < 0.9) return 1 + Math.floor(rand() * end);
      return end;
    };
    const open = async (from: number) => {
      const frames = rand() < 0.5 ? "batch" : "single";
      const sub = await TestSub.open(`${base}?offset=${from}&frames=${frames}`);
      subs.push({ sub, from });
    };
    // Every subscriber has every row from its start to the end, once, in order.
    const check = async () => {
      await publish(5);
      const end = i + 1;
      for (const { sub, from } of subs) {
        // Waited for, then compared: a missing or extra row shows in the difference.
        await until(() => sub.lines.length >= end - from || sub.closed !== null, 10_000).catch(
          () => {},
        );
        assertEquals(sub.closed, null);
        assertEquals(
          sub.lines,
          Array.from({ length: end - from }, (_, k) => frame(from + k)),
          `the rows of a subscriber from ${from}`,
        );
      }
    };
    try {
      for (let k = 0; k < 20; k++) await publish(1 + Math.floor(rand() * 40));
      const live = await TestSub.open(`${base}?frames=batch`);
      subs.push({ sub: live, from: i + 1 });
      for (let round = 0; round < 30; round++) {
        const opening = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => open(pickStart()));
        // Rows keep coming while they start.
        await Promise.all([...opening, publish(1 + Math.floor(rand() * 30))]);
      }
      await check();
      // Every subscriber away while rows are published, then back at its cursor.
      const cursors = subs.map((s) => s.from + s.sub.lines.length);
      for (const s of subs) await s.sub.close();
      subs.length = 0;
      for (let k = 0; k < 3; k++) await publish(1 + Math.floor(rand() * 5));
      for (const from of cursors) await open(from);
      await check();
    } finally {
      for (const { sub } of subs) await sub.close();
      await server.shutdown();
      await stream.close();
      await rmrf(root);
    }
  });
}
