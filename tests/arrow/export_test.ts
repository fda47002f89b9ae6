import { tableFromIPC } from "apache-arrow";
import { Log, LogEvictedError } from "../../log/mod.ts";
import { exportLog } from "../../arrow/export.ts";
import { compileSchema } from "../../schema/compile.ts";
import { batchRows } from "../../arrow/subscription.ts";
import { SCHEMA as TRADES, tradeRows } from "../harness/trades.ts";
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { rmrf, tempDir, utf8 } from "../harness/util.ts";
import { ALL_TYPES, allTypesRow, duck, duckTypes } from "../harness/duckdb.ts";

// "import ... from '../../arrow/export.ts'" registers zstd (through its file writer).

const trades = compileSchema(TRADES);

/** Appends `n` trade rows; returns their JSON text by offset. */
async function fillTrades(log: Log, n: number, seed = 3): Promise<Map<number, string>> {
  const make = tradeRows(seed);
  const byOffset = new Map<number, string>();
  for (let i = 0; i < n; i += 1000) {
    const jsons = Array.from(
      { length: Math.min(1000, n - i) },
      (_, k) => trades.encode(make(i + k)),
    );
    const first = log.nextOffset;
    await log.appendMany(jsons.map(utf8));
    jsons.forEach((j, k) => byOffset.set(first + k, j));
  }
  return byOffset;
}

function readArrow(path: string) {
  return tableFromIPC(Deno.readFileSync(path));
}

Deno.test("export parquet is read by DuckDB with the log's rows and the schema's types", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(`${dir}/trades`, { timers: false });
    const rows = await fillTrades(log, 20_000);
    await log.close();
    const out = `${dir}/trades.parquet`;
    const report = await exportLog(`${dir}/trades`, TRADES, {
      format: "parquet",
      out,
      batchRows: 3000,
    });
    assertEquals([report.rows, report.first, report.last], [20_000, 1, 20_000]);
    let sum = 0;
    for (const json of rows.values()) sum += JSON.parse(json).amount;
    const [[count, min, max, total, ids]] = await duck(
      `SELECT count(*), min("offset"), max("offset"), sum(amount), sum(trade_id) FROM read_parquet('${out}')`,
    );
    assertEquals([count, min, max], [20_000n, 1n, 20_000n]);
    assert(Math.abs((total as number) - sum) < 1e-6, `sum(amount) ${total} != ${sum}`);
    let idSum = 0n;
    for (const json of rows.values()) idSum += BigInt(JSON.parse(json).trade_id);
    assertEquals(ids, idSum);
    assertEquals(await duckTypes(out), {
      offset: "BIGINT",
      event_ts: "BIGINT",
      symbol: "VARCHAR",
      price: "DOUBLE",
      amount: "DOUBLE",
      side: "INTEGER",
      trade_id: "BIGINT",
    });
    // Row for row: DuckDB's values are the rows' values.
    const sample = await duck(
      `SELECT "offset", event_ts, symbol, price, amount, side, trade_id FROM read_parquet('${out}') WHERE "offset" IN (1, 777, 20000) ORDER BY 1`,
    );
    for (const [offset, ...values] of sample) {
      const row = JSON.parse(rows.get(Number(offset))!);
      assertEquals(values, [
        BigInt(row.event_ts),
        row.symbol,
        row.price,
        row.amount,
        row.side,
        BigInt(row.trade_id),
      ]);
    }
  } finally {
    await rmrf(dir);
  }
});

