// Schema evolution (issue 19): a log takes nullable columns added at the end;
// older rows keep their bytes; any other change is refused at start.
import { assert, assertEquals, assertRejects } from "../../harness/assert.ts";
import { join } from "node:path";
import { serve, Stream } from "../../../mod.ts";
import { exportLog } from "../../../arrow/export.ts";
import { readSchemaHistory } from "../../../log/schema_history.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { startS3, stopS3 } from "../../harness/s3.ts";
import { duck } from "../../harness/duckdb.ts";
import { TestSub } from "../../harness/subscriber.ts";

const V1 = {
  type: "object",
  properties: { px: { type: "number" }, book: { type: "object" } },
  required: ["px", "book"],
  additionalProperties: false,
};
const V2 = {
  type: "object",
  properties: {
    px: { type: "number" },
    book: { type: "object" },
    venue: { type: ["string", "null"] },
    levels: {
      type: ["array", "null"],
      items: { type: "array", items: { type: "number" } },
    },
  },
  required: ["px", "book", "venue", "levels"],
  additionalProperties: false,
};

const v1Row = (i: number) => ({ px: i + 0.5, book: { b: i, a: [i] } });
const v2Row = (i: number) => ({ ...v1Row(i), venue: `v${i}`, levels: [[i, 1]] });

Deno.test("evolution: nullable columns added at the end; rows before and after in one replay; /head versions", async () => {
  const root = await tempDir();
  try {
    const a = await Stream.open("t", { schema: V1, root });
    await a.sendMany([1, 2, 3, 4, 5].map(v1Row));
    await a.close();

    const b = await Stream.open("t", { schema: V2, root });
    assertEquals(b.schemaVersions.map((v) => v.from), [1, 6]);
    assertEquals(b.schemaVersions[0].schema, V1);
    assertEquals(b.schemaVersions[1].schema, V2);
    await b.sendMany([6, 7].map(v2Row));
    // An older row is still accepted? No: the stream's schema is the new one.
    await assertRejects(() => b.send(v1Row(8)), Error, "must have required property venue");
    const server = serve([b], { port: 0, onListen: () => {} });
    try {
      const base = `127.0.0.1:${server.addr.port}/t`;
      const sub = await TestSub.open(`ws://${base}?offset=1&frames=batch`);
      assertEquals(sub.greeting!.schema, V2);
      await sub.waitLines(7);
      assertEquals(sub.lines, [
        ...[1, 2, 3, 4, 5].map((i) => `[${i},${JSON.stringify(v1Row(i))}]`),
        ...[6, 7].map((i) => `[${i},${JSON.stringify(v2Row(i))}]`),
      ]);
      await sub.close();
      const head = await (await fetch(`http://${base}/head`)).json();
      assertEquals(head.schema, V2);
      assertEquals(head.schema_versions, [{ from: 1, schema: V1 }, { from: 6, schema: V2 }]);
      const all = await (await fetch(`http://127.0.0.1:${server.addr.port}/_/streams`)).json();
      assertEquals(all[0].schema_versions.length, 2);
    } finally {
      await server.shutdown();
    }

    // The same schema again (annotations aside) adds no version.
    const c = await Stream.open("t", { schema: { ...V2, description: "documented" }, root });
    assertEquals(c.schemaVersions.map((v) => v.from), [1, 6]);
    assertEquals((c.schemaVersions[1].schema as { description: string }).description, "documented");
    await c.close();
    const kept = await readSchemaHistory(join(root, "t"));
    assertEquals(kept!.checked, true);
    assert(kept!.text.includes('"format": 2'), kept!.text);

    // Export across the change: the older rows' new columns are null.
    const out = `${root}/t.parquet`;
    await exportLog(join(root, "t"), V2, { format: "parquet", out });
    const rows = await duck(
      `SELECT "offset", px, book->>'$.b', venue, levels[1][1] FROM read_parquet('${out}') ORDER BY 1`,
    );
    assertEquals(rows, [
      ...[1, 2, 3, 4, 5].map((i) => [BigInt(i), i + 0.5, String(i), null, null]),
      ...[6, 7].map((i) => [BigInt(i), i + 0.5, String(i), `v${i}`, i]),
    ]);
  } finally {
    await rmrf(root);
  }
});

