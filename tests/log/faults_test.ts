import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { join } from "node:path";
import { Log, type LogIo, LogWriteError, verifyLog } from "../../log/mod.ts";
import { REAL_IO } from "../../log/options.ts";
import { DiskFullError, serve, Stream } from "../../mod.ts";
import { rmrf, tempDir, text, utf8 } from "../harness/util.ts";
import { TestSub } from "../harness/subscriber.ts";

function enospc(): Error {
  return Object.assign(new Error("No space left on device (os error 28)"), { code: "ENOSPC" });
}

/** Real I/O that can be told to fail the next write (after writing part of it) or sync. */
class FaultyIo implements LogIo {
  open = REAL_IO.open;
  truncate = REAL_IO.truncate;
  rename = REAL_IO.rename;
  remove = REAL_IO.remove;
  mkdir = REAL_IO.mkdir;
  syncDir = REAL_IO.syncDir;
  failWrite = false;
  failSync = false;
  async write(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
    if (this.failWrite) {
      this.failWrite = false;
      // A torn write: half of it reaches the file, then the disk is full.
      await REAL_IO.write(file, bytes.subarray(0, bytes.length >> 1));
      throw enospc();
    }
    await REAL_IO.write(file, bytes);
  }
  async syncData(file: Deno.FsFile): Promise<void> {
    if (this.failSync) {
      this.failSync = false;
      throw Object.assign(new Error("Input/output error (os error 5)"), { code: "EIO" });
    }
    await REAL_IO.syncData(file);
  }
}

async function rows(log: Log): Promise<string[]> {
  const r = log.reader(1);
  const out: string[] = [];
  while (true) {
    const b = await r.read();
    if (b.count === 0) break;
    for (let i = 0; i < b.count; i++) {
      out.push(`${b.offsets[i]}:${text(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]))}`);
    }
  }
  r.close();
  return out;
}

for (const fault of ["write", "sync"] as const) {
  Deno.test(`log fails a ${fault} fault loudly, keeps every acknowledged row, and goes on`, async () => {
    const dir = await tempDir();
    const io = new FaultyIo();
    try {
      const log = await Log.open(dir, { io, timers: false });
      const acked: string[] = [];
      for (let i = 1; i <= 50; i++) {
        await log.append(utf8(`{"i":${i}}`));
        acked.push(`${i}:{"i":${i}}`);
      }
      if (fault === "write") io.failWrite = true;
      else io.failSync = true;
      const failing = [log.append(utf8('{"lost":1}')), log.append(utf8('{"lost":2}'))];
      for (const p of failing) {
        const err = await assertRejects(() => p, LogWriteError);
        assert(
          err.message.includes(fault === "write" ? "No space left" : "Input/output error"),
          err.message,
        );
      }
      // The offsets of the failed appends were never acknowledged: reissued.
      assertEquals(await log.append(utf8('{"i":51}')), 51);
      acked.push(`51:{"i":51}`);
      assertEquals(await rows(log), acked);
      await log.close();
      assertEquals((await verifyLog(dir)).error, null);
      const again = await Log.open(dir, { timers: false });
      assertEquals(await rows(again), acked);
      await again.close();
    } finally {
      await rmrf(dir);
    }
  });
}