Deno.test("export parquet keeps every type, nulls, and int64 beyond 2^53", async () => {
  const dir = await tempDir();
  try {
    const schema = compileSchema(ALL_TYPES);
    const log = await Log.open(`${dir}/all`, { timers: false });
    const texts = Array.from({ length: 50 }, (_, i) => schema.encode(allTypesRow(i)));
    // Values a send never stores but a log may hold: int64 beyond 2^53, exact in the text.
    texts.push(
      texts[1].replace(/"i64":\d+/, '"i64":9223372036854775807').replace(
        /"ni64":-?\d+/,
        '"ni64":-9223372036854775808',
      ),
      texts[2].replace(/"i64":\d+/, '"i64":9007199254740993'),
    );
    await log.appendMany(texts.map(utf8));
    await log.close();
    const out = `${dir}/all.parquet`;
    await exportLog(`${dir}/all`, schema, { format: "parquet", out, batchRows: 16 });
    assertEquals(await duckTypes(out), {
      offset: "BIGINT",
      b: "BOOLEAN",
      nb: "BOOLEAN",
      i32: "INTEGER",
      ni32: "INTEGER",
      i64: "BIGINT",
      ni64: "BIGINT",
      f: "FLOAT",
      nf: "FLOAT",
      d: "DOUBLE",
      nd: "DOUBLE",
      s: "VARCHAR",
      ns: "VARCHAR",
    });
    const got = await duck(`SELECT * FROM read_parquet('${out}') ORDER BY "offset"`);
    assertEquals(got.length, texts.length);
    for (let i = 0; i < 50; i++) {
      const row = allTypesRow(i);
      const want = [
        BigInt(i + 1),
        row.b,
        row.nb,
        row.i32,
        row.ni32,
        BigInt(row.i64 as number),
        row.ni64 === null ? null : BigInt(row.ni64 as number),
        row.f,
        row.nf,
        row.d,
        row.nd,
        row.s,
        row.ns,
      ];
      assertEquals(got[i], want, `offset ${i + 1}`);
    }
    assertEquals(got[50].slice(5, 7), [9223372036854775807n, -9223372036854775808n]);
    assertEquals(got[51][5], 9007199254740993n);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("export arrow reads back equal to the rows, nulls and int64 beyond 2^53 included", async () => {
  const dir = await tempDir();
  try {
    const schema = compileSchema(ALL_TYPES);
    const log = await Log.open(`${dir}/all`, { timers: false });
    const texts = Array.from({ length: 200 }, (_, i) => schema.encode(allTypesRow(i)));
    texts[7] = texts[7].replace(/"i64":\d+/, '"i64":9007199254740993');
    texts[8] = texts[8].replace(/"ni64":-?\d+/, '"ni64":-9223372036854775808');
    await log.appendMany(texts.map(utf8));
    await log.close();
    const out = `${dir}/all.arrow`;
    const report = await exportLog(`${dir}/all`, schema, { format: "arrow", out, batchRows: 64 });
    assertEquals(report.rows, 200);
    const bytes = Deno.readFileSync(out);
    assertEquals(new TextDecoder().decode(bytes.subarray(0, 6)), "ARROW1");
    const table = readArrow(out);
    assertEquals(table.batches.length, 4); // 64 + 64 + 64 + 8
    assertEquals(table.schema.fields.map((f) => f.name), [
      "offset",
      ...Object.keys(ALL_TYPES.properties),
    ]);
    assertEquals(table.schema.fields[0].nullable, false);
    const pairs = table.batches.flatMap((b) => batchRows(b));
    for (let i = 0; i < 200; i++) {
      const [offset, row] = pairs[i];
      assertEquals(offset, i + 1);
      if (i === 7) {
        assertEquals(row.i64, 9007199254740993n);
        continue;
      }
      if (i === 8) {
        assertEquals(row.ni64, -9223372036854775808n);
        continue;
      }
      assertEquals(row, allTypesRow(i), `offset ${i + 1}`);
    }
  } finally {
    await rmrf(dir);
  }
});

Deno.test("export arrow buffers are zstd-compressed", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(`${dir}/trades`, { timers: false });
    await fillTrades(log, 5000);
    await log.close();
    await exportLog(`${dir}/trades`, TRADES, { format: "arrow", out: `${dir}/t.arrow` });
    const raw = Deno.readFileSync(`${dir}/t.arrow`);
    // Uncompressed, 5000 rows of 7 columns hold > 200 kB of buffers.
    assert(raw.length < 120_000, `${raw.length} bytes: not compressed?`);
    // The zstd frame magic (28 B5 2F FD) appears in the body.
    const hex = Array.from(raw, (b) => b.toString(16).padStart(2, "0")).join("");
    assert(hex.includes("28b52ffd"), "no zstd frame in the file");
    assertEquals(readArrow(`${dir}/t.arrow`).numRows, 5000);
  } finally {
    await rmrf(dir);
  }
});

Deno.test("export ndjson writes [offset,msg] lines exactly as stored", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(`${dir}/raw`, { timers: false });
    const payloads = ['{"a":1}', '{"a":"é\\u0000"}', '{"a": 2 }', "{}"];
    await log.appendMany(payloads.map(utf8));
    await log.close();
    const out = `${dir}/raw.ndjson`;
    await exportLog(`${dir}/raw`, null, { format: "ndjson", out, from: 2 });
    assertEquals(
      Deno.readTextFileSync(out),
      payloads.slice(1).map((p, i) => `[${i + 2},${p}]\n`).join(""),
    );
  } finally {
    await rmrf(dir);
  }
});

