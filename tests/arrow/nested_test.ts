// Nested columns in Arrow and Parquet (issue 19): closed typed sub-schemas are
// Struct/List, open ones JSON text; DuckDB queries the Parquet file.
import { tableFromIPC } from "apache-arrow";
import "../../arrow/zstd.ts"; // registers the zstd codec that reading the Arrow file needs
import { assert, assertEquals } from "../harness/assert.ts";
import { Stream } from "../../mod.ts";
import { exportLog } from "../../arrow/export.ts";
import { batchRows } from "../../arrow/subscription.ts";
import { rmrf, rng, tempDir } from "../harness/util.ts";
import { duck, duckTypes } from "../harness/duckdb.ts";
import { BOOK, bookLine, stored } from "../harness/book.ts";

const ROWS = 60;

async function bookLog(root: string): Promise<string[]> {
  const random = rng(7);
  const lines = Array.from({ length: ROWS }, (_, i) => bookLine(i + 1, random));
  const stream = await Stream.open("book", { schema: BOOK, root });
  await stream.sendMany(lines.map((l) => JSON.parse(l)));
  await stream.close();
  return lines.map(stored);
}

Deno.test("export parquet of nested columns: DuckDB reads structs, lists, JSON text and nulls", async () => {
  const root = await tempDir();
  try {
    const rows = (await bookLog(root)).map((t) => JSON.parse(t));
    const out = `${root}/book.parquet`;
    const report = await exportLog(`${root}/book`, BOOK, { format: "parquet", out, batchRows: 16 });
    assertEquals(report.rows, ROWS);
    assertEquals(await duckTypes(out), {
      offset: "BIGINT",
      symbol: "VARCHAR",
      bids: "DOUBLE[][]",
      asks: "STRUCT(px DOUBLE, qty DOUBLE)[]",
      meta: "JSON",
      tags: "VARCHAR[]",
    });
    const got = await duck(
      `SELECT "offset", bids[1][1], bids[1][2], len(bids)::INTEGER, asks[1].px, asks[2].qty,
              meta->>'$.z', json_extract(meta, '$.a."1"[2]')::VARCHAR, meta IS NULL,
              tags[2], tags IS NULL
       FROM read_parquet('${out}') ORDER BY "offset"`,
    );
    assertEquals(got.length, ROWS);
    got.forEach((r, i) => {
      const row = rows[i];
      assertEquals(r[0], BigInt(i + 1));
      assertEquals([r[1], r[2], r[3]], [row.bids[0][0], row.bids[0][1], row.bids.length]);
      assertEquals(r[4], row.asks[0]?.px ?? null);
      assertEquals(r[5], row.asks[1]?.qty ?? null);
      assertEquals(r[6], row.meta === null ? null : String(row.meta.z));
      assertEquals(r[7], row.meta === null ? null : "100");
      assertEquals(r[8], row.meta === null);
      assertEquals(r[9], row.tags === null ? null : "😀");
      assertEquals(r[10], row.tags === null);
    });
    // The JSON text is the stored value, byte for byte.
    const texts = await duck(`SELECT meta::VARCHAR FROM read_parquet('${out}') ORDER BY "offset"`);
    texts.forEach(([t], i) => {
      assertEquals(t, rows[i].meta === null ? null : JSON.stringify(rows[i].meta));
    });
  } finally {
    await rmrf(root);
  }
});

