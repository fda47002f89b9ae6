// The producer journal and table of the log (log/producer/table.ts): records synced
// before rows are written, torn commits cut on open, bounded memory, rollback.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { Log, type LogIo, PRODUCERS_FILE, verifyLog } from "../../log/mod.ts";
import { encodeRecords, parseJournal } from "../../log/producer/journal.ts";
import { REAL_IO } from "../../log/disk/io.ts";
import { ProducerTable } from "../../log/producer/table.ts";

const HEADER = [0x53, 0x43, 0x50, 0x4a, 0, 0, 0, 1]; // "SCPJ", version 1

const REAL: LogIo = REAL_IO;

// The real I/O, with `write` in place of the real one for the rows written
// to segments (not their headers, nor the journal's or other files' writes).
function onRowWrites(write: LogIo["write"]): LogIo {
  const paths = new WeakMap<Deno.FsFile, string>();
  return {
    ...REAL,
    open: async (path, options) => {
      const f = await REAL.open(path, options);
      paths.set(f, path);
      return f;
    },
    write: (file, bytes) =>
      paths.get(file)?.endsWith(".seg") && file.seekSync(0, Deno.SeekMode.Current) > 0
        ? write(file, bytes)
        : REAL.write(file, bytes),
  };
}

async function journal(dir: string) {
  return parseJournal(await Deno.readFile(`${dir}/${PRODUCERS_FILE}`), PRODUCERS_FILE).records;
}

async function copyDir(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const e of Deno.readDir(from)) {
    if (e.isFile) await Deno.copyFile(`${from}/${e.name}`, `${to}/${e.name}`);
    else if (e.isDirectory) await copyDir(`${from}/${e.name}`, `${to}/${e.name}`);
  }
}

const rows = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `{"r":"${tag}${i}"}`);

