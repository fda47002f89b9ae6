// The table of a cluster's stream, on a real replicated log and the real
// Iceberg worker: a leader's sealed rows reach the table only once the
// cluster committed them (a tail cut at a failover never does), and a table
// whose writer may no longer commit creates no version.
import { assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import { Log } from "../../log/mod.ts";
import { writeSchemaHistory } from "../../log/schema_history.ts";
import { IcebergTable } from "../../iceberg/table_link.ts";
import { LocalTableStore } from "../../iceberg/table_store.ts";
import { duckRows, localFiles, viewTable } from "../harness/read_table.ts";

const SCHEMA = {
  type: "object",
  properties: { v: { type: "string" } },
  required: ["v"],
};

async function leaderLog(dir: string): Promise<Log> {
  const log = await Log.open(dir, { name: "t", replicated: true, chunks: true, timers: false });
  await writeSchemaHistory(dir, [{ from: 1, schema: SCHEMA }]);
  const rep = log.replication!;
  rep.writable = true;
  await rep.beginTerm(1);
  return log;
}

const row = (v: string) => JSON.stringify({ v });

async function tableRows(dir: string): Promise<[number, string][]> {
  const location = new LocalTableStore(`${dir}/iceberg`).location;
  const view = await viewTable(location, localFiles);
  const rows = await duckRows(view.dataFiles, localFiles, "streamcast_offset, v");
  return rows.map((r) => [Number(r.streamcast_offset), String(r.v)]);
}

Deno.test("iceberg table of a replicated log takes committed rows only: a sealed tail past the commit index waits, and a cut one never arrives", async () => {
  const dir = await tempDir();
  const log = await leaderLog(dir);
  const rep = log.replication!;
  const table = IcebergTable.start(log, "t", null, { pollMs: 10 });
  try {
    // Rows 1..3 durable here; the cluster holds 1 and 2 only.
    log.appendMany([row("a"), row("b"), row("c")]).catch(() => {});
    await log.flush();
    rep.commitThrough(3);
    await log.roll(); // the sealed segment holds row 3, not committed
    await log.chunks.settled();
    assertEquals(
      log.chunks.manifest?.chunks ?? [],
      [],
      "a segment with an uncommitted row is not chunked",
    );
    assertEquals(await table.settled(30_000), true);
    assertEquals(table.state?.lastOffset, 0);
    // A failover: this node follows; its row 3 is cut, the new leader's row 3 arrives.
    rep.writable = false;
    rep.failWaiters(new Error("deposed"));
    assertEquals(await rep.cutTail(3), { end: 3, rows: 1 });
    await rep.beginTerm(2, 3);
    await rep.appendCommit({
      first: 3,
      runs: [{ timeUs: Date.now() * 1000, payloads: [row("C"), row("d")] }],
      records: [],
    });
    rep.commitThrough(5);
    await log.roll();
    await log.chunks.settled();
    assertEquals(log.chunks.manifest?.chunks.at(-1)?.last, 4);
    assertEquals(await table.settled(30_000), true);
    assertEquals(table.state?.lastOffset, 4);
    assertEquals(await tableRows(dir), [[1, "a"], [2, "b"], [3, "C"], [4, "d"]]);
  } finally {
    await table.release();
    await log.close();
    await rmrf(dir);
  }
});

Deno.test("iceberg table whose mayCommit answers false creates no version; once it answers true the rows are committed, each once", async () => {
  const dir = await tempDir();
  const log = await leaderLog(dir);
  const rep = log.replication!;
  let leads = false;
  let asked = 0;
  const table = IcebergTable.start(log, "t", null, {
    pollMs: 10,
    mayCommit: () => {
      asked++;
      return leads;
    },
  });
  try {
    log.appendMany([row("a"), row("b")]).catch(() => {});
    await log.flush();
    rep.commitThrough(3);
    await log.roll();
    await log.chunks.settled();
    await until(() => asked >= 1 && table.state !== null, 30_000, "the worker to ask and stop");
    // Refused before the table's first version: nothing was created.
    assertEquals(table.state?.lastError, null);
    assertEquals(table.state?.commits, 0);
    const made = await Array.fromAsync(Deno.readDir(`${dir}/iceberg/metadata`)).catch(() => []);
    assertEquals(made.filter((e) => e.name.endsWith(".metadata.json")), []);
    leads = true;
    log.appendMany([row("c")]).catch(() => {});
    await log.flush();
    rep.commitThrough(4);
    await log.roll(); // a new chunk: the table is brought up to date again
    await log.chunks.settled();
    assertEquals(await table.settled(30_000), true);
    assertEquals(table.state?.lastOffset, 3);
    assertEquals(await tableRows(dir), [[1, "a"], [2, "b"], [3, "c"]]);
  } finally {
    await table.release();
    await log.close();
    await rmrf(dir);
  }
});
