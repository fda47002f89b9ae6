// A stream whose chunk worker's thread stopped (an error a service on the
// process's background thread did not catch) still serves and takes rows,
// and /_/health says so: it is degraded, "chunks_stopped", as nothing is
// chunked, archived or dropped by retention until it is opened again.
import { assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { stopBackgroundThread } from "../../harness/stop_background_thread.ts";
import { rmrf, tempDir } from "../../harness/util.ts";

const SCHEMA = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };

async function health(url: string): Promise<Record<string, unknown>> {
  const r = await fetch(`${url}/_/health`);
  assertEquals(r.status, 200);
  return await r.json();
}

Deno.test("/_/health lists a stream whose chunk worker stopped as degraded (chunks_stopped); it still takes rows", async () => {
  const root = await tempDir();
  try {
    const stream = await Stream.open("t", {
      schema: SCHEMA,
      root,
      logOptions: { timers: false, chunks: true },
    });
    const server = serve([stream], { port: 0, onListen: () => {} });
    try {
      await stream.sendMany([{ v: 1 }]);
      await stream.log!.roll();
      await stream.log!.chunks.settled();
      assertEquals(await health(server.url), { ok: true, streams: 1 });
      await stopBackgroundThread();
      assertEquals(await health(server.url), {
        ok: true,
        streams: 1,
        degraded: [{ stream: "t", why: "chunks_stopped" }],
      });
      await stream.sendMany([{ v: 2 }]);
      assertEquals(stream.log!.endOffset, 3);
    } finally {
      await server.shutdown();
    }
  } finally {
    await rmrf(root);
  }
});
