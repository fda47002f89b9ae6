// Retention drops the log's oldest rows; a keyed stream's snapshot still
// serves each key's latest row (the index holds the rows themselves), over
// ?snapshot=1 and GET /latest, and after a restart (from the key file) too.
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { serve, Stream } from "../../../mod.ts";

const SCHEMA = {
  type: "object",
  properties: { sym: { type: "string" }, n: { type: "integer" }, pad: { type: "string" } },
  required: ["sym", "n", "pad"],
};

async function open(root: string): Promise<Stream> {
  return await Stream.open("px", {
    schema: SCHEMA,
    root,
    key: ["sym"],
    logOptions: { timers: false, sealEveryMs: 0, segmentBytes: 1024, chunks: { fanIn: 1000 } },
  });
}

Deno.test("key snapshot serves rows retention dropped from the log, after a restart too", async () => {
  const root = await tempDir();
  let stream = await open(root);
  try {
    // Keys old0..old4 only at the start; k0..k2 all along.
    let n = 0;
    const row = (sym: string) => ({ sym, n: ++n, pad: "x".repeat(60) });
    await stream.sendMany(["old0", "old1", "old2", "old3", "old4"].map(row));
    for (let g = 0; g < 20; g++) await stream.sendMany(["k0", "k1", "k2"].map(row));
    const log = stream.log!;
    await log.roll();
    await log.chunks.settled();
    const chunks = log.chunks.manifest!.chunks;
    assert(chunks.length >= 3, `${chunks.length} chunks`);
    log.chunks.setRetention({ retainBytes: chunks.at(-1)!.bytes });
    await log.chunks.settled(true);
    assert(log.earliest! > 5, `rows 1..5 dropped (earliest ${log.earliest})`);
    const want = stream.snapshot() as { end: number; lines: string[] };
    assertEquals(want.lines.length, 8);
    assertEquals(want.lines.slice(0, 5).map((l) => JSON.parse(l)[0]), [1, 2, 3, 4, 5]);

    const server = serve([stream], { port: 0, onListen: () => {} });
    try {
      const http = `http://127.0.0.1:${server.addr.port}`;
      const sub = await TestSub.open(`ws://127.0.0.1:${server.addr.port}/px?snapshot=1`);
      await sub.waitLines(8);
      assertEquals(sub.lines, want.lines);
      assertEquals(sub.greeting!.snapshot, { end: want.end, keys: 8 });
      await sub.close();
      const res = await fetch(`${http}/px/latest?key=old0`);
      assertEquals(await res.text(), `${want.lines[0]}\n`);
    } finally {
      await server.shutdown();
    }
    // A restart: the key file saved at close holds what the log no longer does.
    await stream.close();
    stream = await open(root);
    assertEquals(stream.snapshot(), want);
  } finally {
    await stream.close();
    await rmrf(root);
  }
});