Deno.test("export arrow of nested columns: Struct and List types, arrow.json text, rows back as published", async () => {
  const root = await tempDir();
  try {
    const texts = await bookLog(root);
    const out = `${root}/book.arrow`;
    await exportLog(`${root}/book`, BOOK, { format: "arrow", out, batchRows: 25 });
    const table = tableFromIPC(Deno.readFileSync(out));
    const types = Object.fromEntries(table.schema.fields.map((f) => [f.name, String(f.type)]));
    assertEquals(types.bids, "List<List<Float64>>");
    assertEquals(types.asks, "List<Struct<{px:Float64, qty:Float64}>>");
    assertEquals(types.meta, "Utf8");
    const meta = table.schema.fields.find((f) => f.name === "meta")!;
    assertEquals(meta.metadata.get("ARROW:extension:name"), "arrow.json");
    assertEquals(table.numRows, ROWS);
    // Struct field access and list indexing through apache-arrow.
    const asks = table.getChild("asks")!;
    const bids = table.getChild("bids")!;
    const parsed = texts.map((t) => JSON.parse(t));
    for (let i = 0; i < ROWS; i++) {
      assertEquals(bids.get(i)!.get(0)!.get(1), parsed[i].bids[0][1]);
      if (parsed[i].asks.length > 0) assertEquals(asks.get(i)!.get(0)!.px, parsed[i].asks[0].px);
    }
    // Every row back as published (a struct's keys in schema order).
    let k = 0;
    for (const batch of table.batches) {
      for (const [offset, row] of batchRows(batch)) {
        const want = parsed[k++];
        assertEquals(offset, k);
        assertEquals(row, {
          ...want,
          asks: want.asks.map((a: { px: number; qty: number }) => ({ px: a.px, qty: a.qty })),
        });
        assertEquals(JSON.stringify(row.meta), JSON.stringify(want.meta));
      }
    }
    assertEquals(k, ROWS);
  } finally {
    await rmrf(root);
  }
});

Deno.test("export batches stay bounded in bytes for large nested rows", async () => {
  const root = await tempDir();
  try {
    const schema = {
      type: "object",
      properties: { i: { type: "integer" }, blob: { type: "array", items: { type: "string" } } },
      required: ["i", "blob"],
    };
    const stream = await Stream.open("big", { schema, root });
    const blob = Array.from({ length: 256 }, (_, i) => `${i}`.padEnd(4096, "x")); // ~1 MiB a row
    for (let i = 1; i <= 80; i += 10) {
      await stream.sendMany(Array.from({ length: 10 }, (_, k) => ({ i: i + k, blob })));
    }
    await stream.close();
    const out = `${root}/big.arrow`;
    const report = await exportLog(`${root}/big`, schema, {
      format: "arrow",
      out,
      batchBytes: 16 << 20,
    });
    assertEquals(report.rows, 80);
    const table = tableFromIPC(Deno.readFileSync(out));
    // 80 MiB of rows in batches of about 16 MiB.
    assert(table.batches.length >= 5, `${table.batches.length} batches`);
    assert(table.batches.every((b) => b.numRows <= 17), table.batches.map((b) => b.numRows).join());
    assertEquals(table.getChild("blob")!.get(79)!.get(255), blob[255]);
  } finally {
    await rmrf(root);
  }
});

const DEEP = {
  type: "object",
  properties: {
    id: { type: "integer" },
    pts: {
      type: ["array", "null"],
      items: {
        type: ["object", "null"],
        properties: {
          n: { type: "integer", format: "int32" },
          big: { type: ["integer", "null"] },
          f: { type: "number", format: "float" },
          ok: { type: "boolean" },
          s: { type: ["string", "null"] },
          tags: { type: "array", items: { type: ["string", "null"] } },
        },
        required: ["n", "big", "f", "ok", "s", "tags"],
        additionalProperties: false,
      },
    },
    added: { type: ["object", "null"] },
  },
  required: ["id", "pts", "added"],
  additionalProperties: false,
};

