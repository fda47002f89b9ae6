import { tableFromIPC } from "apache-arrow";
import { Log } from "../../log/mod.ts";
import { ArrowFrameEncoder } from "../../arrow/frame_encoder.ts";
import { renderBatch } from "../../server/frames/text_frames.ts";
import { compileSchema } from "../../schema/compile.ts";
import { ArrowFrameDecoder, batchRows } from "../../arrow/subscription.ts";
import { SCHEMA as TRADES, tradeRows } from "../harness/trades.ts";
import { assert, assertEquals, assertThrows } from "../harness/assert.ts";
import { rmrf, tempDir, utf8 } from "../harness/util.ts";
import { ALL_TYPES, allTypesRow } from "../harness/duckdb.ts";

const all = compileSchema(ALL_TYPES);

function decodeAll(frames: Uint8Array[]): [number | null, Record<string, unknown>][] {
  const decoder = new ArrowFrameDecoder();
  const out: [number | null, Record<string, unknown>][] = [];
  for (const f of frames) {
    const batch = decoder.push(f);
    if (batch) out.push(...batchRows(batch));
  }
  return out;
}

Deno.test("ArrowFrameEncoder from JSON rows decodes to the same rows", () => {
  const encoder = new ArrowFrameEncoder(all);
  const rows = Array.from({ length: 300 }, (_, i) => allTypesRow(i));
  const texts = rows.map((r) => all.encode(r));
  const frames = [encoder.schemaMessage()];
  for (let i = 0; i < 300; i += 128) {
    const offsets = Array.from({ length: Math.min(128, 300 - i) }, (_, k) => 1000 + i + k);
    frames.push(encoder.encode(offsets, texts.slice(i, i + 128)));
  }
  assertEquals(decodeAll(frames), rows.map((r, i) => [1000 + i, r]));
  // The same bytes from the wire frames a stream fans out.
  const again = [
    encoder.schemaMessage(),
    encoder.encodeFrames(texts.map((t, i) => `[${1000 + i},${t}]`)),
  ];
  assertEquals(decodeAll(again), rows.map((r, i) => [1000 + i, r]));
});

Deno.test("ArrowFrameEncoder from log records decodes to the rows as stored", async () => {
  const dir = await tempDir();
  const log = await Log.open(`${dir}/trades`, { timers: false });
  try {
    const trades = compileSchema(TRADES);
    const make = tradeRows(2);
    const texts = Array.from({ length: 10_000 }, (_, i) => trades.encode(make(i)));
    await log.appendMany(texts.map(utf8));
    const encoder = new ArrowFrameEncoder(trades);
    const frames = [encoder.schemaMessage()];
    const reader = log.reader(1);
    let jsonFrames = 0;
    while (true) {
      const batch = await reader.read(256 * 1024);
      if (batch.count === 0) break;
      // As a catch-up would: the rows of a read, at most 4096 per frame.
      for (let i = 0; i < batch.count; i += 4096) {
        const count = Math.min(4096, batch.count - i);
        frames.push(encoder.encodeRecords(batch, i, count));
        // The same rows as a batched text frame, for comparison.
        const { text, rows } = renderBatch(batch, i, count);
        assertEquals(rows, count);
        jsonFrames += text.split("\n").length;
      }
    }
    reader.close();
    assertEquals(jsonFrames, 10_000);
    assertEquals(decodeAll(frames), texts.map((t, i) => [i + 1, JSON.parse(t)]));
  } finally {
    await log.close();
    await rmrf(dir);
  }
});

Deno.test("ArrowFrameEncoder carries int64 beyond 2^53 exactly", () => {
  const schema = compileSchema({
    type: "object",
    properties: { id: { type: "integer" }, n: { type: ["integer", "null"], format: "int64" } },
    required: ["id", "n"],
  });
  const encoder = new ArrowFrameEncoder(schema);
  const got = decodeAll([
    encoder.schemaMessage(),
    encoder.encodeFrames([
      '[1,{"id":9007199254740993,"n":null}]',
      '[2,{"id":-9223372036854775808,"n":9223372036854775807}]',
      '[3,{"id":5,"n":-7}]',
    ]),
  ]);
  assertEquals(got, [
    [1, { id: 9007199254740993n, n: null }],
    [2, { id: -9223372036854775808n, n: 9223372036854775807n }],
    [3, { id: 5, n: -7 }],
  ]);
  assertThrows(
    () => encoder.encodeFrames(['[4,{"id":9223372036854775808,"n":null}]']),
    RangeError,
    'offset 4: column "id" holds 9223372036854775808, outside the int64 range',
  );
});