Deno.test("producers: a commit's journal record is on disk before its rows are written", async () => {
  const dir = await tempDir();
  try {
    const seen: number[] = [];
    let log: Log | null = null;
    const io = onRowWrites(async (file, bytes) => {
      // What the journal holds when the rows are handed to the OS.
      const recs = await journal(dir).catch(() => []);
      seen.push(recs.length);
      await REAL.write(file, bytes);
    });
    log = await Log.open(dir, { io });
    for (let s = 1; s <= 3; s++) {
      const r = log.publish(rows(5, `s${s}-`), { producer: "p", seq: s });
      assert(r.status === "stored");
      await r.done;
    }
    assertEquals(seen, [1, 2, 3]);
    // A commit without a producer writes no record.
    await log.appendMany(rows(2, "x"));
    assertEquals((await journal(dir)).length, 3);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("producers: a torn commit's surviving rows are cut on open and its seq is not committed", async () => {
  const dir = await tempDir();
  const crash = await tempDir();
  try {
    let tear = false;
    const io = onRowWrites(async (file, bytes) => {
      if (!tear) return await REAL.write(file, bytes);
      // The machine stops with only part of this commit's bytes on disk.
      await REAL.write(file, bytes.subarray(0, Math.floor(bytes.length * 0.6)));
      await file.syncData();
      await copyDir(dir, `${crash}/log`);
      throw new Error("simulated crash");
    });
    const log = await Log.open(dir, { io });
    const a = log.publish(rows(3, "a"), { producer: "p", seq: 1 });
    assert(a.status === "stored");
    await a.done;
    tear = true;
    const b = log.publish(rows(10, "b"), { producer: "p", seq: 2 });
    assert(b.status === "stored");
    await b.done.catch(() => {});
    await log.close().catch(() => {});
    // The snapshot: journal says seq 2 = [4, 13]; the segment holds a few of those rows.
    const recs = await journal(`${crash}/log`);
    assertEquals(recs.map((r) => [r.seq, r.first, r.last]), [[1, 1, 3], [2, 4, 13]]);
    const again = await Log.open(`${crash}/log`);
    assertEquals(again.endOffset, 4);
    assertEquals(again.producers.state("p"), { seq: 1, first: 1, last: 3 });
    const retry = again.publish(rows(10, "b"), { producer: "p", seq: 2 });
    assert(retry.status === "stored");
    await retry.done;
    assertEquals([retry.first, retry.last, again.endOffset], [4, 13, 14]);
    const batch = await again.reader(1).read();
    const text = new TextDecoder();
    const got: string[] = [];
    for (let i = 0; i < batch.count; i++) {
      got.push(
        text.decode(batch.buf.subarray(batch.starts[i], batch.starts[i] + batch.lengths[i])),
      );
    }
    assertEquals(got, [...rows(3, "a"), ...rows(10, "b")]);
    await again.close();
  } finally {
    await rmrf(dir);
    await rmrf(crash);
  }
});

Deno.test("producers: state survives a reopen; duplicates, stale seqs and pending retries", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir);
    const a = log.publish(rows(2, "a"), { producer: "p", seq: 5 });
    // A retry while the first is still being committed waits for it.
    const dup = log.publish(rows(2, "a"), { producer: "p", seq: 5 });
    assertEquals(dup.status, "duplicate");
    assert(a.status === "stored" && dup.status === "duplicate");
    await dup.done;
    assertEquals([dup.first, dup.last, log.endOffset], [1, 2, 3]);
    assertEquals(log.publish(rows(1, "z"), { producer: "p", seq: 4 }), {
      status: "stale",
      lastSeq: 5,
    });
    await log.close();
    const again = await Log.open(dir);
    assertEquals(again.producers.state("p"), { seq: 5, first: 1, last: 2 });
    const d2 = again.publish(rows(2, "a"), { producer: "p", seq: 5 });
    assertEquals([d2.status, again.endOffset], ["duplicate", 3]);
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("producers: at most maxProducers are remembered, the oldest forgotten first, also after a reopen", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { maxProducers: 2 });
    for (const p of ["a", "b", "c"]) {
      const r = log.publish(rows(1, p), { producer: p, seq: 1 });
      if (r.status === "stored") await r.done;
    }
    assertEquals([log.producers.size, log.producers.state("a"), log.producers.state("c")?.seq], [
      2,
      null,
      1,
    ]);
    await log.close();
    const again = await Log.open(dir, { maxProducers: 2 });
    assertEquals([
      again.producers.size,
      again.producers.state("a"),
      again.producers.state("b")?.seq,
    ], [
      2,
      null,
      1,
    ]);
    // A forgotten producer starts anew.
    assertEquals(again.publish(rows(1, "a"), { producer: "a", seq: 1 }).status, "stored");
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("producers: the journal is rewritten when it grows past its bound, and keeps every producer", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { maxProducers: 100_000 });
    // ~30k records of ~50 bytes: past the 1 MiB bound.
    let last = null;
    for (let i = 0; i < 30_000; i++) {
      last = log.publish([`{"i":${i}}`], { producer: `p${i}`, seq: 1 });
    }
    if (last?.status === "stored") await last.done;
    const before = (await Deno.stat(`${dir}/${PRODUCERS_FILE}`)).size;
    assert(before > 1 << 20, `journal is ${before} bytes`);
    const r = log.publish(["{}"], { producer: "p0", seq: 2 });
    if (r.status === "stored") await r.done;
    await log.close();
    // Rewritten as one record per producer remembered — p0's acknowledged
    // seq 1 among them — then the commit's own record (p0 seq 2).
    const recs = await journal(dir);
    assertEquals(recs.length, 30_001);
    assertEquals(recs.filter((r) => r.producer === "p0").map((r) => r.seq), [1, 2]);
    const again = await Log.open(dir, { maxProducers: 100_000 });
    assertEquals([
      again.producers.size,
      again.producers.state("p0")?.seq,
      again.producers.state("p29999")?.seq,
    ], [30_000, 2, 1]);
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("producers: a failed write puts the producer back, so its seq may be sent again", async () => {
  const dir = await tempDir();
  try {
    let fail = false;
    const io = onRowWrites((file, bytes) =>
      fail ? Promise.reject(new Error("disk full")) : REAL.write(file, bytes)
    );
    const log = await Log.open(dir, { io });
    const a = log.publish(rows(2, "a"), { producer: "p", seq: 1 });
    if (a.status === "stored") await a.done;
    fail = true;
    const b = log.publish(rows(2, "b"), { producer: "p", seq: 2 });
    const n = log.publish(rows(2, "n"), { producer: "new", seq: 1 });
    assert(b.status === "stored" && n.status === "stored");
    let failed = 0;
    await b.done.catch(() => failed++);
    await n.done.catch(() => failed++);
    assertEquals(failed, 2);
    fail = false;
    const b2 = log.publish(rows(2, "b"), { producer: "p", seq: 2 });
    assert(b2.status === "stored");
    await b2.done;
    assertEquals([b2.first, b2.last], [3, 4]);
    await log.close();
    // The put-back records are consistent for verify (seq 2 failed, then put back to seq 1).
    const report = await verifyLog(dir);
    assertEquals(report.error, null);
    assertEquals(report.producers?.records, 6);
    // Open drops the dead record of rows 5..6 ("new" seq 1), and rewrites the journal.
    const again = await Log.open(dir);
    assertEquals([again.producers.state("p")?.seq, again.producers.state("new"), again.endOffset], [
      2,
      null,
      5,
    ]);
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

// A commit's journal record synced, its rows never written (a crash between
// the two): open drops the record. It must not stay in the journal, where it
// would later pass for committed or cut rows acknowledged after the restart.
Deno.test("producers: a record dropped at open is rewritten out, so acknowledged rows after it survive reopens", async () => {
  const dir = await tempDir();
  try {
    let log = await Log.open(dir);
    for (let s = 1; s <= 3; s++) {
      const r = log.publish(rows(10, `s${s}-`), { producer: "a", seq: s });
      assert(r.status === "stored");
      await r.done;
    }
    await log.close();
    const leftover = encodeRecords([{ producer: "a", seq: 4, first: 31, last: 40 }]);
    const f = await Deno.open(`${dir}/${PRODUCERS_FILE}`, { append: true });
    await f.write(leftover);
    f.close();

    log = await Log.open(dir);
    assertEquals(log.endOffset, 31);
    // Rewritten as the table: one record per producer, the dropped one gone.
    assertEquals((await journal(dir)).map((r) => r.seq), [3]);
    const again = log.publish(rows(5, "s4-"), { producer: "a", seq: 4 });
    assert(again.status === "stored");
    await again.done;
    assertEquals([again.first, again.last], [31, 35]);
    await log.close();

    // Reopened (clean): the acknowledged rows 31..35 are there, seq 4 is a duplicate.
    log = await Log.open(dir);
    assertEquals(log.endOffset, 36);
    const dup = log.publish(rows(5, "s4-"), { producer: "a", seq: 4 });
    assertEquals(dup.status, "duplicate");
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

// Journals written before opens rewrote dropped records can hold one, followed
// by the commit sent again: it never cuts (supersededRecords).
Deno.test("producers: an old journal's dropped record, followed by its resend, cuts nothing", async () => {
  const dir = await tempDir();
  try {
    let log = await Log.open(dir);
    for (let s = 1; s <= 4; s++) {
      const r = log.publish(rows(s === 4 ? 5 : 10, `s${s}-`), { producer: "a", seq: s });
      assert(r.status === "stored");
      await r.done;
    }
    await log.close();
    const recs = await journal(dir);
    const stale = { producer: "a", seq: 4, first: 31, last: 40 };
    const body = encodeRecords([...recs.slice(0, 3), stale, recs[3]]);
    await Deno.writeFile(`${dir}/${PRODUCERS_FILE}`, new Uint8Array([...HEADER, ...body]));
    log = await Log.open(dir);
    assertEquals(log.endOffset, 36);
    assertEquals(log.publish(rows(5, "s4-"), { producer: "a", seq: 4 }).status, "duplicate");
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("producers: a window refused for a full disk, then sent again as the disk empties, stores no seq past a refused one", () => {
  // A publisher's window 120..127 is refused whole (the disk is full); on its next connection
  // 120 is refused once more, and the disk empties before 121 arrives: 121 must not be stored
  // while 120 is not (its greeting would then say 127, and the publisher would drop 120).
  const t = new ProducerTable(10);
  t.assign("w2", { seq: 119, first: 1, last: 2 }, Promise.resolve());
  for (let seq = 120; seq <= 127; seq++) t.refused("w2", seq);
  assertEquals(t.check("w2", 120), null);
  t.refused("w2", 120);
  for (let seq = 121; seq <= 127; seq++) {
    assertEquals(t.check("w2", seq)?.status, "blocked", `seq ${seq}`);
  }
  // 120 sent again and stored: the rest follow.
  t.assign("w2", { seq: 120, first: 3, last: 4 }, Promise.resolve());
  assertEquals(t.check("w2", 121), null);
});

Deno.test("producers: a write that fails under a seq refused behind it blocks at the failed seq", () => {
  // 120 is taken and pending; 121 is refused for a full disk behind it; then 120's write fails.
  // The producer must send 120 again before anything above it is stored.
  const t = new ProducerTable(10);
  t.assign("w2", { seq: 119, first: 1, last: 2 }, Promise.resolve());
  t.committed([{ producer: "w2", seq: 119, first: 1, last: 2 }]);
  t.assign("w2", { seq: 120, first: 3, last: 4 }, Promise.resolve());
  t.refused("w2", 121);
  assertEquals(t.discarded(3), [{ producer: "w2", seq: 119, first: 1, last: 2 }]);
  assertEquals(t.check("w2", 121)?.status, "blocked");
  assertEquals(t.check("w2", 120), null);
});
