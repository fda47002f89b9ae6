// A replicated log on real files: rows are shown only once committed, a
// follower appends a leader's commits byte for byte (times and producer
// records included), the tail is cut in place with the producer state put
// back, and the commit index survives a restart.
import { assert, assertEquals, assertRejects, assertThrows } from "../harness/assert.ts";
import { rmrf, tempDir, text, until } from "../harness/util.ts";
import { Log } from "../../log/log.ts";
import { LogWriteError, NotLeaderError } from "../../log/errors.ts";
import { heldSyncs } from "../harness/held_syncs.ts";
import type { DurableCommit } from "../../log/replica/replication.ts";
import { PRODUCERS_FILE } from "../../log/producer/journal.ts";
import { join } from "node:path";
import { Logger } from "../../common/logger.ts";

type Row = [number, number, string];

async function rowsOf(log: Log, from = 1): Promise<Row[]> {
  const reader = log.replication!.reader(from);
  const out: Row[] = [];
  try {
    for (;;) {
      const b = await reader.read();
      if (b.count === 0) return out;
      for (let i = 0; i < b.count; i++) {
        out.push([
          b.offsets[i],
          b.times[i],
          text(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i])),
        ]);
      }
    }
  } finally {
    reader.close();
  }
}

async function leaderLog(dir: string, clock: () => number) {
  const log = await Log.open(dir, { replicated: true, timers: false, clock });
  const rep = log.replication!;
  rep.writable = true;
  await rep.beginTerm(1);
  const shipped: DurableCommit[] = [];
  rep.onDurable = (c) => shipped.push(c);
  return { log, rep, shipped };
}

