// Nested columns in Arrow and Parquet (issue 19): closed typed sub-schemas are
// Struct/List, open ones JSON text; DuckDB queries the Parquet file.
import { tableFromIPC } from "apache-arrow";
import "../../arrow/zstd.ts"; // registers the zstd codec that reading the Arrow file needs
import { assert, assertEquals } from "../_assert.ts";
import { Stream } from "../../mod.ts";
import { exportLog } from "../../arrow/export.ts";
import { batchRows } from "../../client/arrow.ts";
import { rmrf, rng, tempDir } from "../_util.ts";
import { duck, duckTypes } from "./_helpers.ts";
import { BOOK, bookLine, stored } from "../server/_book.ts";

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
    const report = await exportLog(`${root}/big`, schema, { format: "arrow", out });
    assertEquals(report.rows, 80);
    const table = tableFromIPC(Deno.readFileSync(out));
    // 80 MiB of rows in batches of at most 64 MiB: more than one batch.
    assert(table.batches.length >= 2, `${table.batches.length} batches`);
    assert(table.batches.every((b) => b.numRows <= 64), table.batches.map((b) => b.numRows).join());
    assertEquals(table.getChild("blob")!.get(79)!.get(255), blob[255]);
  } finally {
    await rmrf(root);
  }
});
