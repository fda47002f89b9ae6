import { assert, assertEquals } from "../harness/assert.ts";
import { serve, Stream } from "../../mod.ts";
import { batchRows, connectArrow } from "../../arrow/subscription.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { TestSub } from "../harness/subscriber.ts";

const SCHEMA = {
  type: "object",
  properties: {
    ts: { type: "integer" },
    sym: { type: "string" },
    px: { type: ["number", "null"] },
    side: { type: "integer", format: "int32" },
    ok: { type: "boolean" },
  },
  required: ["ts", "sym", "px", "side", "ok"],
};
const row = (i: number) => ({
  ts: 1_790_000_000_000_000 + i,
  sym: `S${i % 3}`,
  px: i % 5 ? i / 4 : null,
  side: i % 2,
  ok: i % 3 === 0,
});

Deno.test("frames=arrow carries the same rows and offsets as JSON frames across replay and live", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root,
    maxReplay: null,
    logOptions: { segmentBytes: 16 * 1024 },
  });
  const server = serve([stream], { port: 0, onListen: () => {} });
  try {
    for (let i = 1; i <= 2000; i += 100) {
      await stream.sendMany(Array.from({ length: 100 }, (_, k) => row(i + k)));
    }
    await stream.log!.chunks.settled();
    const url = `ws://127.0.0.1:${server.addr.port}/t`;
    const json = await TestSub.open(`${url}?offset=1&frames=batch`);
    const arrow = await connectArrow(url, { offset: 1 });
    assertEquals(arrow.greeting.frames, "arrow");
    assertEquals(arrow.schema.fields.map((f) => f.name), [
      "offset",
      "ts",
      "sym",
      "px",
      "side",
      "ok",
    ]);
    // Live rows after the replay.
    for (let i = 2001; i <= 2100; i += 10) {
      await stream.sendMany(Array.from({ length: 10 }, (_, k) => row(i + k)));
    }
    const got: [number | null, Record<string, unknown>][] = [];
    for await (const batch of arrow) {
      got.push(...batchRows(batch));
      if (got.length >= 2100) break;
    }
    arrow.close();
    await json.waitLines(2100);
    assertEquals(got.length, 2100);
    const fromJson = json.lines.map((l) => JSON.parse(l));
    for (let i = 0; i < 2100; i++) {
      assertEquals(got[i][0], fromJson[i][0]);
      assertEquals(got[i][1], fromJson[i][1]);
    }
    assert(stream.stats.bytesSent > 0);
    await json.close();
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});