Deno.test("stream fan-out never shows rows of a failed commit", async () => {
  const root = await tempDir();
  const io = new FaultyIo();
  const schema = { type: "object", properties: { i: { type: "integer" } }, required: ["i"] };
  const stream = await Stream.open("t", { schema, root, logOptions: { io, timers: false } });
  const server = serve([stream], { port: 0, onListen: () => {} });
  try {
    const sub = await TestSub.open(`ws://127.0.0.1:${server.addr.port}/t`);
    await stream.send({ i: 1 });
    io.failWrite = true;
    const err = await stream.send({ i: 2 }).catch((e) => e);
    assert(err instanceof LogWriteError, String(err));
    // A full disk: the stream takes no rows until it has room (it looks every second).
    assert(stream.diskFull !== null);
    await assertRejects(() => stream.send({ i: 3 }), DiskFullError);
    await stream.ready();
    assertEquals(stream.diskFull, null);
    assertEquals(await stream.send({ i: 3 }), 2);
    await sub.waitLines(2);
    assertEquals(sub.lines, ['[1,{"i":1}]', '[2,{"i":3}]']);
    await sub.close();
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("log on a real full filesystem (1 MiB tmpfs): appends fail loudly, nothing acknowledged is lost", async () => {
  const mnt = await tempDir("streamcast-tmpfs-");
  try {
    const mount = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt],
      stderr: "piped",
    }).output();
    // No skipping: a machine where the test cannot mount a filesystem fails it.
    assertEquals(mount.code, 0, `mount tmpfs: ${text(mount.stderr)}`);
    const dir = join(mnt, "log");
    // Another program's file on the same disk, removed later to make room.
    await Deno.writeFile(join(mnt, "filler"), new Uint8Array(256 * 1024));
    const log = await Log.open(dir, { timers: false, segmentBytes: 8 << 20 });
    const payload = (i: number) => utf8(`{"i":${i},"pad":"${"z".repeat(900)}"}`);
    let acked = 0;
    let failure: unknown = null;
    for (let i = 1; i <= 5000 && !failure; i++) {
      try {
        assertEquals(await log.append(payload(i)), i);
        acked = i;
      } catch (err) {
        failure = err;
      }
    }
    assert(failure instanceof LogWriteError, `expected a LogWriteError, got ${failure}`);
    assert(/No space left|os error 28/.test((failure as Error).message), String(failure));
    assert(acked > 100, `acked ${acked}`);
    // Room again: the same open log takes appends at the next offset.
    await Deno.remove(join(mnt, "filler"));
    assertEquals(await log.append(payload(acked + 1)), acked + 1);
    acked++;
    await log.close();
    const again = await Log.open(dir, { timers: false });
    assertEquals(again.endOffset, acked + 1);
    const got = await rows(again);
    assertEquals(got.length, acked);
    assertEquals(got[acked - 1], `${acked}:${text(payload(acked))}`);
    await again.close();
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await new Deno.Command("umount", { args: [mnt] }).output();
    await rmrf(mnt);
  }
});

Deno.test("log goes on when a full disk keeps the next segment's file from being made at a seal", async () => {
  const dir = await tempDir();
  let failHeader = false;
  const io: LogIo = {
    ...REAL_IO,
    write: (file, bytes) => {
      // The next segment's header (128 bytes): the disk is full.
      if (failHeader && bytes.length === 128) {
        failHeader = false;
        return Promise.reject(enospc());
      }
      return REAL_IO.write(file, bytes);
    },
  };
  try {
    const log = await Log.open(dir, { io, timers: false, chunks: false });
    assertEquals(await log.appendMany(["{}", "{}"]), 1);
    failHeader = true;
    await log.roll();
    assertEquals(failHeader, false, "the header write was failed");
    // The file is made before the next commit's rows.
    assertEquals(await log.append('{"after":1}'), 3);
    assertEquals(log.segments().map((s) => [s.firstOffset, s.count]), [[1, 2], [3, 1]]);
    await log.close();
    assertEquals((await verifyLog(dir)).error, null);
    const again = await Log.open(dir, { timers: false, chunks: false });
    assertEquals(again.endOffset, 4);
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("log goes on when a full disk fails a producer's record and then its putting back", async () => {
  const dir = await tempDir();
  let failJournal = 0;
  const io: LogIo = {
    ...REAL_IO,
    write: (file, bytes) => {
      // Producer journal records hold `{"p":`; segment records hold the rows.
      if (failJournal > 0 && text(bytes).includes('{"p":')) {
        failJournal--;
        return Promise.reject(enospc());
      }
      return REAL_IO.write(file, bytes);
    },
  };
  try {
    const log = await Log.open(dir, { io, timers: false, chunks: false });
    const one = log.publish(['{"v":1}'], { producer: "a", seq: 1 });
    await (one.status === "stored" ? one.done : null);
    // Seq 2's record fails, and so does the record putting "a" back to seq 1.
    failJournal = 2;
    const two = log.publish(['{"v":2}'], { producer: "a", seq: 2 });
    assertEquals(two.status, "stored");
    await assertRejects(() => (two as { done: Promise<void> }).done, LogWriteError);
    await log.flush();
    assertEquals(failJournal, 0, "both journal writes were failed");
    // The record owed is written before the next commit's own.
    const again = log.publish(['{"v":2}'], { producer: "a", seq: 2 });
    assertEquals(again.status, "stored");
    await (again as { done: Promise<void> }).done;
    await log.close();
    assertEquals((await verifyLog(dir)).error, null);
    const reopened = await Log.open(dir, { timers: false, chunks: false });
    assertEquals(reopened.producers.state("a")?.seq, 2);
    const dup = reopened.publish(['{"v":2}'], { producer: "a", seq: 2 });
    assertEquals([dup.status, (dup as { first: number }).first], ["duplicate", 2]);
    await reopened.close();
  } finally {
    await rmrf(dir);
  }
});
