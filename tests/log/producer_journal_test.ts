// The producer journal under rewrites and failed appends (log/producer/journal.ts):
// every way it is rewritten or partly written keeps each producer's last
// acknowledged record, so a resend of an acknowledged seq is a duplicate.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { Log, type LogIo, PRODUCERS_FILE, verifyLog } from "../../log/mod.ts";
import { encodeRecords, parseJournal } from "../../log/producer/journal.ts";
import { REAL_IO } from "../../log/disk/io.ts";

const HEADER = [0x53, 0x43, 0x50, 0x4a, 0, 0, 0, 1]; // "SCPJ", version 1

const rows = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `{"r":"${tag}${i}"}`);

function enospc(): Error {
  return Object.assign(new Error("No space left on device (os error 28)"), { code: "ENOSPC" });
}

// The real I/O, with `onWrite` deciding each write whose bytes hold `marker`
// (a row's payload, or a journal record's producer and seq).
function intercept(marker: string, onWrite: LogIo["write"]): LogIo {
  const part = new TextEncoder().encode(marker);
  return {
    ...REAL_IO,
    write: (file, bytes) => holds(bytes, part) ? onWrite(file, bytes) : REAL_IO.write(file, bytes),
  };
}

function holds(bytes: Uint8Array, part: Uint8Array): boolean {
  outer: for (let i = 0; i + part.length <= bytes.length; i++) {
    for (let k = 0; k < part.length; k++) if (bytes[i + k] !== part[k]) continue outer;
    return true;
  }
  return false;
}

async function copyDir(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const e of Deno.readDir(from)) {
    if (e.isFile && e.name !== "LOCK") await Deno.copyFile(`${from}/${e.name}`, `${to}/${e.name}`);
  }
}

async function published(log: Log, producer: string, seq: number, n: number) {
  const r = log.publish(rows(n, `${producer}.${seq}.`), { producer, seq });
  assert(r.status === "stored", `${producer} seq ${seq}: ${r.status}`);
  await r.done;
  return { first: r.first, last: r.last };
}

// The commit whose journal record passes the bound rewrites the journal; the
// machine stops after that rewrite is synced and before the commit's rows
// land. The producer's acknowledged seq must still be remembered.
Deno.test("producer journal: a rewrite keeps the acknowledged record of a producer the commit names", async () => {
  const dir = await tempDir();
  const crash = await tempDir();
  try {
    // The rows of a's seq 8 are the first bytes written that hold "a.8.".
    const io = intercept("a.8.", async () => {
      await copyDir(dir, crash); // what is on disk: the journal is rewritten and synced
      throw new Error("the machine stops here");
    });
    const log = await Log.open(dir, { io, timers: false, maxProducers: 100_000 });
    const acked = await published(log, "a", 7, 3);
    // Past the default bound (1 MiB) with one pipelined commit of other producers.
    let last = null;
    for (let i = 0; i < 25_000; i++) {
      last = log.publish([`{"i":${i}}`], { producer: `other-${i}`, seq: 1 });
    }
    if (last?.status === "stored") await last.done;
    assert(log.producers.size === 25_001);
    const before = (await Deno.stat(`${dir}/${PRODUCERS_FILE}`)).size;
    assert(before > 1 << 20, `journal is ${before} bytes`);
    const next = log.publish(rows(3, "a.8."), { producer: "a", seq: 8 });
    assert(next.status === "stored");
    await next.done.catch(() => {});
    await log.close().catch(() => {});
    // The copy was taken after the rewrite: a smaller file, holding a's seq 7 and 8.
    const journal = parseJournal(await Deno.readFile(`${crash}/${PRODUCERS_FILE}`), "j").records;
    assertEquals(journal.filter((r) => r.producer === "a").map((r) => r.seq), [7, 8]);
    assertEquals(journal.length, 25_002);

    const again = await Log.open(crash, { timers: false, maxProducers: 100_000 });
    assertEquals(again.producers.state("a"), { seq: 7, ...acked });
    const dup = again.publish(rows(3, "a.7."), { producer: "a", seq: 7 });
    assertEquals(
      dup.status === "duplicate" ? [dup.first, dup.last] : dup.status,
      [acked.first, acked.last],
    );
    // Seq 8 never landed: it is stored once when sent again.
    const end = again.endOffset;
    const resent = await published(again, "a", 8, 3);
    assertEquals(resent, { first: end, last: end + 2 });
    await again.close();
    assertEquals((await verifyLog(crash)).error, null);
  } finally {
    await rmrf(dir);
    await rmrf(crash);
  }
});

