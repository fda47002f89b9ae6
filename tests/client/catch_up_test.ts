import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { join } from "node:path";
import { connect, CorruptChunk, MemoryCursor, NotReplayable } from "../../client/mod.ts";
import { BackedUpCursor, S3ChunkSource, S3Cursor } from "../../client/s3.ts";
import { FileCursor } from "../../client/file_cursor.ts";
import { startS3, stopS3 } from "../harness/s3.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { fixture, line, type TradeRow } from "../harness/client_server.ts";

async function sealed(f: Awaited<ReturnType<typeof fixture>>, to: number): Promise<void> {
  for (let i = 1; i <= to; i += 500) {
    await f.send(i, Math.min(to, i + 499));
    await f.stream.log!.roll();
  }
  await f.stream.log!.chunks.settled();
}

Deno.test("catchUp reads a too_old gap from the chunks over HTTP, then goes live", async () => {
  const f = await fixture({ maxReplay: 100 });
  try {
    await sealed(f, 3000);
    await f.send(3001, 3050); // an unsealed tail
    await assertRejects(() => connect(f.url, { offset: 1 }), NotReplayable);
    const subscribesBefore = f.stream.stats.subscribes;
    const sub = await connect<TradeRow>(f.url, { offset: 1, catchUp: true });
    assertEquals(sub.greeting.replay, [1, 3051]);
    const got: number[] = [];
    const lines: string[] = [];
    let sentLive = false;
    for await (const [offset, line] of sub.lines()) {
      got.push(offset!);
      lines.push(line);
      if (offset === 3050 && !sentLive) {
        sentLive = true;
        await f.send(3051, 3060);
      }
      if (offset === 3060) break;
    }
    await sub.close();
    assertEquals(got, Array.from({ length: 3060 }, (_, i) => i + 1));
    // Rows from chunks are the very lines the socket sends.
    assertEquals(lines[0], line(1));
    assertEquals(lines[2999], line(3000));
    // The socket was opened once, after the chunks were read.
    assertEquals(f.stream.stats.subscribes - subscribesBefore, 1);
  } finally {
    await f.stop();
  }
});

Deno.test("catchUp refuses a chunk whose bytes do not match its SHA-256", async () => {
  const f = await fixture({ maxReplay: 10 });
  try {
    await sealed(f, 1000);
    const c = f.stream.log!.chunks.manifest!.chunks[0];
    const path = join(f.stream.log!.dir, "chunks", `${c.sha256}.ndjson.zst`);
    const bytes = await Deno.readFile(path);
    bytes[bytes.length >> 1] ^= 0x40;
    await Deno.writeFile(path, bytes);
    const sub = await connect(f.url, { offset: 1, catchUp: true });
    const err = await assertRejects(async () => {
      for await (const _ of sub) { /* reading */ }
    }, CorruptChunk);
    assertEquals(err.sha256, c.sha256);
    assert(err.message.includes(c.sha256), err.message);
  } finally {
    await f.stop();
  }
});

Deno.test("catchUp with an archive reads what the server evicted; cursorUri moves a consumer to a new machine", async () => {
  const s3 = await startS3();
  const archive = { uri: "s3://archive/client", endpoint: s3.endpoint, forcePathStyle: true };
  const f = await fixture({
    maxReplay: 10,
    archive,
    logOptions: { timers: false, chunks: { fanIn: 1000, retainBytes: 1 } },
  });
  const dirA = await tempDir();
  const dirB = await tempDir();
  const source = new S3ChunkSource(archive, "trades");
  try {
    await sealed(f, 2000);
    assert(await f.stream.log!.archive.settled(30_000), "archived");
    await f.stream.log!.chunks.settled(true); // retention drops the local copies
    await f.send(2001, 2010); // an unsealed tail: the server holds only these
    assertEquals(f.stream.log!.earliest, 2001);
    const refused = await assertRejects(() => connect(f.url, { offset: 1 }), NotReplayable);
    assertEquals(refused.why, "evicted");

    // Machine A: a file cursor backed up to S3.
    const remote = new S3Cursor("s3://archive/consumers/a.cursor", {
      endpoint: s3.endpoint,
      forcePathStyle: true,
    });
    const cursorA = new BackedUpCursor(new FileCursor(join(dirA, "c")), remote, {
      uploadEveryMs: 50,
    });
    const subA = await connect(f.url, {
      offset: 1,
      cursor: cursorA,
      catchUp: { archive: source },
      saveEveryRows: 100,
    });
    let last = 0;
    for await (const [offset] of subA) {
      assertEquals(offset, last + 1);
      last = offset!;
      if (offset === 1500) break;
    }
    await subA.close();
    await cursorA.close();
    // Machine B: no local cursor; resumes from the copy in S3.
    const cursorB = new BackedUpCursor(new FileCursor(join(dirB, "c")), remote);
    const subB = await connect(f.url, { cursor: cursorB, catchUp: { archive: source } });
    const [[first]] = await (async () => {
      const out: [number | null, unknown][] = [];
      for await (const r of subB) {
        out.push(r);
        break;
      }
      return out;
    })();
    await subB.close();
    await cursorB.close();
    // The current row (1500) was not marked handled when the loop was left: it comes again.
    assertEquals(first, 1500);
    remote.close();
  } finally {
    source.close();
    await f.stop();
    await rmrf(dirA);
    await rmrf(dirB);
    await stopS3(s3);
  }
});