Deno.test("ArrowFrameEncoder on an ephemeral stream sends null offsets", () => {
  const schema = compileSchema(TRADES);
  const encoder = new ArrowFrameEncoder(schema, { durable: false });
  assertEquals(encoder.schema.fields[0].nullable, true);
  const row = tradeRows(1)(0);
  const got = decodeAll([
    encoder.schemaMessage(),
    encoder.encodeFrames([`[null,${schema.encode(row)}]`]),
    encoder.encode(null, [schema.encode(row)]),
  ]);
  assertEquals(got, [[null, row], [null, row]]);
});

Deno.test("Arrow frames concatenated are an Arrow IPC stream", () => {
  const encoder = new ArrowFrameEncoder(all);
  const texts = Array.from({ length: 10 }, (_, i) => all.encode(allTypesRow(i)));
  const parts = [
    encoder.schemaMessage(),
    encoder.encode([1, 2, 3], texts.slice(0, 3)),
    encoder.encode([4, 5, 6, 7, 8, 9, 10], texts.slice(3)),
    new Uint8Array([255, 255, 255, 255, 0, 0, 0, 0]),
  ];
  const stream = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    stream.set(p, o);
    o += p.length;
  }
  const table = tableFromIPC(stream);
  assertEquals(table.numRows, 10);
  assertEquals(table.getChild("s")?.get(2), allTypesRow(2).s);
  assertEquals(table.getChild("offset")?.get(9), 10n);
  // The schema frame is the same bytes every time; a record batch frame is 8-byte aligned.
  assertEquals(encoder.schemaMessage(), encoder.schemaMessage());
  assertEquals(parts[1].length % 8, 0);
});

Deno.test("ArrowFrameDecoder refuses what is not a frame of a subscription", () => {
  const encoder = new ArrowFrameEncoder(all);
  const batch = encoder.encode([1], [all.encode(allTypesRow(1))]);
  assertThrows(() => new ArrowFrameDecoder().push(batch), TypeError, "before the schema");
  assertThrows(
    () => new ArrowFrameDecoder().push(utf8('[1,{"a":1}]')),
    TypeError,
    "not an Arrow IPC message",
  );
  assertThrows(() => new ArrowFrameDecoder().push(batch.subarray(0, 12)), TypeError, "truncated");
  // An ArrayBuffer (what a browser WebSocket hands over) works as well as a Uint8Array.
  const decoder = new ArrowFrameDecoder();
  decoder.push(encoder.schemaMessage().slice().buffer);
  const got = decoder.push(batch.slice().buffer);
  assert(got !== null);
  assertEquals(batchRows(got)[0], [1, allTypesRow(1)]);
  assertEquals(decoder.schema?.fields.length, 13);
});

Deno.test("ArrowFrameEncoder refuses rows that do not fit the schema, naming offset and column", () => {
  const encoder = new ArrowFrameEncoder(all);
  const good = all.encode(allTypesRow(1));
  assertThrows(
    () => encoder.encode([7], [good.replace('"i32":-1999000', '"i32":1.5')]),
    TypeError,
    'offset 7: column "i32" holds 1.5, not an int32',
  );
  assertThrows(
    () => encoder.encode([8], [good.replace(/"s":"[^"]*"/, '"s":null')]),
    TypeError,
    'offset 8: column "s" is null but not nullable',
  );
  assertThrows(
    () => encoder.encode([9], ['{"b":true}']),
    TypeError,
    'offset 9: column "nb" holds nothing (the key is missing), not a boolean',
  );
});
