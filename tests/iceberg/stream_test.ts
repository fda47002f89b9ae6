// A stream with `iceberg` keeps its table; what cannot keep one is refused
// when the stream is opened, naming why.
import { assertEquals, assertRejects, assertThrows } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { IcebergTable, Log, Stream } from "../../mod.ts";
import { row, SCHEMA } from "./_fixture.ts";
import { duckRows, localFiles, viewTable } from "../harness/read_table.ts";
import { pathToFileURL } from "node:url";

const schema = SCHEMA as unknown as Record<string, unknown>;

Deno.test("iceberg Stream.open with iceberg: a planned close seals the tail and commits it", async () => {
  const root = await tempDir();
  try {
    const s = await Stream.open("trades", {
      schema,
      root,
      iceberg: true,
      logOptions: { timers: false },
    });
    for (let i = 0; i < 12; i++) await s.send(row(i));
    await s.close();
    const location = pathToFileURL(`${root}/trades/iceberg`).href;
    const view = await viewTable(location, localFiles);
    const rows = await duckRows(view.dataFiles, localFiles, "streamcast_offset, symbol");
    assertEquals(
      rows.map((r) => Number(r.streamcast_offset)),
      Array.from({ length: 12 }, (_, i) => i + 1),
    );
    assertEquals(rows.map((r) => r.symbol), Array.from({ length: 12 }, (_, i) => row(i).symbol));
  } finally {
    await rmrf(root);
  }
});

Deno.test("iceberg options are refused for an ephemeral stream, a bad value or a column the table cannot hold", async () => {
  assertThrows(() => Stream.ephemeral("t", { schema, iceberg: true }), TypeError, "iceberg");
  await assertRejects(
    () => Stream.open("t", { schema, iceberg: true }),
    TypeError,
    "durable stream",
  );
  const root = await tempDir();
  try {
    await assertRejects(
      () => Stream.open("t", { schema, root, iceberg: { maxCommitBytes: 10 } }),
      RangeError,
      "maxCommitBytes",
    );
    await assertRejects(
      () => Stream.open("t", { schema, root, iceberg: { colour: 1 } as never }),
      TypeError,
      "unknown option",
    );
    const withOffset = {
      type: "object",
      properties: { offset: { type: "integer" } },
      required: ["offset"],
    };
    await assertRejects(
      () => Stream.open("t", { schema: withOffset, root, iceberg: true }),
      TypeError,
      '"offset"',
    );
    const withTime = {
      type: "object",
      properties: { streamcast_time: { type: "integer" } },
      required: ["streamcast_time"],
    };
    await assertRejects(
      () => Stream.open("t", { schema: withTime, root, iceberg: true }),
      TypeError,
      "streamcast_time",
    );
  } finally {
    await rmrf(root);
  }
});

Deno.test("iceberg a mirror's log (a replica) keeps no table: only the writer commits", async () => {
  const dir = await tempDir();
  const log = await Log.open(dir, { replica: true, timers: false });
  try {
    assertThrows(() => IcebergTable.start(log, "t", null), TypeError, "mirror");
  } finally {
    await log.close();
    await rmrf(dir);
  }
});
