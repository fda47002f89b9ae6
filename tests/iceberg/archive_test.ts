// Rows only the archive still holds reach the table: a log restored on a new
// machine (no chunk copied back) whose table had not taken its last rows; and
// a node whose local chunks begin inside a chunk another writer archived.
import { assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { startS3, stopS3 } from "../harness/s3.ts";
import { Stream } from "../../mod.ts";
import { Log } from "../../log/mod.ts";
import { writeSchemaHistory } from "../../log/schema_history.ts";
import { LocalTableStore } from "../../iceberg/table_store.ts";
import { TableWriter } from "../../iceberg/table_writer.ts";
import { row, SCHEMA } from "./_fixture.ts";
import { duckRows, icebirdRows, localFiles, viewTable } from "../harness/read_table.ts";

Deno.test("iceberg rows that only the archive holds (a restored log) are read from it, each once", async () => {
  const s3 = await startS3();
  const rootA = await tempDir();
  const rootB = await tempDir();
  const archive = { uri: "s3://archive/lost", endpoint: s3.endpoint, forcePathStyle: true };
  const schema = SCHEMA as unknown as Record<string, unknown>;
  try {
    const a = await Stream.open("trades", {
      schema,
      root: rootA,
      archive,
      logOptions: { timers: false },
    });
    for (let i = 0; i < 3; i++) await a.send(row(i));
    await a.log!.roll();
    for (let i = 3; i < 8; i++) await a.send(row(i));
    await a.close(); // seals and archives the rest: two chunks in the archive
    const { stream: b, report } = await Stream.restore("trades", { schema, root: rootB, archive });
    try {
      assertEquals(report.archivedThrough, 8);
      assertEquals(b.log!.chunks.manifest?.chunks.length ?? 0, 0, "no chunk was copied back");
      const w = new TableWriter({
        store: new LocalTableStore(`${rootB}/trades/iceberg`),
        dir: `${rootB}/trades`,
        stream: "trades",
        streamId: b.log!.streamId,
        archive,
      });
      while (await w.commit());
      const view = await viewTable(w.location, localFiles);
      const rows = await duckRows(
        view.dataFiles,
        localFiles,
        "streamcast_offset, trade_id, epoch_us(streamcast_time) AS t",
      );
      assertEquals(rows.map((r) => Number(r.streamcast_offset)), [1, 2, 3, 4, 5, 6, 7, 8]);
      assertEquals(
        rows.map((r) => String(r.trade_id)),
        [0, 1, 2, 3, 4, 5, 6, 7].map((i) => String(row(i).trade_id)),
      );
      // Without the time index the times stay within each chunk's and never decrease.
      for (let i = 1; i < rows.length; i++) {
        assertEquals(Number(rows[i].t) >= Number(rows[i - 1].t), true);
      }
      const ice = await icebirdRows(w.location, localFiles);
      assertEquals(ice.map((r) => Number(r.streamcast_offset)), [1, 2, 3, 4, 5, 6, 7, 8]);
      w.close();
    } finally {
      await b.close();
    }
  } finally {
    await rmrf(rootA);
    await rmrf(rootB);
    await stopS3(s3);
  }
});

Deno.test("iceberg: an archived chunk that reaches past where the local chunks begin gives its rows once", async () => {
  const s3 = await startS3();
  const rootA = await tempDir();
  const dirB = await tempDir();
  const archive = { uri: "s3://archive/cut", endpoint: s3.endpoint, forcePathStyle: true };
  const schema = SCHEMA as unknown as Record<string, unknown>;
  try {
    // Writer A (an earlier leader) sealed and archived rows 1..8 as one chunk.
    const a = await Stream.open("trades", {
      schema,
      root: rootA,
      archive,
      logOptions: { timers: false },
    });
    for (let i = 0; i < 8; i++) await a.send(row(i));
    const streamId = a.log!.streamId;
    await a.close();
    // Node B holds the same rows from 5 on, sealed where it chose: 5..12.
    const b = await Log.open(dirB, { chunks: true, timers: false, streamId });
    await writeSchemaHistory(dirB, [{ from: 1, schema }]);
    await b.fence(5);
    await b.appendMany([5, 6, 7, 8, 9, 10, 11, 12].map((o) => JSON.stringify(row(o - 1))));
    await b.roll();
    await b.chunks.settled();
    assertEquals(b.chunks.manifest!.chunks.map((c) => [c.first, c.last]), [[5, 12]]);
    await b.close();
    const w = new TableWriter({
      store: new LocalTableStore(`${dirB}/iceberg`),
      dir: dirB,
      stream: "trades",
      streamId,
      archive,
    });
    while (await w.commit());
    const view = await viewTable(w.location, localFiles);
    const rows = await duckRows(view.dataFiles, localFiles, "streamcast_offset, trade_id");
    const want = Array.from({ length: 12 }, (_, i) => i + 1);
    assertEquals(rows.map((r) => Number(r.streamcast_offset)), want);
    assertEquals(
      rows.map((r) => String(r.trade_id)),
      want.map((o) => String(row(o - 1).trade_id)),
    );
    const ice = await icebirdRows(w.location, localFiles);
    assertEquals(ice.map((r) => Number(r.streamcast_offset)), want);
    w.close();
  } finally {
    await rmrf(rootA);
    await rmrf(dirB);
    await stopS3(s3);
  }
});