Deno.test("export spans chunks and the active segment, from a Log and from its folder", async () => {
  const dir = await tempDir();
  const log = await Log.open(`${dir}/trades`, { timers: false, chunks: true });
  try {
    const rows = await fillTrades(log, 3000);
    await log.roll();
    await log.chunks.settled();
    for (const [k, v] of await fillTrades(log, 2000, 9)) rows.set(k, v);
    await log.roll();
    await log.chunks.settled();
    for (const [k, v] of await fillTrades(log, 1500, 11)) rows.set(k, v);
    const manifest = log.chunks.manifest!;
    assertEquals(manifest.chunks.map((c) => [c.first, c.last]), [[1, 3000], [3001, 5000]]);
    assertEquals(log.segments().at(-1)!.firstOffset, 5001);
    // The folder is read without the lock while `log` holds it.
    for (const source of [log, `${dir}/trades`]) {
      for (const format of ["arrow", "ndjson"] as const) {
        const out = `${dir}/out.${format}`;
        const report = await exportLog(source, TRADES, {
          format,
          out,
          from: 2500,
          to: 5600,
          batchRows: 1000,
        });
        assertEquals([report.rows, report.first, report.last], [3101, 2500, 5600]);
        const want = Array.from(
          { length: 3101 },
          (_, i) => [2500 + i, JSON.parse(rows.get(2500 + i)!)],
        );
        if (format === "ndjson") {
          const lines = Deno.readTextFileSync(out).trimEnd().split("\n");
          assertEquals(lines.map((l) => JSON.parse(l)), want);
        } else {
          const got = readArrow(out).batches.flatMap((b) => batchRows(b));
          assertEquals(got, want);
        }
      }
    }
    // The whole log, to its end, by default.
    const all = await exportLog(`${dir}/trades`, TRADES, {
      format: "parquet",
      out: `${dir}/all.parquet`,
    });
    assertEquals([all.rows, all.first, all.last], [6500, 1, 6500]);
    const [[n, lo, hi]] = await duck(
      `SELECT count(*), min("offset"), max("offset") FROM read_parquet('${dir}/all.parquet')`,
    );
    assertEquals([n, lo, hi], [6500n, 1n, 6500n]);
  } finally {
    await log.close();
    await rmrf(dir);
  }
});

Deno.test("export of an empty range writes a valid empty file", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(`${dir}/trades`, { timers: false });
    await fillTrades(log, 10);
    await log.close();
    const empty = await Log.open(`${dir}/nothing`, { timers: false });
    await empty.close();
    for (
      const [source, range] of [[`${dir}/trades`, { from: 11 }], [`${dir}/nothing`, {}]] as const
    ) {
      const a = await exportLog(source, TRADES, {
        format: "arrow",
        out: `${dir}/e.arrow`,
        ...range,
      });
      assertEquals([a.rows, a.first, a.last], [0, null, null]);
      const table = readArrow(`${dir}/e.arrow`);
      assertEquals(table.numRows, 0);
      assertEquals(table.schema.fields.map((f) => f.name), [
        "offset",
        ...Object.keys(TRADES.properties),
      ]);
      await exportLog(source, TRADES, { format: "parquet", out: `${dir}/e.parquet`, ...range });
      assertEquals(await duck(`SELECT count(*) FROM read_parquet('${dir}/e.parquet')`), [[0n]]);
      assertEquals((await duckTypes(`${dir}/e.parquet`)).trade_id, "BIGINT");
      await exportLog(source, null, { format: "ndjson", out: `${dir}/e.ndjson`, ...range });
      assertEquals(Deno.readTextFileSync(`${dir}/e.ndjson`), "");
    }
  } finally {
    await rmrf(dir);
  }
});