Deno.test("evolution: any other change is refused at start, naming the column and the way out", async () => {
  const root = await tempDir();
  try {
    const s = await Stream.open("t", { schema: V2, root });
    await s.send(v2Row(1));
    await s.close();
    const props = V2.properties;
    const cases: [Record<string, unknown>, string][] = [
      [
        { px: props.px, book: props.book, venue: props.venue },
        'column "levels" (array or null) is removed',
      ],
      [
        { px: { type: "string" }, book: props.book, venue: props.venue, levels: props.levels },
        'column "px" changes type from double to string',
      ],
      [
        { book: props.book, px: props.px, venue: props.venue, levels: props.levels },
        'column "px" moves from position 1 to 2',
      ],
      [
        { ...props, venue: { type: "string" } },
        'column "venue" becomes not nullable',
      ],
      [
        { ...props, levels: { type: ["array", "null"], items: { type: "string" } } },
        'column "levels" changes its sub-schema',
      ],
      [
        { ...props, extra: { type: "integer" } },
        'column "extra" (int64) is added but not nullable',
      ],
    ];
    for (const [properties, detail] of cases) {
      const schema = { type: "object", properties, required: Object.keys(properties) };
      const err = await assertRejects(() => Stream.open("t", { schema, root }), TypeError);
      assert(err.message.includes(detail), `${err.message}\n  wanted: ${detail}`);
      assert(err.message.includes("use a new stream name"), err.message);
      assert(!err.message.includes("\n"), "one line");
    }
    // Nothing was written by a refusal: the log opens with its schema.
    const again = await Stream.open("t", { schema: V2, root });
    assertEquals(again.schemaVersions.map((v) => v.from), [1]);
    await again.close();
  } finally {
    await rmrf(root);
  }
});

Deno.test("evolution: a log written before versions existed opens unchanged", async () => {
  const root = await tempDir();
  try {
    // The format before schema evolution: schema.json is the bare schema
    // (pretty-printed) with its sidecar, or no sidecar at all (older still).
    const s = await Stream.open("t", { schema: V1, root });
    await s.sendMany([1, 2].map(v1Row));
    await s.close();
    const dir = join(root, "t");
    const text = JSON.stringify(V1, null, 2) + "\n";
    assertEquals(await Deno.readTextFile(join(dir, "schema.json")), text, "form 1 is the old file");
    const side = await Deno.readTextFile(join(dir, "schema.json.crc32"));
    const reopened = await Stream.open("t", { schema: V1, root });
    assertEquals(reopened.schemaVersions, [{ from: 1, schema: V1 }]);
    await reopened.close();
    assertEquals(await Deno.readTextFile(join(dir, "schema.json")), text, "not rewritten");
    assertEquals(await Deno.readTextFile(join(dir, "schema.json.crc32")), side);
    // Growing it turns the file into form 2, which keeps both.
    const grown = await Stream.open("t", { schema: V2, root });
    assertEquals(grown.schemaVersions.map((v) => v.from), [1, 3]);
    await grown.close();
    const history = JSON.parse(await Deno.readTextFile(join(dir, "schema.json")));
    assertEquals(history, {
      format: 2,
      versions: [{ from: 1, schema: V1 }, { from: 3, schema: V2 }],
    });
  } finally {
    await rmrf(root);
  }
});

