// A log whose chunk worker's thread stopped (an error a service on the
// process's background thread did not catch): the log says so once, still
// takes rows, and still closes — the close asks the worker nothing it
// would wait for — and opened again it chunks on a new thread. A stream's
// close (and a cluster node's reopening of a stopped stream) goes through
// this close.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { stopBackgroundThread } from "../harness/stop_background_thread.ts";
import { Logger } from "../../common/logger.ts";
import { Log } from "../../log/mod.ts";

Deno.test("log whose chunk worker's thread stopped closes, and opened again chunks on a new thread", async () => {
  const root = await tempDir();
  const dir = `${root}/t`;
  const lines: string[] = [];
  const logger = new Logger({ format: "json", level: "info", write: (l) => lines.push(l) });
  try {
    const log = await Log.open(dir, { chunks: true, timers: false, logger });
    await log.append("{}");
    await log.roll();
    await log.chunks.settled();
    assertEquals(log.chunks.manifest?.chunks.length, 1);
    await stopBackgroundThread();
    const said = lines.map((l) => JSON.parse(l)).filter((e) => e.event === "chunk_worker_error");
    assertEquals(said.length, 1, lines.join("\n"));
    assert(/chunk worker failed: .*a service failed/.test(said[0].message), said[0].message);
    // Rows are still taken; a segment sealed now is not chunked (no worker).
    await log.append("{}");
    await log.roll();
    await log.chunks.settled();
    assertEquals(log.chunks.manifest?.chunks.length, 1);
    await log.close();
    // Opened again: a new thread, the sealed segment chunked.
    const again = await Log.open(dir, { chunks: true, timers: false, logger });
    await again.chunks.settled();
    assertEquals(again.chunks.manifest?.chunks.at(-1)?.last, 2);
    assertEquals(again.endOffset, 3);
    await again.close();
  } finally {
    await rmrf(root);
  }
});
