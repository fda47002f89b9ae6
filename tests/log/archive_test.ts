import { assert, assertEquals } from "../harness/assert.ts";
import { Log } from "../../log/mod.ts";
import { ArchiveStore } from "../../log/chunk/archive.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { startS3, stopS3 } from "../harness/s3.ts";
import { crashPayload } from "./_crash_payload.ts";
import { join } from "node:path";

Deno.test("archive holds exactly the local chunks and manifest; an S3 outage delays it, never the appends", async () => {
  const s3 = await startS3();
  const dir = await tempDir();
  const archive = { uri: "s3://archive/prod", endpoint: s3.endpoint, forcePathStyle: true };
  const store = new ArchiveStore(archive, "trades");
  try {
    const log = await Log.open(join(dir, "trades"), {
      archive,
      chunks: { fanIn: 1000 },
      timers: false,
      archiveWaitMs: 2000,
    });
    for (let o = 1; o <= 300; o += 30) {
      await log.appendMany(Array.from({ length: 30 }, (_, k) => crashPayload(o + k)));
      await log.roll();
    }
    assert(await log.archive.settled(20_000), `archive: ${JSON.stringify(log.archive.state)}`);
    const local = log.chunks.manifest!;
    const remote = (await store.getManifest())!;
    assertEquals(remote.chunks, local.chunks);
    assertEquals(remote.stream_id, log.streamId);
    for (const c of local.chunks) {
      const bytes = await store.getChunkBytes(c.sha256);
      assertEquals(
        bytes,
        await Deno.readFile(join(dir, "trades", "chunks", `${c.sha256}.ndjson.zst`)),
      );
    }
    // Outage: the store goes away; appends still complete at full speed.
    await s3.stop();
    const t0 = performance.now();
    for (let o = 301; o <= 600; o += 30) {
      await log.appendMany(Array.from({ length: 30 }, (_, k) => crashPayload(o + k)));
      await log.roll();
    }
    await log.chunks.settled();
    const appendMs = performance.now() - t0;
    assert(appendMs < 10_000, `appends took ${appendMs} ms during the outage`);
    assertEquals(log.endOffset, 601);
    await new Promise((r) => setTimeout(r, 500));
    const during = log.archive.state!;
    assert(during.through < 600, "the archive is behind during the outage");
    assert(during.lastError !== null, "the outage is reported");
    assert(!during.lastError!.includes("S3RVER"), "no credential in errors");
    // Back: the archive catches up.
    await s3.start();
    assert(await log.archive.settled(30_000), `caught up: ${JSON.stringify(log.archive.state)}`);
    assertEquals((await store.getManifest())!.through, 600);
    await log.close();
  } finally {
    store.close();
    await rmrf(dir);
    await stopS3(s3);
  }
});