Deno.test("catchUp keeps the stream id: chunks of another stream are refused", async () => {
  const f = await fixture({ maxReplay: 10 });
  try {
    await sealed(f, 500);
    const cursor = new MemoryCursor();
    await cursor.save({ offset: 1, streamId: "0".repeat(32) });
    const err = await assertRejects(() => connect(f.url, { cursor, catchUp: true }), NotReplayable);
    assertEquals(err.why, "other_stream");
  } finally {
    await f.stop();
  }
});

Deno.test("tail --catch-up prints the chunks' rows then the live ones", async () => {
  const f = await fixture({ maxReplay: 10 });
  try {
    await sealed(f, 1000);
    await f.send(1001, 1005);
    const cli = new URL("../../cli.ts", import.meta.url).pathname;
    const proc = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", cli, "tail", f.url, "--offset", "1", "--catch-up"],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    const deadline = Date.now() + 20_000;
    while (text.split("\n").length <= 1005 && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    proc.kill("SIGINT");
    reader.releaseLock();
    await proc.stdout.cancel().catch(() => {});
    const status = await proc.status;
    await proc.stderr.cancel().catch(() => {});
    const lines = text.split("\n").filter(Boolean).slice(0, 1005);
    assertEquals(lines.length, 1005);
    assertEquals(lines.map((l) => JSON.parse(l)[0]), Array.from({ length: 1005 }, (_, i) => i + 1));
    assertEquals(lines[999], line(1000));
    assertEquals(status.code, 0);
  } finally {
    await f.stop();
  }
});

Deno.test("catchUp with an archive starts a since= below the server's rows where the archive reaches the time", async () => {
  const s3 = await startS3();
  const archive = { uri: "s3://archive/since", endpoint: s3.endpoint, forcePathStyle: true };
  let now = 0;
  const f = await fixture({
    archive,
    logOptions: { clock: () => now, timers: false, chunks: { fanIn: 1000, retainBytes: 1 } },
  });
  const source = new S3ChunkSource(archive, "trades");
  try {
    // Four chunks of 500 rows, committed at 1, 2, 3 and 4 s; retention then
    // drops every local chunk, so only the archive holds them.
    for (let k = 0; k < 4; k++) {
      now = (k + 1) * 1000;
      await f.send(500 * k + 1, 500 * k + 500);
      await f.stream.log!.roll();
    }
    await f.stream.log!.chunks.settled();
    assert(await f.stream.log!.archive.settled(30_000), "archived");
    await f.stream.log!.chunks.settled(true);
    now = 5000;
    await f.send(2001, 2010);
    assertEquals(f.stream.log!.earliest, 2001);
    const since = 2_500_000; // between the 2 s and the 3 s commits
    const refused = await assertRejects(() => connect(f.url, { since }), NotReplayable);
    assertEquals(refused.why, "evicted");
    // With the archive: from the first archived chunk that reaches 2.5 s (rows
    // 1001..1500, committed at 3 s), then live, no gap.
    const sub = await connect(f.url, { since, catchUp: { archive: source } });
    const got: number[] = [];
    for await (const [offset] of sub) {
      got.push(offset!);
      if (offset === 2010) break;
    }
    await sub.close();
    assertEquals(got, Array.from({ length: 1010 }, (_, k) => 1001 + k));
  } finally {
    source.close();
    await f.stop();
    await stopS3(s3);
  }
});