// A journal append that fails half written (a full disk) is cut back, so the
// records appended after it are found on open.
Deno.test("producer journal: a torn append is cut back, so later acknowledged records survive a reopen", async () => {
  const dir = await tempDir();
  try {
    let tear = 0;
    let torn = 0;
    const io = intercept('"p":"b","s":1,', async (file, bytes) => {
      if (tear > 0 && --tear === 0) {
        torn++;
        await REAL_IO.write(file, bytes.subarray(0, bytes.length >> 1));
        throw enospc();
      }
      await REAL_IO.write(file, bytes);
    });
    const log = await Log.open(dir, { io, timers: false });
    const a1 = await published(log, "a", 1, 2);
    // The next journal write of b's seq 1 is torn; its put-back record and
    // every later write go through.
    tear = 1;
    const b = log.publish(rows(2, "b.1."), { producer: "b", seq: 1 });
    assert(b.status === "stored");
    const failed = await b.done.then(() => null, (e: Error) => e);
    assert(failed !== null && /No space left/.test(failed.message), String(failed));
    assertEquals(torn, 1);
    const b1 = await published(log, "b", 1, 2);
    const a2 = await published(log, "a", 2, 2);
    await log.close();
    assertEquals((await verifyLog(dir)).error, null);

    const again = await Log.open(dir, { timers: false });
    assertEquals(again.producers.state("a"), { seq: 2, ...a2 });
    assertEquals(again.producers.state("b"), { seq: 1, ...b1 });
    for (const [producer, seq, acked] of [["a", 2, a2], ["b", 1, b1]] as const) {
      const dup = again.publish(rows(2, "x"), { producer, seq });
      assertEquals(dup.status === "duplicate" ? [dup.first, dup.last] : dup.status, [
        acked.first,
        acked.last,
      ]);
    }
    assertEquals(again.endOffset, a2.last + 1);
    assertEquals(a1.first, 1);
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

// A journal left by an older version, which appended after a torn record:
// open skips the torn bytes and keeps the records after them.
Deno.test("producer journal: open keeps the records that follow torn bytes", async () => {
  const dir = await tempDir();
  try {
    let log = await Log.open(dir, { timers: false });
    const a1 = await published(log, "a", 1, 2);
    const b1 = await published(log, "b", 1, 2);
    await log.close();
    const good = parseJournal(await Deno.readFile(`${dir}/${PRODUCERS_FILE}`), "j").records;
    assertEquals(good.length, 2);
    // a's seq 2 torn half way (its commit failed), then b's record after it.
    const failed = encodeRecords([{ producer: "a", seq: 2, first: 5, last: 6 }]);
    const bytes = new Uint8Array([
      ...HEADER,
      ...encodeRecords([good[0]]),
      ...failed.subarray(0, failed.length >> 1),
      ...encodeRecords([good[1]]),
    ]);
    await Deno.writeFile(`${dir}/${PRODUCERS_FILE}`, bytes);
    log = await Log.open(dir, { timers: false });
    assertEquals(log.producers.state("a"), { seq: 1, ...a1 });
    assertEquals(log.producers.state("b"), { seq: 1, ...b1 });
    assertEquals(log.publish(rows(2, "b"), { producer: "b", seq: 1 }).status, "duplicate");
    await log.close();
    // Rewritten without the torn bytes.
    const after = parseJournal(await Deno.readFile(`${dir}/${PRODUCERS_FILE}`), "j");
    assertEquals([after.records.length, after.stop], [2, null]);
    assertEquals((await verifyLog(dir)).error, null);
  } finally {
    await rmrf(dir);
  }
});

// A producer commits without holes: once a commit of seq S fails, its later
// seqs are refused until S (or anything from last_seq + 1 up to S) is sent again.
Deno.test("producer journal: a producer whose commit failed stores no later seq until it resends", async () => {
  const dir = await tempDir();
  try {
    let fail = false;
    const io = intercept(
      "p.5.",
      (file, bytes) => fail ? Promise.reject(enospc()) : REAL_IO.write(file, bytes),
    );
    const log = await Log.open(dir, { io, timers: false });
    await published(log, "p", 4, 1);
    fail = true;
    const s5 = log.publish(rows(1, "p.5."), { producer: "p", seq: 5 });
    assert(s5.status === "stored");
    assert(await s5.done.then(() => false, () => true), "seq 5 failed");
    fail = false;
    // Seq 6 was sent before the publisher learnt of the failure: refused.
    assertEquals(log.publish(rows(1, "p.6."), { producer: "p", seq: 6 }), {
      status: "blocked",
      failedSeq: 5,
      lastSeq: 4,
    });
    // Another producer is not held up.
    await published(log, "q", 1, 1);
    // Sent again from last_seq + 1: stored, and the producer goes on.
    const again5 = await published(log, "p", 5, 1);
    const again6 = await published(log, "p", 6, 1);
    assertEquals([again5.first + 1, again6.first], [again6.first, again5.last + 1]);
    assertEquals(log.producers.state("p")?.seq, 6);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});
