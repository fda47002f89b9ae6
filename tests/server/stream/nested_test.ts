// Nested values (issue 19): object and array columns reach subscribers exactly
// as published — live, replay, chunks over HTTP, the S3 archive and catch-up.
import { assert, assertEquals } from "../../harness/assert.ts";
import { zstdDecompressSync } from "node:zlib";
import { serve, Stream } from "../../../mod.ts";
import { connect } from "../../../client/mod.ts";
import { S3ChunkSource } from "../../../client/s3.ts";
import { rmrf, rng, tempDir } from "../../harness/util.ts";
import { startS3, stopS3 } from "../../harness/s3.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { BOOK, bookLine, stored } from "../../harness/book.ts";

Deno.test("nested rows round-trip byte-exact through live, replay, chunks, the archive and catch-up", async () => {
  const seed = Date.now() % 100_000;
  console.log(`nested round-trip seed ${seed}`);
  const random = rng(seed);
  const s3 = await startS3();
  const root = await tempDir();
  const archive = { uri: "s3://archive/nested", endpoint: s3.endpoint, forcePathStyle: true };
  const lines = Array.from({ length: 120 }, (_, i) => bookLine(i + 1, random));
  const frames = lines.map((l, i) => `[${i + 1},${stored(l)}]`);
  const source = new S3ChunkSource(archive, "book");
  try {
    const stream = await Stream.open("book", {
      schema: BOOK,
      root,
      archive,
      maxReplay: 10,
      // Chunks are ~600 bytes: retention keeps the newest one to three locally
      // whether or not the archive has taken the rest.
      logOptions: { timers: false, chunks: { fanIn: 1000, retainBytes: 2000 } },
    });
    const server = serve([stream], { port: 0, onListen: () => {} });
    const ws = `ws://127.0.0.1:${server.addr.port}/book`;
    const http = `http://127.0.0.1:${server.addr.port}/book`;
    try {
      const live = await TestSub.open(`${ws}?frames=batch`);
      for (let i = 0; i < 100; i += 20) {
        await stream.sendMany(lines.slice(i, i + 20).map((l) => JSON.parse(l)));
        await stream.log!.roll();
      }
      await live.waitLines(100);
      assertEquals(live.lines, frames.slice(0, 100), "live frames are the stored bytes");
      await live.close();

      // Chunks over HTTP: every line is the frame.
      await stream.log!.chunks.settled();
      const manifest = await (await fetch(`${http}/manifest`)).json();
      const chunkLines: string[] = [];
      for (const c of manifest.chunks) {
        const bytes = new Uint8Array(
          await (await fetch(`${http}/chunks/${c.sha256}`)).arrayBuffer(),
        );
        const text = new TextDecoder().decode(zstdDecompressSync(bytes));
        chunkLines.push(...text.split("\n").filter((l) => l !== ""));
      }
      // (Retention keeps only the newest chunks locally; the oldest go once archived.)
      assert(chunkLines.length >= 20, `chunks hold ${chunkLines.length} rows`);
      const first = JSON.parse(chunkLines[0])[0];
      assertEquals(chunkLines, frames.slice(first - 1, first - 1 + chunkLines.length));

      // The archive, then catch-up from it once the local chunks are gone.
      assert(await stream.log!.archive.settled(30_000), "archived");
      await stream.log!.chunks.settled(true);
      await stream.sendMany(lines.slice(100).map((l) => JSON.parse(l)));
      const from = Math.max(stream.log!.earliest!, 121 - 10); // within maxReplay
      const replay = await TestSub.open(`${ws}?offset=${from}&frames=batch`);
      await replay.waitLines(121 - from);
      assertEquals(replay.lines, frames.slice(from - 1), "replay from the log");
      await replay.close();

      const sub = await connect(ws, { offset: 1, catchUp: { archive: source } });
      const got: string[] = [];
      for await (const [offset, msg] of sub) {
        got.push(`[${offset},${JSON.stringify(msg)}]`);
        if (offset === 120) break;
      }
      await sub.close();
      assertEquals(got, frames, "catch-up from the archive, then live");
    } finally {
      await server.shutdown();
    }
  } finally {
    source.close();
    await stopS3(s3);
    await rmrf(root);
  }
});

Deno.test("where= on a nested column is refused 4400 before any frame", async () => {
  const stream = Stream.ephemeral("book", { schema: BOOK });
  const server = serve([stream], { port: 0, onListen: () => {} });
  try {
    const where = encodeURIComponent(JSON.stringify({ bids: [1] }));
    const sub = await TestSub.open(`ws://127.0.0.1:${server.addr.port}/book?where=${where}`);
    const closed = await sub.done;
    assertEquals(closed.code, 4400);
    assert(closed.reason.includes("where: column bids is nested"), closed.reason);
    assertEquals(sub.greeting, null);
  } finally {
    await server.shutdown();
  }
});

Deno.test("a nested row that does not fit is refused by name and nothing is stored", async () => {
  const root = await tempDir();
  try {
    const stream = await Stream.open("book", { schema: BOOK, root });
    const good = JSON.parse(bookLine(1, rng(1)));
    const cases: [unknown, string][] = [
      [{ ...good, bids: [[1, "2"]] }, "/bids/0/1: must be number"],
      [{ ...good, bids: [[1]] }, "/bids/0: must NOT have fewer than 2 items"],
      [{ ...good, asks: [{ px: 1 }] }, "/asks/0: must have required property qty"],
      [{ ...good, meta: [] }, "/meta: must be object or null"],
      [
        { ...good, meta: { when: new Date(0) } },
        "/meta/when: must be a plain JSON object, got Date",
      ],
      [{ ...good, meta: { n: Infinity } }, "/meta/n: must be a JSON value, got Infinity"],
    ];
    for (const [row, message] of cases) {
      const err = await stream.send(row).then(() => null, (e) => e as Error);
      assert(err !== null && err.message.endsWith(message), `${err?.message} / ${message}`);
    }
    assertEquals(await stream.send(good), 1);
    await stream.close();
  } finally {
    await rmrf(root);
  }
});
