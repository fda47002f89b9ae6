// A cluster's archive (docs/SPEC.md §11.12), against a real S3 server
// (s3rver): a log whose node does not lead (archiveTerm null) uploads
// nothing; leading term 3 it uploads, each manifest carrying the term; once
// the archive holds a later term's manifest it uploads no manifest over it,
// and says why.
import { assert, assertEquals } from "../harness/assert.ts";
import { Log } from "../../log/mod.ts";
import { ArchiveStore } from "../../log/chunk/archive.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { startS3, stopS3 } from "../harness/s3.ts";
import { join } from "node:path";

Deno.test("archive of a cluster's log: nothing while not leading, the term in each manifest, never over a later term's", async () => {
  const s3 = await startS3();
  const dir = await tempDir();
  const archive = { uri: "s3://archive/prod", endpoint: s3.endpoint, forcePathStyle: true };
  const store = new ArchiveStore(archive, "t");
  try {
    const log = await Log.open(join(dir, "t"), { archive, timers: false, archiveWaitMs: 0 });
    const rows = async (n: number) => {
      await log.appendMany(Array.from({ length: n }, (_, k) => `{"k":${k}}`));
      await log.roll();
    };
    log.chunks.setRetention({ archiveTerm: null });
    await rows(10);
    // Chunked locally, never uploaded: the wait runs out.
    assertEquals(await log.archive.settled(1500), false);
    assertEquals(await store.getManifest(), null);
    assertEquals((await store.listChunks()).size, 0);
    log.chunks.setRetention({ archiveTerm: 3 });
    assert(await log.archive.settled(20_000), JSON.stringify(log.archive.state));
    const m3 = (await store.getManifest())!;
    assertEquals([m3.term, m3.through], [3, 10]);
    // Another node leads term 5 and archived its manifest.
    await store.putManifest({ ...m3, term: 5, generation: m3.generation + 1 });
    await rows(10);
    assertEquals(await log.archive.settled(3000), false);
    assert(
      /holds the manifest of term 5; this node led term 3/.test(log.archive.state?.lastError ?? ""),
      JSON.stringify(log.archive.state),
    );
    const after = (await store.getManifest())!;
    assertEquals([after.term, after.through], [5, 10]);
    await log.close();
  } finally {
    store.close();
    await rmrf(dir);
    await stopS3(s3);
  }
});
