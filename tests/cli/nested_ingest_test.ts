// Nested rows through `serve --stdin` (issue 19): invalid nested rows go to
// rejects.ndjson and ingest goes on; stored rows replay byte-exact; a schema
// change the log cannot take stops `serve` at start with one line.
import { assert, assertEquals } from "../harness/assert.ts";
import { join } from "node:path";
import { freePort, rmrf, rng, tempDir } from "../harness/util.ts";
import { TestSub } from "../harness/subscriber.ts";
import { BOOK, bookLine, stored } from "../harness/book.ts";
import { runServe, startServe } from "../harness/serve.ts";

Deno.test("serve --stdin stores nested rows exactly and records invalid ones in rejects.ndjson", async () => {
  const dir = await tempDir("streamcast-cli-");
  const schema = join(dir, "book.json");
  const root = join(dir, "data");
  await Deno.writeTextFile(schema, JSON.stringify(BOOK));
  const random = rng(Date.now() % 1000);
  const good = Array.from({ length: 6 }, (_, i) => bookLine(i + 1, random));
  const bad = [
    good[0].replace(/"bids":\[\[[^,]*,/, '"bids":[["x",'), // a level price that is not a number
    good[1].replace('"asks":[', '"asks":[{"px":1},'), // a level without qty
    JSON.stringify({ ...JSON.parse(good[2]), tags: { a: 1 } }), // an object where an array goes
    `{"symbol":"deep","bids":[],"asks":[],"meta":${'{"a":'.repeat(70)}1${
      "}".repeat(70)
    },"tags":null}`,
  ];
  const lines = [good[0], bad[0], good[1], bad[1], good[2], bad[2], good[3], bad[3], good[4]];
  try {
    const s = await startServe(
      [
        "--root",
        root,
        "--stream",
        `book=${schema}`,
        "--stdin",
        "book",
        "--port",
        String(freePort()),
      ],
      { stdin: true },
    );
    try {
      await s.write(lines.join("\n") + "\n");
      await s.closeStdin();
      await s.waitStderr(/end of stdin for stream "book" \(5 rows accepted, 4 rejected\)/);
      const rejects = (await Deno.readTextFile(join(root, "book", "rejects.ndjson")))
        .trimEnd().split("\n").map((l) => JSON.parse(l));
      assertEquals(rejects.map((r) => r.line), [2, 4, 6, 8]);
      assertEquals(rejects.map((r) => r.input), bad);
      assert(rejects[0].error.includes("/bids/0/0: must be number"), rejects[0].error);
      assert(
        rejects[1].error.includes("/asks/0: must have required property qty"),
        rejects[1].error,
      );
      assert(rejects[2].error.includes("/tags: must be array or null"), rejects[2].error);
      assert(rejects[3].error.includes("nests deeper than 64 levels"), rejects[3].error);
      const sub = await TestSub.open(`${s.ws}/book?offset=1&frames=batch`);
      await sub.waitLines(5);
      assertEquals(sub.lines, good.slice(0, 5).map((l, i) => `[${i + 1},${stored(l)}]`));
      await sub.close();
      assertEquals((await s.signal("SIGTERM")).code, 0);
    } finally {
      await s.stop();
    }

    // A schema that drops a column: refused at start, one line, the way out named.
    const { properties, required } = BOOK;
    const { tags: _, ...fewer } = properties;
    await Deno.writeTextFile(
      schema,
      JSON.stringify({
        ...BOOK,
        properties: fewer,
        required: required.filter((n) => n !== "tags"),
      }),
    );
    const r = await runServe(["--root", root, "--stream", `book=${schema}`, "--port", "0"]);
    assert(r.code !== 0, `exit ${r.code}`);
    const line = r.stderr.trim().split("\n").find((l) => l.includes("columns differ"));
    assert(line !== undefined, r.stderr);
    assert(line.includes('column "tags" (array or null) is removed'), line);
    assert(line.includes("use a new stream name"), line);
  } finally {
    await rmrf(dir);
  }
});