Deno.test("replicated log: rows are shown (readers, onCommit, acks) only once committed", async () => {
  const dir = await tempDir();
  try {
    const { log, rep } = await leaderLog(dir, () => 1000);
    const shown: [number, number][] = [];
    log.listen({ committed: (first, end) => void shown.push([first, end]) });
    const waits: number[] = [];
    rep.onCommitWait = (ms) => waits.push(ms);
    let acked: number | null = null;
    log.appendMany(["{}", "{}"]).then((f) => (acked = f));
    await log.flush();
    assertEquals(rep.durableEnd, 3);
    assertEquals(log.endOffset, 1);
    assertEquals((await log.reader(1).read()).count, 0);
    assertEquals(shown, []);
    assertEquals(acked, null);
    rep.commitThrough(2);
    await Promise.resolve();
    assertEquals(log.endOffset, 2);
    assertEquals(shown, [[1, 2]]);
    assertEquals(acked, null); // its second row is not committed
    rep.commitThrough(3);
    await log.flush();
    await new Promise((r) => setTimeout(r, 0));
    assertEquals(acked, 1);
    assertEquals(shown, [[1, 2], [2, 3]]);
    assertEquals(waits.length, 1); // one commit, timed from its fsync to its commit
    assert(waits[0] >= 0);
    // A duplicate is answered only once its commit is committed too.
    const p = log.publish(["{}"], { producer: "a", seq: 1 });
    await log.flush();
    const dup = log.publish(["{}"], { producer: "a", seq: 1 });
    assertEquals(dup.status, "duplicate");
    let dupDone = false;
    (dup as { done: Promise<void> }).done.then(() => (dupDone = true));
    await new Promise((r) => setTimeout(r, 10));
    assertEquals(dupDone, false);
    rep.commitThrough(4);
    await (p as { done: Promise<void> }).done;
    await (dup as { done: Promise<void> }).done;
    // Not leading: appends refused; waiters refused, their rows kept.
    const w = log.append("{}");
    await log.flush();
    rep.failWaiters(new NotLeaderError("s", "http://other"));
    await assertRejects(() => w, NotLeaderError);
    rep.writable = false;
    assertThrows(() => log.append("{}"), NotLeaderError);
    assertEquals(rep.durableEnd, 5);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replicated log: a follower appends the leader's commits byte for byte, producer records included", async () => {
  const dir = await tempDir();
  try {
    let now = 5_000;
    const { log: leader, rep, shipped } = await leaderLog(join(dir, "leader"), () => now);
    const follower = await Log.open(join(dir, "follower"), { replicated: true, timers: false });
    const frep = follower.replication!;
    leader.publish(['{"a":1}', '{"a":2}'], { producer: "p", seq: 1 });
    now = 5_001;
    await leader.flush();
    leader.append('{"b":1}');
    leader.publish(['{"c":1}'], { producer: "q", seq: 7 });
    await leader.flush();
    assert(shipped.length >= 2);
    await frep.beginTerm(1, 1);
    for (const c of shipped) await frep.appendCommit(c);
    assertEquals(await rowsOf(follower), await rowsOf(leader));
    assertEquals(follower.producers.state("p"), leader.producers.state("p"));
    assertEquals(follower.producers.state("q"), { seq: 7, first: 4, last: 4 });
    // A commit sent again (a reconnect) changes nothing; a gap is fenced.
    await frep.appendCommit(shipped[0]);
    assertEquals(frep.durableEnd, rep.durableEnd);
    await frep.appendCommit({ first: 10, runs: [{ timeUs: 9, payloads: ["{}"] }], records: [] });
    assertEquals(frep.durableEnd, 11);
    assertEquals(follower.rowsBetween(1, 11), 5);
    await leader.close();
    await follower.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replicated log: the tail is cut in place, readers and producer state kept right", async () => {
  const dir = await tempDir();
  try {
    const { log, rep } = await leaderLog(dir, () => 1);
    log.publish(["{}", "{}"], { producer: "p", seq: 1 });
    log.publish(["{}"], { producer: "p", seq: 2 });
    await log.flush();
    rep.commitThrough(3);
    await log.roll(); // the cut reaches back into a sealed segment
    log.publish(["{}", "{}"], { producer: "p", seq: 3 });
    await log.flush();
    assertEquals(rep.durableEnd, 6);
    const reader = log.reader(1);
    assertEquals((await reader.read()).count, 2);
    await assertRejects(() => rep.cutTail(2), RangeError, "committed");
    await assertRejects(() => rep.cutTail(5), RangeError, "a commit is cut whole");
    const cut = await rep.cutTail(3);
    assertEquals(cut, { end: 3, rows: 3 });
    assertEquals(rep.durableEnd, 3);
    assertEquals(log.producers.state("p"), { seq: 1, first: 1, last: 2 });
    // The same reader goes on with what the leader sends next.
    rep.commitThrough(5);
    await rep.beginTerm(2, 3);
    await rep.appendCommit({
      first: 3,
      runs: [{ timeUs: 7, payloads: ['{"new":1}', '{"new":2}'] }],
      records: [{ producer: "p", seq: 2, first: 3, last: 4 }],
    });
    const b = await reader.read();
    assertEquals([...b.offsets], [3, 4]);
    reader.close();
    assertEquals(log.producers.state("p"), { seq: 2, first: 3, last: 4 });
    assertEquals(rep.terms, [{ term: 1, start: 1 }, { term: 2, start: 3 }]);
    await log.close();
    const again = await Log.open(dir, { replicated: true, timers: false });
    assertEquals(again.producers.state("p"), { seq: 2, first: 3, last: 4 });
    assertEquals(again.endOffset, 5);
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replicated log: a restart shows the rows known committed, and no others", async () => {
  const dir = await tempDir();
  try {
    const { log, rep } = await leaderLog(dir, () => 1);
    log.appendMany(["{}", "{}", "{}", "{}"]);
    await log.flush();
    rep.commitThrough(3);
    await log.close(); // writes commit.json
    const again = await Log.open(dir, { replicated: true, timers: false });
    assertEquals(again.endOffset, 3);
    assertEquals(again.replication!.durableEnd, 5);
    await again.close();
    // Opened as a plain log it is all there.
    const plain = await Log.open(dir, { timers: false });
    assertEquals(plain.endOffset, 5);
    await plain.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replicated log: a journal rewritten many times still gives each producer its record to fall back to after a cut", async () => {
  const dir = await tempDir();
  try {
    // A journal rewritten at every commit with producer records.
    const log = await Log.open(dir, {
      replicated: true,
      timers: false,
      producerJournalBytes: 0,
    });
    const rep = log.replication!;
    rep.writable = true;
    await rep.beginTerm(1);
    const publish = async (producer: string, seq: number, n: number) => {
      const r = log.publish(Array(n).fill("{}"), { producer, seq });
      await log.flush();
      return r;
    };
    await publish("a", 1, 2); // 1..2
    await publish("b", 1, 1); // 3
    await publish("a", 2, 1); // 4
    rep.commitThrough(5); // a@2 and b@1 committed
    await publish("a", 3, 2); // 5..6, not committed
    await publish("b", 2, 1); // 7
    await publish("a", 4, 1); // 8
    assertEquals(log.producers.state("a"), { seq: 4, first: 8, last: 8 });
    // A new leader parted from this log at 6: a@3 stays, b@2 and a@4 go.
    await rep.cutTail(7);
    assertEquals(log.producers.state("a"), { seq: 3, first: 5, last: 6 });
    assertEquals(log.producers.state("b"), { seq: 1, first: 3, last: 3 });
    // Again, deeper, after another reopen: a falls back to a@2.
    await log.close();
    const again = await Log.open(dir, { replicated: true, timers: false, producerJournalBytes: 0 });
    await again.replication!.cutTail(5);
    assertEquals(again.producers.state("a"), { seq: 2, first: 4, last: 4 });
    assertEquals(again.producers.state("b"), { seq: 1, first: 3, last: 3 });
    await again.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replicated log: an append durable only after its node stopped leading is refused, never answered by the next leader's rows at its offsets", async () => {
  const dir = await tempDir();
  try {
    const { log, rep } = await leaderLog(dir, () => 1);
    log.publish(["{}"], { producer: "p", seq: 1 });
    await log.flush();
    rep.commitThrough(2);
    // Taken while leading; its fsync has not run when the leadership ends.
    const published = log.publish(['{"old":1}', '{"old":2}'], { producer: "p", seq: 2 });
    assert(published.status === "stored");
    const appended = log.append('{"old":3}');
    const sent = log.appendMany(['{"old":4}']);
    const refused = new NotLeaderError("t", "http://next");
    rep.writable = false;
    rep.failWaiters(refused);
    const outcomes = Promise.allSettled([published.done, appended, sent]);
    await log.flush(); // now durable here, after the step-down
    // The next leader never had them: cut, then its own rows fill the offsets.
    await rep.cutTail(2);
    await rep.beginTerm(2, 2);
    await rep.appendCommit({
      first: 2,
      runs: [{ timeUs: 7, payloads: ['{"new":1}', '{"new":2}', '{"new":3}', '{"new":4}'] }],
      records: [],
    });
    rep.commitThrough(6);
    assertEquals(log.endOffset, 6);
    const settled = await outcomes;
    assertEquals(settled.map((s) => s.status), ["rejected", "rejected", "rejected"]);
    for (const s of settled) assertEquals((s as PromiseRejectedResult).reason, refused);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replicated log: the seal timer does not roll while the tail is cut in place (the active file is closed then)", async () => {
  const dir = await tempDir();
  try {
    let now = 1_000;
    const log = await Log.open(dir, {
      replicated: true,
      timers: false,
      clock: () => now,
      sealEveryMs: 1000,
    });
    const rep = log.replication!;
    rep.writable = true;
    await rep.beginTerm(1);
    log.appendMany(["{}", "{}", "{}"]).catch(() => {});
    await log.flush();
    rep.commitThrough(2);
    rep.writable = false;
    rep.failWaiters(new NotLeaderError("s", null));
    let done = false;
    const cut = rep.cutTail(2).finally(() => (done = true));
    await Promise.resolve(); // the cut has started: it closed the active file
    now += 5_000; // the active segment is due to be sealed by age
    while (!done) {
      log.tick(); // the log's timer, at every turn of the cut
      await new Promise((r) => setTimeout(r, 0));
    }
    assertEquals(await cut, { end: 2, rows: 2 });
    await rep.beginTerm(2, 2);
    await rep.appendCommit({ first: 2, runs: [{ timeUs: 9, payloads: ['{"n":2}'] }], records: [] });
    rep.commitThrough(3);
    assertEquals((await rowsOf(log)).map(([o, , t]) => [o, t]), [[1, "{}"], [2, '{"n":2}']]);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replicated log: a commit is handed on as taken, before its sync; acknowledged only once synced and committed", async () => {
  const dir = await tempDir();
  try {
    const disk = heldSyncs();
    const log = await Log.open(dir, { replicated: true, timers: false, io: disk.io });
    const rep = log.replication!;
    rep.writable = true;
    await rep.beginTerm(1);
    const written: DurableCommit[] = [];
    const durable: number[] = [];
    rep.onTaken = (c) => written.push(c);
    rep.onDurable = (c) => durable.push(c.end);
    disk.hold();
    let acked: number | null = null;
    const done = log.publish(['{"a":1}', '{"a":2}'], { producer: "p", seq: 1 });
    assertEquals(done.status, "stored");
    (done as { done: Promise<void> }).done.then(() => (acked = 1));
    // Handed on while the segment's sync is held: rows, times and producer record.
    await until(() => written.length === 1, 5_000, "the commit to be handed on");
    assertEquals(written[0].first, 1);
    assertEquals(written[0].end, 3);
    assertEquals(written[0].runs[0].payloads.map((p) => typeof p === "string" ? p : text(p)), [
      '{"a":1}',
      '{"a":2}',
    ]);
    assertEquals(written[0].records.map((r) => [r.producer, r.seq, r.first, r.last]), [[
      "p",
      1,
      1,
      2,
    ]]);
    assertEquals(durable, []);
    assertEquals(rep.durableEnd, 1);
    // The cluster holds it (say), yet this node has not synced: no ack.
    rep.commitThrough(3);
    await new Promise((r) => setTimeout(r, 20));
    assertEquals(acked, null);
    assertEquals(log.endOffset, 1);
    disk.release();
    await log.flush();
    await (done as { done: Promise<void> }).done;
    assertEquals(durable, [3]);
    assertEquals(rep.durableEnd, 3);
    assertEquals(log.endOffset, 3);
    assertEquals(acked, 1);
    await log.close();
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replicated log: a commit is handed on, then its journal and rows written side by side; a journal sync that fails after stops the log", async () => {
  const dir = await tempDir();
  try {
    const disk = heldSyncs([PRODUCERS_FILE, `${PRODUCERS_FILE}.tmp`]); // made whole on its first write
    const log = await Log.open(dir, { replicated: true, timers: false, io: disk.io });
    const rep = log.replication!;
    rep.writable = true;
    await rep.beginTerm(1);
    const taken: DurableCommit[] = [];
    rep.onTaken = (c) => taken.push(c);
    const segBytes = () =>
      [...Deno.readDirSync(dir)].filter((e) => e.name.endsWith(".seg"))
        .reduce((n, e) => n + Deno.statSync(join(dir, e.name)).size, 0);
    const before = segBytes();
    disk.hold();
    const done = log.publish(['{"a":1}'], { producer: "p", seq: 1 });
    assertEquals(done.status, "stored");
    const acked = (done as { done: Promise<void> }).done;
    acked.catch(() => {});
    // Handed on, and its rows written while the journal's sync is held; not durable.
    await until(() => taken.length === 1, 5_000, "the commit to be handed on");
    assertEquals(taken[0].records.map((r) => [r.producer, r.seq, r.first, r.last]), [[
      "p",
      1,
      1,
      1,
    ]]);
    await until(() => segBytes() > before, 5_000, "the rows to be written beside the journal");
    await new Promise((r) => setTimeout(r, 20));
    assertEquals(rep.durableEnd, 1);
    rep.commitThrough(2);
    disk.release(true);
    await assertRejects(() => acked, LogWriteError);
    // Offset 1 was handed on: it is never given to another row.
    assertThrows(() => log.append('{"again":1}'), LogWriteError);
    assertEquals(rep.durableEnd, 1);
    assertEquals(log.endOffset, 1);
    await log.close().catch(() => {});
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replicated log: rows past the journal's last mark are cut at open (its write lost in a crash); rows it marks stay, with their records", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { replicated: true, timers: false });
    const rep = log.replication!;
    rep.writable = true;
    await rep.beginTerm(1);
    // Rows with and without a producer, each commit durable (and so marked).
    const p1 = log.publish(['{"a":1}', '{"a":2}'], { producer: "p", seq: 1 });
    await log.flush();
    rep.commitThrough(3);
    await (p1 as { done: Promise<void> }).done;
    const plain = log.append('{"plain":1}');
    await log.flush();
    rep.commitThrough(4);
    assertEquals(await plain, 3);
    const journal = join(dir, PRODUCERS_FILE);
    const marked = (await Deno.stat(journal)).size;
    // The next commit's rows reach the disk and its journal write does not: a
    // crash after the rows' sync and before the journal's.
    const p2 = log.publish(['{"b":1}'], { producer: "p", seq: 2 });
    await log.flush();
    rep.commitThrough(5);
    await (p2 as { done: Promise<void> }).done;
    await log.close();
    const f = await Deno.open(journal, { write: true });
    await f.truncate(marked);
    f.close();
    const lines: string[] = [];
    const again = await Log.open(dir, {
      replicated: true,
      timers: false,
      logger: new Logger({ format: "json", write: (l) => lines.push(l) }),
    });
    try {
      assertEquals(again.replication!.durableEnd, 4);
      assert(lines.some((l) => l.includes("log_tail_cut")), lines.join("\n"));
      assertEquals((await rowsOf(again)).map((r) => r[2]), ['{"a":1}', '{"a":2}', '{"plain":1}']);
      // Seq 1 is still known (a duplicate), seq 2 is not: its resend is stored once.
      const rep2 = again.replication!;
      rep2.writable = true;
      await rep2.beginTerm(2);
      const dup = again.publish(['{"a":1}', '{"a":2}'], { producer: "p", seq: 1 });
      assertEquals(dup.status, "duplicate");
      const resent = again.publish(['{"b":1}'], { producer: "p", seq: 2 });
      assertEquals(resent.status, "stored");
    } finally {
      await again.close().catch(() => {});
    }
  } finally {
    await rmrf(dir);
  }
});

Deno.test("replicated log: a sync that fails after the commit was handed on stops the log; nothing of it is acknowledged", async () => {
  const dir = await tempDir();
  try {
    const disk = heldSyncs();
    const log = await Log.open(dir, { replicated: true, timers: false, io: disk.io });
    const rep = log.replication!;
    rep.writable = true;
    await rep.beginTerm(1);
    const written: DurableCommit[] = [];
    rep.onTaken = (c) => written.push(c);
    const first = log.append('{"ok":1}');
    await log.flush();
    rep.commitThrough(2);
    assertEquals(await first, 1);
    disk.hold();
    const lost = log.append('{"lost":1}');
    await until(() => written.length === 2, 5_000, "the second commit to be handed on");
    const behind = log.append('{"behind":1}'); // queued behind the held sync
    rep.commitThrough(3);
    disk.release(true);
    await assertRejects(() => lost, LogWriteError);
    await assertRejects(() => behind, LogWriteError);
    // Offset 2 was handed on: it is never given to another row.
    assertThrows(() => log.append('{"again":1}'), LogWriteError);
    assertEquals(rep.durableEnd, 2);
    assertEquals(log.endOffset, 2);
    assertEquals((await rowsOf(log)).map((r) => r[2]), ['{"ok":1}']);
    await log.close().catch(() => {});
  } finally {
    await rmrf(dir);
  }
});
