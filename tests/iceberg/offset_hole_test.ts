// The table writer never commits across a hole in offsets (docs/SPEC.md
// §12.4): rows missing from every chunk it can read, that no fence of the
// log accounts for, stop it with an error naming them. The rows before the
// hole are committed, none past it, and the table stays readable; once the
// archive lists the missing rows again it goes on, each row once. Rows that
// retention dropped before the table took them stop it the same way, logged.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import { startS3, stopS3 } from "../harness/s3.ts";
import { IcebergTable, Log, Logger } from "../../mod.ts";
import { ArchiveStore } from "../../log/chunk/archive.ts";
import { writeSchemaHistory } from "../../log/schema_history.ts";
import { LocalTableStore } from "../../iceberg/table_store.ts";
import { TableWriter } from "../../iceberg/table_writer.ts";
import { OffsetHoleError } from "../../iceberg/commit_rows.ts";
import { row, SCHEMA } from "./_fixture.ts";
import { duckRows, localFiles, viewTable } from "../harness/read_table.ts";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

// Appends offsets first..last as rows of the fixture, a chunk sealed after each of `cuts`.
async function write(log: Log, first: number, last: number, cuts: number[]): Promise<void> {
  let o = first;
  for (const end of [...cuts, last]) {
    const rows = [];
    for (; o <= end; o++) rows.push(JSON.stringify(row(o)));
    await log.appendMany(rows);
    await log.roll();
  }
  await log.chunks.settled();
}

Deno.test("iceberg: a hole in the archive's offsets stops the table before it, naming the offsets", async () => {
  const s3 = await startS3();
  const root = await tempDir();
  const archive = { uri: "s3://archive/hole", endpoint: s3.endpoint, forcePathStyle: true };
  const schema = SCHEMA as unknown as Record<string, unknown>;
  const store = new ArchiveStore(archive, "trades");
  try {
    // Writer A archived 1..30 as 1..7, 8..19, 20..30.
    const a = await Log.open(join(root, "a"), { name: "trades", archive, timers: false });
    const streamId = a.streamId;
    await write(a, 1, 30, [7, 19]);
    assert(await a.archive.settled(20_000), JSON.stringify(a.archive.state));
    await a.close();
    const whole = (await store.getManifest())!;
    // Node B holds 12..40 (cut 12..25, 26..40) and keeps the table, archive unset
    // in its log so that only the manifest below is in the archive.
    const dirB = join(root, "b");
    const b = await Log.open(dirB, { name: "trades", chunks: true, timers: false, streamId });
    await writeSchemaHistory(dirB, [{ from: 1, schema }]);
    await b.fence(12);
    await write(b, 12, 40, [25]);
    await b.close();
    // The archive's manifest lost 8..11: A's first chunk, then B's.
    const [first] = whole.chunks;
    await store.putManifest({ ...whole, chunks: [first], through: first.last });
    const w = new TableWriter({
      store: new LocalTableStore(join(dirB, "iceberg")),
      dir: dirB,
      stream: "trades",
      streamId,
      archive,
    });
    const r = await w.commit();
    assertEquals([r?.firstOffset, r?.lastOffset], [1, 7], "the rows before the hole");
    const err = await assertRejects(() => w.commit(), OffsetHoleError);
    assertEquals([err.from, err.to], [8, 11]);
    assert(err.message.includes("offsets 8..11 are missing"), err.message);
    await assertRejects(() => w.commit(), OffsetHoleError, "offsets 8..11");
    assertEquals(await w.lastOffset(), 7, "nothing committed past the hole");
    const view = await viewTable(w.location, localFiles);
    const rows = await duckRows(view.dataFiles, localFiles, "streamcast_offset");
    assertEquals(rows.map((x) => Number(x.streamcast_offset)), range(1, 7));
    // The archive lists the missing rows again (A's chunk 8..19, which reaches
    // into B's 12..): the table goes on, each row once.
    await store.putManifest(whole);
    while (await w.commit());
    const after = await viewTable(w.location, localFiles);
    const all = await duckRows(after.dataFiles, localFiles, "streamcast_offset, trade_id");
    assertEquals(all.map((x) => Number(x.streamcast_offset)), range(1, 40));
    assertEquals(
      all.map((x) => String(x.trade_id)),
      range(1, 40).map((o) => String(row(o).trade_id)),
    );
    w.close();
  } finally {
    store.close();
    await rmrf(root);
    await stopS3(s3);
  }
});

Deno.test("iceberg: a fence of the log itself is no hole", async () => {
  const root = await tempDir();
  const schema = SCHEMA as unknown as Record<string, unknown>;
  try {
    const log = await Log.open(root, { name: "trades", chunks: true, timers: false });
    await writeSchemaHistory(root, [{ from: 1, schema }]);
    await write(log, 1, 5, []);
    await log.fence(100);
    await write(log, 100, 104, []);
    const w = new TableWriter({
      store: new LocalTableStore(join(root, "iceberg")),
      dir: root,
      stream: "trades",
      streamId: log.streamId,
      maxCommitBytes: 1,
    });
    await log.close();
    while (await w.commit());
    const view = await viewTable(w.location, localFiles);
    const rows = await duckRows(view.dataFiles, localFiles, "streamcast_offset");
    assertEquals(rows.map((x) => Number(x.streamcast_offset)), [
      ...range(1, 5),
      ...range(100, 104),
    ]);
    w.close();
  } finally {
    await rmrf(root);
  }
});

Deno.test("iceberg: rows retention dropped before the table took them stop the table, logged with their offsets", async () => {
  const root = await tempDir();
  const schema = SCHEMA as unknown as Record<string, unknown>;
  const lines: string[] = [];
  const logger = new Logger({ level: "warn", format: "json", write: (l) => lines.push(l) });
  try {
    const log = await Log.open(root, { name: "trades", chunks: true, timers: false });
    await writeSchemaHistory(root, [{ from: 1, schema }]);
    let table = IcebergTable.start(log, "trades", null, { logger, pollMs: 20 });
    await write(log, 1, 5, []);
    assert(await table.settled(30_000), JSON.stringify(table.state));
    assertEquals(table.state?.lastOffset, 5);
    await table.close(10_000);
    // While no table is kept, 6..10 and 11..15 are sealed and retention drops 1..10.
    await write(log, 6, 15, [10]);
    log.chunks.setRetention({ retainBytes: log.chunks.manifest!.chunks.at(-1)!.bytes });
    await log.chunks.settled(true);
    assertEquals(log.chunks.manifest!.chunks.map((c) => [c.first, c.last]), [[11, 15]]);
    table = IcebergTable.start(log, "trades", null, { logger, pollMs: 20 });
    await until(
      () => lines.some((l) => l.includes("iceberg_commit_failed")),
      30_000,
      "the log line",
    );
    const line = JSON.parse(lines.find((l) => l.includes("iceberg_commit_failed"))!);
    assert(String(line.error).includes("offsets 6..10 are missing"), line.error);
    assertEquals(table.state?.lastOffset, 5, "nothing committed past the hole");
    await table.close(0); // it cannot take the rows: no wait
    await log.close();
    const view = await viewTable(pathToFileURL(join(root, "iceberg")).href, localFiles);
    const rows = await duckRows(view.dataFiles, localFiles, "streamcast_offset");
    assertEquals(rows.map((x) => Number(x.streamcast_offset)), range(1, 5));
  } finally {
    await rmrf(root);
  }
});