Deno.test("the row builder reads Struct/List columns the same from bytes and from parsed values, at any depth", async () => {
  const { ArrowRowBuilder } = await import("../../arrow/row_builder.ts");
  const { compileSchema } = await import("../../schema/compile.ts");
  const seed = Date.now() % 100_000;
  console.log(`nested builder seed ${seed}`);
  const random = rng(seed);
  const schema = compileSchema(DEEP);
  const pick = <T>(xs: T[]): T => xs[Math.floor(random() * xs.length)];
  const texts: string[] = [];
  const values: unknown[] = [];
  for (let i = 0; i < 400; i++) {
    const pts = random() < 0.2
      ? null
      : Array.from({ length: Math.floor(random() * 4) }, () =>
        random() < 0.15 ? null : {
          // Members in the producer's order, not the schema's.
          ...(random() < 0.5 ? { s: pick(["a", "é ü", 'q"\\', null, ""]) } : {}),
          tags: Array.from({ length: Math.floor(random() * 3) }, () => pick(["x", null, "😀"])),
          ok: random() < 0.5,
          f: Math.fround(random() * 100),
          big: pick([null, 2 ** 53 - 1, -(2 ** 40), 0]),
          n: Math.floor(random() * 2 ** 31) * pick([1, -1]),
          ...(random() >= 0.5 ? { s: pick(["b", null]) } : {}),
        });
    const row = { id: i, pts, added: random() < 0.5 ? null : { k: i } };
    const v = JSON.parse(JSON.stringify(row));
    if (v.pts) {
      for (const p of v.pts) if (p && !("s" in p)) p.s = null;
    }
    assertEquals(schema.validate(v), null);
    let text = schema.encode(v);
    // Some rows were written before "added" existed.
    if (random() < 0.3) {
      text = text.replace(/,"added":[^}]*\}?$/, "}").replace(/,"added":null\}$/, "}");
    }
    texts.push(text);
    values.push(v);
  }
  const builder = new ArrowRowBuilder(DEEP);
  const batch = builder.fromJson(texts.map((_, i) => i + 1), texts);
  const { batchRows } = await import("../../arrow/subscription.ts");
  const rows = batchRows(batch);
  rows.forEach(([offset, row], i) => {
    const want = JSON.parse(texts[i]);
    want.added ??= null;
    if (want.pts) {
      want.pts = want.pts.map((p: Record<string, unknown> | null) =>
        p && { n: p.n, big: p.big, f: p.f, ok: p.ok, s: p.s ?? null, tags: p.tags }
      );
    }
    assertEquals(offset, i + 1);
    assertEquals(row, want, `seed ${seed} row ${i}: ${texts[i]}`);
  });
  // The same rows through a log into Parquet, read by DuckDB.
  const root = await tempDir();
  try {
    const { Log } = await import("../../log/mod.ts");
    const log = await Log.open(`${root}/deep`, { timers: false });
    await log.appendMany(texts.map((t) => new TextEncoder().encode(t)));
    await log.close();
    const out = `${root}/deep.parquet`;
    await exportLog(`${root}/deep`, DEEP, { format: "parquet", out, batchRows: 64 });
    const got = await duck(
      `SELECT "offset", to_json(pts)::VARCHAR, added IS NULL FROM read_parquet('${out}') ORDER BY 1`,
    );
    got.forEach(([offset, pts, noAdded], i) => {
      assertEquals(offset, BigInt(i + 1));
      assertEquals(JSON.parse(pts as string), rows[i][1].pts, `seed ${seed} row ${i}`);
      assertEquals(noAdded, rows[i][1].added === null);
    });
  } finally {
    await rmrf(root);
  }
  // A row that fails the scan after its nested value was read (non-ASCII text
  // later in the row) is read exactly, and the scanned value is not kept twice.
  const two = new ArrowRowBuilder({
    type: "object",
    properties: { a: { type: "array", items: { type: "number" } }, s: { type: "string" } },
    required: ["a", "s"],
  });
  const mixed = batchRows(
    two.fromJson([1, 2, 3], ['{"a":[1,2],"s":"é"}', '{"a":[3],"s":"x"}', '{"a":[],"s":"ü"}']),
  );
  assertEquals(mixed.map(([, r]) => r), [{ a: [1, 2], s: "é" }, { a: [3], s: "x" }, {
    a: [],
    s: "ü",
  }]);
  // A value that does not fit is refused by offset, column and place.
  const bad =
    '{"id":1,"pts":[{"n":1.5,"big":null,"f":1,"ok":true,"s":null,"tags":[]}],"added":null}';
  let err: Error | null = null;
  try {
    builder.fromJson([7], [bad]);
  } catch (e) {
    err = e as Error;
  }
  assert(
    err instanceof TypeError &&
      err.message.includes('offset 7: column "pts"/0/n holds 1.5, not an int32'),
    String(err),
  );
});