Deno.test("evolution through restore: the archived rows keep their bytes under the grown schema", async () => {
  const s3 = await startS3();
  const rootA = await tempDir();
  const rootB = await tempDir();
  const archive = { uri: "s3://archive/evolve", endpoint: s3.endpoint, forcePathStyle: true };
  try {
    const a = await Stream.open("t", {
      schema: V1,
      root: rootA,
      archive,
      logOptions: { timers: false },
    });
    await a.sendMany([1, 2, 3].map(v1Row));
    await a.log!.roll();
    assert(await a.log!.archive.settled(30_000), "archived");
    await a.close();
    const { stream: b, report } = await Stream.restore("t", {
      schema: V2,
      root: rootB,
      archive,
      hydrate: true,
      maxReplay: null,
      logOptions: { timers: false },
    });
    const next = report.nextOffset;
    assertEquals(await b.send(v2Row(4)), next);
    assertEquals(b.schemaVersions.map((v) => v.schema), [V2]);
    const server = serve([b], { port: 0, onListen: () => {} });
    try {
      const sub = await TestSub.open(`ws://127.0.0.1:${server.addr.port}/t?offset=1&frames=batch`);
      await sub.waitLines(4);
      assertEquals(sub.lines, [
        ...[1, 2, 3].map((i) => `[${i},${JSON.stringify(v1Row(i))}]`),
        `[${next},${JSON.stringify(v2Row(4))}]`,
      ]);
      await sub.close();
    } finally {
      await server.shutdown();
    }
    // A later restart grows it again, from where the restored log ends.
    const c = await Stream.open("t", {
      schema: {
        ...V2,
        properties: { ...V2.properties, note: { type: ["string", "null"] } },
        required: [...V2.required, "note"],
      },
      root: rootB,
    });
    assertEquals(c.schemaVersions.map((v) => v.from), [1, next + 1]);
    await c.close();
  } finally {
    await stopS3(s3);
    await rmrf(rootA);
    await rmrf(rootB);
  }
});

Deno.test("evolution: a log written by the code before this change (fixture) opens unchanged, then grows", async () => {
  const root = await tempDir();
  try {
    // tests/fixtures/log_v1: written by the main branch before schema versions existed.
    const fixture = new URL("../../fixtures/log_v1/old/", import.meta.url).pathname;
    const dir = join(root, "old");
    await Deno.mkdir(dir);
    for await (const e of Deno.readDir(fixture)) {
      await Deno.copyFile(join(fixture, e.name), join(dir, e.name));
    }
    const schemaText = await Deno.readTextFile(join(dir, "schema.json"));
    const side = await Deno.readTextFile(join(dir, "schema.json.crc32"));
    const schema = JSON.parse(schemaText);
    const s = await Stream.open("old", { schema, root });
    assertEquals(s.endOffset, 4);
    assertEquals(s.schemaVersions, [{ from: 1, schema }]);
    const server = serve([s], { port: 0, onListen: () => {} });
    try {
      const sub = await TestSub.open(
        `ws://127.0.0.1:${server.addr.port}/old?offset=1&frames=batch`,
      );
      await sub.waitLines(3);
      assertEquals(sub.lines, [
        '[1,{"px":1.5,"sym":"a"}]',
        '[2,{"px":2,"sym":null}]',
        '[3,{"px":-3.25,"sym":"é"}]',
      ]);
      await sub.close();
    } finally {
      await server.shutdown();
    }
    assertEquals(await Deno.readTextFile(join(dir, "schema.json")), schemaText, "unchanged");
    assertEquals(await Deno.readTextFile(join(dir, "schema.json.crc32")), side, "unchanged");
    // Grown: the old rows export with the new column null.
    const grown = {
      ...schema,
      properties: {
        ...schema.properties,
        depth: { type: ["array", "null"], items: { type: "number" } },
      },
      required: [...schema.required, "depth"],
    };
    const g = await Stream.open("old", { schema: grown, root });
    assertEquals(g.schemaVersions.map((v) => v.from), [1, 4]);
    assertEquals(await g.send({ px: 4, sym: "b", depth: [1, 2] }), 4);
    await g.close();
    const out = `${root}/old.parquet`;
    await exportLog(dir, grown, { format: "parquet", out });
    assertEquals(
      await duck(`SELECT px, sym, depth[2] FROM read_parquet('${out}') ORDER BY "offset"`),
      [
        [1.5, "a", null],
        [2, null, null],
        [-3.25, "é", null],
        [4, "b", 2],
      ],
    );
  } finally {
    await rmrf(root);
  }
});
