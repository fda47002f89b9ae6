// A fenced restore onto a new machine keeps the producer table: the journal is
// archived beside the manifest and restored with it.
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { startS3, stopS3 } from "../../harness/s3.ts";
import { Stream } from "../../../mod.ts";
import { commitPublish } from "../../../server/publish/commit.ts";
import { SCHEMA } from "../../harness/publish_in_process.ts";

const rows = (seq: number) => [{ sym: `r${seq}`, px: seq }];

Deno.test("publish: a fenced restore keeps the producer table; a resend after it is a duplicate", async () => {
  const s3 = await startS3();
  const rootA = await tempDir();
  const rootB = await tempDir();
  const archive = { uri: "s3://archive/producers", endpoint: s3.endpoint, forcePathStyle: true };
  try {
    const a = await Stream.open("t", {
      schema: SCHEMA,
      root: rootA,
      archive,
      logOptions: { timers: false },
    });
    for (let seq = 1; seq <= 3; seq++) {
      assertEquals((await commitPublish(a, rows(seq), { producer: "p", seq })).kind, "ack");
    }
    await a.close(); // a planned stop: everything reaches the archive
    const { stream: b, report } = await Stream.restore("t", {
      schema: SCHEMA,
      root: rootB,
      archive,
    });
    try {
      assertEquals(report.archivedThrough, 3);
      assertEquals(b.log!.producers.state("p"), { seq: 3, first: 3, last: 3 });
      const dup = await commitPublish(b, rows(3), { producer: "p", seq: 3 });
      assertEquals(dup, { kind: "ack", first: 3, last: 3, duplicate: true });
      const next = await commitPublish(b, rows(4), { producer: "p", seq: 4 });
      assert(next.kind === "ack" && next.first === report.nextOffset, JSON.stringify(next));
    } finally {
      await b.close();
    }
  } finally {
    await rmrf(rootA);
    await rmrf(rootB);
    await stopS3(s3);
  }
});