Deno.test("frames=arrow carries nested columns: Struct/List typed, JSON text parsed back, across replay and live", async () => {
  const { serve } = await import("../../mod.ts");
  const { connectArrow } = await import("../../arrow/subscription.ts");
  const root = await tempDir();
  const random = rng(3);
  const lines = Array.from({ length: 40 }, (_, i) => bookLine(i + 1, random));
  const stream = await Stream.open("book", { schema: BOOK, root, maxReplay: null });
  const server = serve([stream], { port: 0, onListen: () => {} });
  try {
    await stream.sendMany(lines.slice(0, 30).map((l) => JSON.parse(l)));
    const arrow = await connectArrow(`ws://127.0.0.1:${server.addr.port}/book`, { offset: 1 });
    const types = Object.fromEntries(arrow.schema.fields.map((f) => [f.name, String(f.type)]));
    assertEquals(types.asks, "List<Struct<{px:Float64, qty:Float64}>>");
    assertEquals(
      arrow.schema.fields.find((f) => f.name === "meta")!.metadata.get("ARROW:extension:name"),
      "arrow.json",
    );
    await stream.sendMany(lines.slice(30).map((l) => JSON.parse(l)));
    const got: [number | null, Record<string, unknown>][] = [];
    for await (const batch of arrow) {
      got.push(...batchRows(batch));
      if (got.length >= 40) break;
    }
    arrow.close();
    got.forEach(([offset, row], i) => {
      const want = JSON.parse(stored(lines[i]));
      assertEquals(offset, i + 1);
      assertEquals(
        JSON.stringify(row.meta),
        JSON.stringify(want.meta),
        "JSON text: the value exactly",
      );
      assertEquals(row.bids, want.bids);
      assertEquals(
        row.asks,
        want.asks.map((a: { px: number; qty: number }) => ({ px: a.px, qty: a.qty })),
      );
      assertEquals(row.tags, want.tags);
    });
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("toArrow and fromArrow map nested columns both ways", async () => {
  const { toArrow, fromArrow } = await import("../../arrow/schema.ts");
  const { Field, Float64, Int32, List, Schema, Struct, Utf8, Uint8 } = await import("apache-arrow");
  // Ours: exact round trip, annotations and all (the schema rides in the field metadata).
  const back = fromArrow(toArrow(BOOK));
  assertEquals((back.properties as Record<string, unknown>).bids, BOOK.properties.bids);
  assertEquals((back.properties as Record<string, unknown>).meta, BOOK.properties.meta);
  assertEquals(String(toArrow(back)), String(toArrow(BOOK)));
  // A foreign Struct/List schema becomes a closed sub-schema.
  const foreign = new Schema([
    new Field(
      "lv",
      new List(
        new Field(
          "item",
          new Struct([new Field("p", new Float64()), new Field("n", new Int32(), true)]),
        ),
      ),
      true,
    ),
  ]);
  assertEquals(fromArrow(foreign).properties, {
    lv: {
      type: ["array", "null"],
      items: {
        type: "object",
        properties: {
          p: { type: "number", format: "double" },
          n: { type: ["integer", "null"], format: "int32" },
        },
        required: ["p", "n"],
        additionalProperties: false,
      },
    },
  });
  assertEquals(String(toArrow(fromArrow(foreign))), String(foreign));
  // JSON text without our metadata cannot say object or array; a List of an unsupported type is refused.
  const json = new Field("j", new Utf8(), false, new Map([["ARROW:extension:name", "arrow.json"]]));
  const thrown = (f: () => unknown): Error | null => {
    try {
      f();
    } catch (e) {
      return e as Error;
    }
    return null;
  };
  let err = thrown(() => fromArrow(new Schema([json])));
  assert(
    err instanceof TypeError &&
      err.message.includes("does not say whether it holds objects or arrays"),
    String(err),
  );
  err = thrown(() =>
    fromArrow(new Schema([new Field("u", new List(new Field("item", new Uint8())))]))
  );
  assert(
    err instanceof TypeError && err.message.includes("List<Uint8> is not supported"),
    String(err),
  );
});
