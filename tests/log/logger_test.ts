// What the log cannot tell a caller goes to LogOptions.logger as events.
import { assert, assertEquals } from "../harness/assert.ts";
import { join } from "node:path";
import { Log } from "../../log/mod.ts";
import { Logger } from "../../common/logger.ts";
import { rmrf, tempDir } from "../harness/util.ts";

Deno.test("log reports a chunk worker error to its logger as chunk_worker_error", async () => {
  const dir = await tempDir();
  try {
    const lines: string[] = [];
    const logger = new Logger({ format: "json", write: (l) => lines.push(l) });
    const log = await Log.open(dir, { chunks: true, timers: false, logger });
    await log.append("{}");
    // The chunks folder becomes a file: the worker cannot write the chunk.
    await Deno.remove(join(dir, "chunks"), { recursive: true });
    await Deno.writeTextFile(join(dir, "chunks"), "");
    await log.roll();
    await log.chunks.settled();
    assert(log.chunks.error !== null, "the worker reported no error");
    const events = lines.map((l) => JSON.parse(l));
    const e = events.find((x) => x.event === "chunk_worker_error");
    assert(e, `no chunk_worker_error in ${lines.join("\n")}`);
    assertEquals(e.level, "error");
    assertEquals(e.dir, dir);
    assertEquals(e.msg, `streamcast: chunk worker: ${log.chunks.error}`);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});
