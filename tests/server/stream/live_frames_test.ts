// Live frames are built at fan-out, from the committed rows, and only when a
// subscriber is live: what subscribers see must not change.
import { assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, s: { type: "string" } },
  required: ["i", "s"],
};
const row = (i: number) => ({ i, s: "é".repeat(i % 4) });
const json = (i: number) => JSON.stringify(row(i));

Deno.test("stream frames rows committed after a quiet spell with their offsets, live and replayed alike", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const url = `ws://127.0.0.1:${server.addr.port}/t`;
  try {
    // Nobody live: rows are stored, no frame is needed.
    for (let i = 1; i <= 40; i++) await stream.send(row(i));
    await stream.sendMany([41, 42, 43, 44, 45].map(row));
    const single = await TestSub.open(url);
    const batch = await TestSub.open(`${url}?frames=batch`);
    // Concurrent single sends and a sendMany share commits.
    await Promise.all([
      ...[46, 47, 48].map((i) => stream.send(row(i))),
      stream.sendMany([49, 50, 51, 52].map(row)),
      stream.send(row(53)),
    ]);
    const want = Array.from({ length: 8 }, (_, k) => `[${46 + k},${json(46 + k)}]`);
    await single.waitLines(8);
    await batch.waitLines(8);
    assertEquals(single.lines, want);
    assertEquals(batch.lines, want);
    assertEquals(single.frames.length, 1 + 8, "single frames: one per row");
    // The log's replay of the same offsets is the same bytes.
    const replay = await TestSub.open(`${url}?offset=1&frames=batch`);
    await replay.waitLines(53);
    assertEquals(replay.lines, Array.from({ length: 53 }, (_, k) => `[${k + 1},${json(k + 1)}]`));
    await Promise.all([single.close(), batch.close(), replay.close()]);
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("stream fans out an ephemeral turn's rows as [null,msg] frames, one batch per turn", async () => {
  const stream = await Stream.open("e", { schema: SCHEMA });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const url = `ws://127.0.0.1:${server.addr.port}/e`;
  try {
    // Nobody live: the rows go nowhere.
    for (let i = 1; i <= 3; i++) await stream.send(row(i));
    const single = await TestSub.open(url);
    const batch = await TestSub.open(`${url}?frames=batch`);
    // One turn: three sends and a sendMany, coalesced into one fan-out.
    void stream.send(row(4));
    void stream.send(row(5));
    void stream.sendMany([6, 7].map(row));
    void stream.send(row(8));
    const want = [4, 5, 6, 7, 8].map((i) => `[null,${json(i)}]`);
    await single.waitLines(5);
    await batch.waitLines(5);
    assertEquals(single.lines, want);
    assertEquals(batch.lines, want);
    assertEquals(batch.frames.length, 1 + 1, "batch: one frame for the turn");
    assertEquals(stream.stats.rowsAppended, 8);
    await Promise.all([single.close(), batch.close()]);
  } finally {
    await server.shutdown();
    await stream.close();
  }
});
