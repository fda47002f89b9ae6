// A keyed stream end to end, through real `cli.ts serve` processes: a
// snapshot then live while publishers write during the subscribe, checked
// against a reference model (each key's latest row below the snapshot's end,
// then every row from it: no gap, no duplicate); filtered snapshots;
// GET /t/latest; a restart; the checks at start and the key limit.
import { assert, assertEquals } from "../../harness/assert.ts";
import { endOffset, readAll, startPublishServer } from "../../harness/publish_child.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { FRESH_SEED, seedBanner } from "../../harness/seeds.ts";
import { rng, tempDir, until } from "../../harness/util.ts";
import { runServe } from "../../harness/serve.ts";

const SEED = FRESH_SEED;
console.log(seedBanner("key snapshot"));

/** A row of the publish server's stream t (tests/harness/publish_in_process.ts SCHEMA). */
type Row = { sym: string; px: number };

/** The reference: each key's latest line below `end` (offset order), then every line from `end`. */
function expected(
  log: { offset: number; line: string }[],
  end: number,
  match: (row: Row) => boolean = () => true,
): string[] {
  const latest = new Map<string, { offset: number; line: string }>();
  for (const e of log) {
    if (e.offset >= end) break;
    const sym = (JSON.parse(e.line)[1] as Row).sym;
    latest.delete(sym);
    latest.set(sym, e);
  }
  const snap = [...latest.values()].filter((e) => match(JSON.parse(e.line)[1]));
  const after = log.filter((e) => e.offset >= end && match(JSON.parse(e.line)[1]));
  return [...snap, ...after].map((e) => e.line);
}

async function post(http: string, rows: Row[]): Promise<void> {
  const res = await fetch(`${http}/t`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(rows),
  });
  assertEquals(res.status, 200, await res.text());
}

Deno.test("key snapshot then live, with publishers writing during the subscribes, matches the model", async () => {
  const s = await startPublishServer(["--key", "t=sym", "--seal-every", "1"]);
  try {
    const rand = rng(SEED);
    const keys = 1 + Math.floor(rand() * 60);
    const row = (): Row => ({
      sym: `k${Math.floor(rand() * keys)}`,
      px: Math.floor(rand() * 100),
    });
    // Some rows before anyone subscribes.
    const before = Math.floor(rand() * 300);
    for (let i = 0; i < before; i += 50) {
      await post(s.http, Array.from({ length: Math.min(50, before - i) }, row));
    }
    // Publishers write until every subscriber has started (and a little
    // after), so that each snapshot is taken among their posts.
    let subscribed = false;
    const modes = ["frames=single", "frames=batch"];
    const filters = [null, { px: { gte: 50 } }];
    const subs: { sub: TestSub; match: (r: Row) => boolean }[] = [];
    const publishing = Promise.all([0, 1, 2].map(async () => {
      let after = 3;
      while (!subscribed || after-- > 0) {
        await post(s.http, Array.from({ length: 1 + Math.floor(rand() * 40) }, row));
      }
    }));
    for (let i = 0; i < 6; i++) {
      await new Promise((r) => setTimeout(r, Math.floor(rand() * 20)));
      const mode = modes[Math.floor(rand() * 2)];
      const where = filters[i % 2];
      const q = `snapshot=1&${mode}` +
        (where ? `&where=${encodeURIComponent(JSON.stringify(where))}` : "");
      subs.push({
        sub: await TestSub.open(`${s.ws}/t?${q}`),
        match: where ? (r) => r.px >= 50 : () => true,
      });
    }
    subscribed = true;
    await publishing;
    const end = await endOffset(s.http);
    const log = await readAll(s.ws, end - 1);
    const ends = subs.map(({ sub }) => (sub.greeting!.snapshot as { end: number }).end);
    console.log(`seed ${SEED}: snapshots at ${ends.join(", ")} of ${end}`);
    for (const { sub, match } of subs) {
      const snap = sub.greeting!.snapshot as { end: number; keys: number };
      assert(snap !== undefined, JSON.stringify(sub.greeting));
      const want = expected(log, snap.end, match);
      await until(
        () => sub.lines.length >= want.length || sub.closed !== null,
        20_000,
        `${want.length} lines`,
      );
      assertEquals(sub.lines, want, `seed ${SEED}, end ${snap.end}`);
      assertEquals(
        snap.keys,
        expected(log, snap.end, match).filter((l) => JSON.parse(l)[0] < snap.end).length,
      );
      await sub.close();
    }
  } finally {
    await s.stop();
  }
});