Deno.test("export refuses offsets the log no longer holds, and bad rows by offset and column", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(`${dir}/fenced`, { timers: false, firstOffset: 1000 });
    await log.appendMany(['{"price":1}', '{"price":"2"}'].map(utf8));
    await log.close();
    const schema = {
      type: "object",
      properties: { price: { type: "number" } },
      required: ["price"],
    };
    const err = await assertRejects(
      () => exportLog(`${dir}/fenced`, schema, { format: "arrow", out: `${dir}/x.arrow`, from: 5 }),
      LogEvictedError,
    );
    assertEquals([err.offset, err.earliest], [5, 1000]);
    await assertRejects(
      () => exportLog(`${dir}/fenced`, schema, { format: "arrow", out: `${dir}/x.arrow` }),
      TypeError,
      'offset 1001: column "price" holds "2", not a double',
    );
    // A failed export leaves no file behind, not even a partial one.
    assertEquals([...Deno.readDirSync(dir)].map((e) => e.name), ["fenced"]);
    await assertRejects(
      () =>
        exportLog(`${dir}/fenced`, schema, { format: "arrow", out: `${dir}/x`, from: 9, to: 3 }),
      RangeError,
    );
  } finally {
    await rmrf(dir);
  }
});

Deno.test("export leaves a torn tail out, as recovery would", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(`${dir}/t`, { timers: false });
    await fillTrades(log, 100);
    const seg = log.segments().at(-1)!.path;
    await log.close();
    const size = Deno.statSync(seg).size;
    // A whole record whose checksum is wrong (a torn write), then half a record.
    const torn = new Uint8Array(20 + 2 + 5);
    const view = new DataView(torn.buffer);
    view.setUint32(4, 101); // offset 101
    view.setUint32(16, 2); // payload length
    torn.set(utf8("{}"), 20);
    view.setUint32(22, 12345); // not the checksum
    torn[26] = 0x0d;
    for (const tail of [torn, new Uint8Array([0, 0, 0, 0, 0, 0, 0, 101, 1, 2, 3])]) {
      await Deno.truncate(seg, size);
      const f = await Deno.open(seg, { append: true });
      await f.write(tail);
      f.close();
      const r = await exportLog(`${dir}/t`, TRADES, { format: "ndjson", out: `${dir}/t.ndjson` });
      assertEquals([r.rows, r.last], [100, 100]);
    }
  } finally {
    await rmrf(dir);
  }
});

Deno.test("export from the folder of a live log keeps every row while it seals, merges and expires files", async () => {
  const dir = await tempDir();
  const log = await Log.open(`${dir}/live`, {
    timers: false,
    chunks: { fanIn: 2, graceMs: 0 },
    segmentBytes: 32 * 1024,
  });
  const texts = new Map<number, string>();
  let writing = true;
  const writer = (async () => {
    const make = tradeRows(5);
    let i = 0;
    while (writing) {
      const jsons = Array.from({ length: 200 }, () => trades.encode(make(i++)));
      // Known before it is durable: an export may read rows written and not yet synced.
      const first = log.nextOffset;
      jsons.forEach((j, k) => texts.set(first + k, j));
      await log.appendMany(jsons.map(utf8));
      if (i % 1000 === 0) await log.chunks.settled(true); // seal, merge, drop retired chunks
    }
  })();
  try {
    while (log.endOffset < 3000) await new Promise((r) => setTimeout(r, 5));
    for (let round = 0; round < 6; round++) {
      const out = `${dir}/live-${round}.ndjson`;
      const r = await exportLog(`${dir}/live`, null, { format: "ndjson", out });
      assert(r.rows >= 3000, `only ${r.rows} rows`);
      const lines = Deno.readTextFileSync(out).trimEnd().split("\n");
      assertEquals(lines.length, r.rows);
      for (let k = 0; k < lines.length; k++) {
        if (lines[k] !== `[${k + 1},${texts.get(k + 1)}]`) {
          throw new Error(`round ${round}, line ${k}: ${lines[k].slice(0, 60)}`);
        }
      }
    }
    assert((log.chunks.manifest?.chunks.length ?? 0) > 0, "no chunks were made");
  } finally {
    writing = false;
    await writer;
    await log.close();
    await rmrf(dir);
  }
});
