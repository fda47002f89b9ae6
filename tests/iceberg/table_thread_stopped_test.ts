// An Iceberg table whose worker's thread stopped (an error a service on the
// process's background thread did not catch): the table says so once, and
// its close — and a cluster leader's release, when its leadership ends —
// lets go at once instead of waiting for an answer that cannot come, so the
// stream's log still closes.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { stopBackgroundThread } from "../harness/stop_background_thread.ts";
import { Logger } from "../../common/logger.ts";
import { Log } from "../../log/mod.ts";
import { writeSchemaHistory } from "../../log/schema_history.ts";
import { IcebergTable } from "../../iceberg/table_link.ts";

const SCHEMA = { type: "object", properties: { v: { type: "string" } }, required: ["v"] };

Deno.test("iceberg table whose worker's thread stopped closes and releases at once, and its log closes", async () => {
  const root = await tempDir();
  const lines: string[] = [];
  const logger = new Logger({ format: "json", level: "info", write: (l) => lines.push(l) });
  try {
    const opened: [IcebergTable, Log][] = [];
    for (const name of ["closed", "released"]) {
      const log = await Log.open(`${root}/${name}`, { name, chunks: true, timers: false, logger });
      await writeSchemaHistory(log.dir, [{ from: 1, schema: SCHEMA }]);
      await log.append(JSON.stringify({ v: "a" }));
      await log.roll();
      await log.chunks.settled();
      const table = IcebergTable.start(log, name, null, { logger, pollMs: 10 });
      assertEquals(await table.settled(30_000), true);
      assertEquals(table.state?.lastOffset, 1);
      opened.push([table, log]);
    }
    await stopBackgroundThread();
    const said = lines.map((l) => JSON.parse(l)).filter((e) => e.event === "iceberg_worker_failed");
    assertEquals(said.map((e) => e.stream).sort(), ["closed", "released"], lines.join("\n"));
    assert(/a service failed/.test(said[0].error), said[0].error);
    const [[closed, closedLog], [released, releasedLog]] = opened;
    await closed.close(10_000);
    await released.release();
    await closedLog.close();
    await releasedLog.close();
  } finally {
    await rmrf(root);
  }
});