Deno.test("key GET /t/latest serves the snapshot at the end, one key, where=, and /head", async () => {
  const s = await startPublishServer(["--key", "t=sym"]);
  try {
    await post(s.http, [
      { sym: "a", px: 1 },
      { sym: "b", px: 70 },
      { sym: "a", px: 60 },
      { sym: "c", px: 3 },
    ]);
    let res = await fetch(`${s.http}/t/latest`);
    assertEquals(res.headers.get("streamcast-end"), "5");
    assertEquals(
      await res.text(),
      '[2,{"sym":"b","px":70}]\n[3,{"sym":"a","px":60}]\n[4,{"sym":"c","px":3}]\n',
    );
    res = await fetch(`${s.http}/t/latest?where=${encodeURIComponent('{"px":{"gte":50}}')}`);
    assertEquals(await res.text(), '[2,{"sym":"b","px":70}]\n[3,{"sym":"a","px":60}]\n');
    res = await fetch(`${s.http}/t/latest?key=a`);
    assertEquals(res.status, 200);
    assertEquals(await res.text(), '[3,{"sym":"a","px":60}]\n');
    res = await fetch(`${s.http}/t/latest?key=zz`);
    assertEquals(res.status, 404);
    assertEquals(await res.json(), { error: "no_such_key" });
    res = await fetch(`${s.http}/t/latest?key=a&key=b`);
    assertEquals(res.status, 400);
    await res.body?.cancel();
    res = await fetch(`${s.http}/t/latest?where=${encodeURIComponent('{"nope":1}')}`);
    assertEquals(res.status, 400);
    await res.body?.cancel();
    const head = await (await fetch(`${s.http}/t/head`)).json();
    assertEquals([head.key, head.keys], [["sym"], 3]);
    // offset= or since= with snapshot=1: refused before any frame.
    for (const q of ["snapshot=1&offset=1", "snapshot=1&since=0", "snapshot=2"]) {
      const sub = await TestSub.open(`${s.ws}/t?${q}`);
      assertEquals((await sub.done).code, 4400, q);
    }
  } finally {
    await s.stop();
  }
});

Deno.test("key index after a restart: from the key file and the rows after it, or from the log", async () => {
  const s = await startPublishServer(["--key", "t=sym", "--seal-every", "1"]);
  try {
    const rand = rng(SEED + 1);
    const rows = () =>
      Array.from({ length: 20 }, () => ({
        sym: `k${Math.floor(rand() * 30)}`,
        px: Math.floor(rand() * 100),
      }));
    for (let i = 0; i < 5; i++) await post(s.http, rows());
    // A seal saves the key file.
    const file = `${s.root}/data/t/keys.ndjson`;
    await until(
      async () => await Deno.stat(file).then(() => true, () => false),
      10_000,
      "keys.ndjson",
    );
    for (let i = 0; i < 3; i++) await post(s.http, rows());
    const latest = async () => await (await fetch(`${s.http}/t/latest`)).text();
    const before = await latest();
    await s.restart(); // SIGKILL: the rows after the last saved file are read from the log
    assertEquals(await latest(), before);
    // A damaged key file: rebuilt from the log, with a warning.
    await s.proc.stop();
    const bytes = await Deno.readFile(file);
    bytes[bytes.length >> 1] ^= 0xff;
    await Deno.writeFile(file, bytes);
    await s.restart();
    assertEquals(await latest(), before);
    await s.proc.waitStderr(/key_file_unusable/);
  } finally {
    await s.stop();
  }
});

Deno.test("key columns are checked at start, naming the column", async () => {
  const root = await tempDir();
  try {
    const schema = `${root}/s.json`;
    await Deno.writeTextFile(
      schema,
      JSON.stringify({
        type: "object",
        properties: {
          sym: { type: "string" },
          px: { type: "number" },
          venue: { type: ["string", "null"] },
        },
        required: ["sym", "px", "venue"],
      }),
    );
    const cases: [string[], RegExp][] = [
      [["--key", "t=px"], /key column "px" is double/],
      [["--key", "t=venue"], /key column "venue" is nullable/],
      [["--key", "t=nope"], /key column "nope" is not a column/],
      [["--key", "t=sym", "--ephemeral", "t"], /"t" has a key and is ephemeral/],
      [["--key", "x=sym"], /--key names stream "x", which is not declared/],
    ];
    for (const [flags, message] of cases) {
      const r = await runServe(["--stream", `t=${schema}`, "--root", `${root}/data`, ...flags]);
      assertEquals(r.code, 2, r.stderr);
      assert(message.test(r.stderr), r.stderr);
    }
    // The config file's "key" on the stream is checked the same way.
    const config = `${root}/c.json`;
    await Deno.writeTextFile(
      config,
      JSON.stringify({ root: `${root}/data`, streams: { t: { schema, key: ["venue"] } } }),
    );
    const r = await runServe(["--config", config]);
    assertEquals(r.code, 2, r.stderr);
    assert(/key column "venue" is nullable/.test(r.stderr), r.stderr);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("key past --max-keys: new keys not added, counted, snapshots refused 4503 / 503", async () => {
  const s = await startPublishServer(["--key", "t=sym", "--max-keys", "3"]);
  try {
    await post(s.http, ["a", "b", "c", "d", "e", "a"].map((sym, px) => ({ sym, px })));
    const res = await fetch(`${s.http}/t/latest`);
    assertEquals(res.status, 503);
    assertEquals(await res.json(), { error: "snapshot_unavailable", why: "too_many_keys" });
    const sub = await TestSub.open(`${s.ws}/t?snapshot=1`);
    const closed = await sub.done;
    assertEquals(sub.greeting, null);
    assertEquals([closed.code, JSON.parse(closed.reason)], [4503, {
      error: "snapshot_unavailable",
      why: "too_many_keys",
    }]);
    const metrics = await (await fetch(`${s.http}/_/metrics`)).text();
    assert(metrics.includes('streamcast_keys_refused_total{stream="t"} 2'), metrics);
    assert(metrics.includes('streamcast_keys{stream="t"} 3'), metrics);
    await s.proc.waitStderr(/too_many_keys/);
    // The keys kept are still updated: a's latest row is the last one.
    const one = await fetch(`${s.http}/t/latest?key=a`);
    assertEquals(await one.text(), '[6,{"sym":"a","px":5}]\n');
  } finally {
    await s.stop();
  }
});
