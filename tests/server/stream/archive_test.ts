import { assert, assertEquals, assertRejects } from "../../harness/assert.ts";
import { FENCE, serve, Stream } from "../../../mod.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { startS3, stopS3 } from "../../harness/s3.ts";
import { TestSub } from "../../harness/subscriber.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, s: { type: "string" } },
  required: ["i", "s"],
};
const row = (i: number) => ({ i, s: `row ${i}` });

Deno.test("archive: replay_archive serves rows the local tier dropped; restore fences offsets", async () => {
  const s3 = await startS3();
  const rootA = await tempDir();
  const rootB = await tempDir();
  const archive = { uri: "s3://archive/failover", endpoint: s3.endpoint, forcePathStyle: true };
  try {
    // Producer A archives everything and keeps little locally.
    const a = await Stream.open("trades", {
      schema: SCHEMA,
      root: rootA,
      archive,
      replayArchive: true,
      maxReplay: null,
      logOptions: { timers: false, chunks: { fanIn: 1000, retainBytes: 1 } },
    });
    for (let i = 1; i <= 500; i += 50) {
      await a.sendMany(Array.from({ length: 50 }, (_, k) => row(i + k)));
      await a.log!.roll();
    }
    await a.sendMany(Array.from({ length: 20 }, (_, k) => row(501 + k)));
    assert(await a.log!.archive.settled(30_000), JSON.stringify(a.log!.archive.state));
    await a.log!.chunks.settled(true); // retention may now drop archived chunks
    const local = a.log!.chunks.manifest!;
    assert(local.chunks.length <= 1, `local chunks ${local.chunks.length}`);
    assertEquals(a.log!.earliest, 1, "the archive still serves offset 1");
    const head = a.head();
    assertEquals(head.archive, "s3://archive/failover");
    assert(!JSON.stringify(head).includes("S3RVER"), "no credentials in /head");
    const serverA = serve([a], { port: 0, onListen: () => {} });
    const sub = await TestSub.open(
      `ws://127.0.0.1:${serverA.addr.port}/trades?offset=1&frames=batch`,
    );
    assertEquals((sub.greeting!.log as { archive: string }).archive, "s3://archive/failover");
    await sub.waitLines(520);
    assertEquals(sub.offsets(), Array.from({ length: 520 }, (_, k) => k + 1));
    await sub.close();
    const streamId = a.streamId;
    // A planned stop: everything reaches the archive.
    await serverA.shutdown();

    // Producer B on a fresh root: the stream id is kept and offsets are fenced.
    await assertRejects(
      () => Stream.restore("trades", { schema: SCHEMA, root: rootA, archive }),
      Deno.errors.AlreadyExists,
    );
    const { stream: b, report } = await Stream.restore("trades", {
      schema: SCHEMA,
      root: rootB,
      archive,
      replayArchive: true,
      maxReplay: null,
      hydrate: true,
      logOptions: { timers: false },
    });
    assertEquals(b.streamId, streamId);
    assertEquals(report.archivedThrough, 520);
    assertEquals(report.nextOffset, 521 + FENCE);
    assertEquals(await b.send(row(9999)), 521 + FENCE);
    const serverB = serve([b], { port: 0, onListen: () => {} });
    // A consumer from A resumes on B with its cursor: a gap at the fence, no reissue.
    const resumed = await TestSub.open(
      `ws://127.0.0.1:${serverB.addr.port}/trades?offset=500&stream_id=${streamId}`,
    );
    await resumed.waitLines(22);
    assertEquals(resumed.offsets(), [
      ...Array.from({ length: 21 }, (_, k) => 500 + k),
      521 + FENCE,
    ]);
    assertEquals(JSON.parse(resumed.lines[0])[1], row(500));
    await resumed.close();
    await serverB.shutdown();
  } finally {
    await rmrf(rootA);
    await rmrf(rootB);
    await stopS3(s3);
  }
});
