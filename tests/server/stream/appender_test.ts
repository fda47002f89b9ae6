// A cluster leader reopened with rows the cluster had not committed: its
// live frames must carry each row's own offset while the commit index
// crosses the rows it never handed to the fan-out, and those it did.
import { assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";

const SCHEMA = { type: "object", properties: { v: { type: "string" } }, required: ["v"] };
const STREAM_ID = "0123456789abcdef0123456789abcdef";

async function openLeader(root: string): Promise<Stream> {
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root,
    maxReplay: null,
    logOptions: { replicated: true, streamId: STREAM_ID, timers: false },
  });
  const rep = stream.log!.replication!;
  rep.writable = true;
  await rep.beginTerm(rep.terms.length + 1);
  return stream;
}

Deno.test("a reopened leader frames each row with its own offset as the commit index crosses rows it never handed out", async () => {
  const root = await tempDir();
  // Term 1: rows 1..4 stored, 1..2 committed; then the process stops.
  let stream = await openLeader(root);
  const early = ["a", "b", "c", "d"].map((v) => stream.send({ v }));
  await stream.log!.flush();
  stream.log!.replication!.commitThrough(3);
  await Promise.all(early.slice(0, 2));
  stream.log!.replication!.failWaiters(new Error("the process stops"));
  await Promise.allSettled(early);
  await stream.close();

  // Term 2 on the same folder: rows 3..4 are on disk, not committed.
  stream = await openLeader(root);
  const rep = stream.log!.replication!;
  assertEquals([stream.log!.endOffset, rep.nextOffset], [3, 5]);
  const server = serve([stream], { port: 0, onListen: () => {} });
  const sub = await TestSub.open(`ws://127.0.0.1:${server.addr.port}/t?offset=1`);
  try {
    const sent = [stream.send({ v: "e" })]; // at 5
    await stream.log!.flush();
    rep.commitThrough(4); // row 3 alone: never handed here, and "e" is not it
    await until(() => stream.log!.endOffset === 4);
    sent.push(stream.send({ v: "f" })); // at 6
    await stream.log!.flush();
    rep.commitThrough(6); // 4 (on disk), 5 "e"
    rep.commitThrough(7); // 6 "f", handed here
    assertEquals(await Promise.all(sent), [5, 6]);
    sent.push(stream.send({ v: "g" })); // at 7
    await stream.log!.flush();
    rep.commitThrough(8);
    assertEquals(await sent[2], 7);
    await sub.waitLines(7);
    assertEquals(sub.lines, [
      `[1,{"v":"a"}]`,
      `[2,{"v":"b"}]`,
      `[3,{"v":"c"}]`,
      `[4,{"v":"d"}]`,
      `[5,{"v":"e"}]`,
      `[6,{"v":"f"}]`,
      `[7,{"v":"g"}]`,
    ]);
  } finally {
    sub.close();
    await server.shutdown();
    await stream.close();
    await rmrf(root);
  }
});
