// Producer keys scoped to token holders (log/producer/table.ts): the table, its
// recovery from the journal, a verify of that journal and a replicated log's
// kept records each bound producers per holder, so one holder's many ids
// never push out another's; and the number of holders is bounded too.
import { assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { Log, verifyLog } from "../../log/mod.ts";
import { producerKey, ProducerTable, recoverProducers } from "../../log/producer/table.ts";

Deno.test("producer table: max counts per holder; unscoped keys are one holder as before", () => {
  const t = new ProducerTable(3);
  t.committed([{ producer: producerKey("alice", "feed"), seq: 7, first: 1, last: 1 }]);
  for (let i = 0; i < 10; i++) {
    t.committed([{ producer: producerKey("bob", `id-${i}`), seq: 1, first: 2 + i, last: 2 + i }]);
  }
  assertEquals(t.committedState("alice feed")?.seq, 7);
  assertEquals(t.committedState("bob id-6"), null);
  assertEquals(t.committedState("bob id-9")?.seq, 1);
  assertEquals(t.size, 4);
  // A holder's producer is not another's: bob's "feed" is new.
  assertEquals(t.check(producerKey("bob", "feed"), 7), null);
  assertEquals(t.check(producerKey("alice", "feed"), 7)?.status, "duplicate");
  // Without holders, the oldest of all is forgotten, as before.
  const u = new ProducerTable(2);
  for (const p of ["a", "b", "c"]) u.committed([{ producer: p, seq: 1, first: 1, last: 1 }]);
  assertEquals([u.committedState("a"), u.committedState("c")?.seq], [null, 1]);
  // Recovery from the same records keeps the same state.
  const records = [
    { producer: "alice feed", seq: 7, first: 1, last: 1 },
    ...Array.from({ length: 10 }, (_, i) => ({
      producer: `bob id-${i}`,
      seq: 1,
      first: 2 + i,
      last: 2 + i,
    })),
  ];
  const r = recoverProducers(records, 12, 3);
  assertEquals([r.table.committedState("alice feed")?.seq, r.table.size], [7, 4]);
});

Deno.test("producer keys with holders: a log's state survives a reopen and verify accepts its journal", async () => {
  const root = await tempDir();
  try {
    const dir = `${root}/t`;
    let log = await Log.open(dir, { maxProducers: 2 });
    const publish = async (producer: string, seq: number) => {
      const r = log.publish(["{}"], { producer, seq });
      if (r.status === "stored" || r.status === "duplicate") await r.done;
      return r.status;
    };
    assertEquals(await publish("alice feed", 1), "stored");
    assertEquals(await publish("bob feed", 1), "stored");
    for (let i = 0; i < 5; i++) assertEquals(await publish(`bob id-${i}`, 1), "stored");
    assertEquals(await publish("alice feed", 1), "duplicate");
    await log.close();
    log = await Log.open(dir, { maxProducers: 2 });
    assertEquals(log.producers.state("alice feed")?.seq, 1);
    assertEquals(log.producers.state("bob feed"), null);
    assertEquals(log.producers.state("bob id-4")?.seq, 1);
    assertEquals(log.producers.size, 3);
    await log.close();
    const report = await verifyLog(dir, { maxProducers: 2 });
    assertEquals(report.producers?.producers, 3);
  } finally {
    await rmrf(root);
  }
});

Deno.test("producer holders: past maxProducerHolders the least recent holder is forgotten whole, the same after a reopen and in verify", async () => {
  const t = new ProducerTable(10, 2);
  t.committed([{ producer: producerKey("alice", "a1"), seq: 1, first: 1, last: 1 }]);
  t.committed([{ producer: producerKey("alice", "a2"), seq: 1, first: 2, last: 2 }]);
  t.committed([{ producer: producerKey("bob", "b1"), seq: 1, first: 3, last: 3 }]);
  t.committed([{ producer: producerKey("alice", "a1"), seq: 2, first: 4, last: 4 }]);
  // carol is a third holder: bob published last longest ago, so bob goes, all of him.
  t.committed([{ producer: producerKey("carol", "c1"), seq: 1, first: 5, last: 5 }]);
  assertEquals(t.committedState("bob b1"), null);
  assertEquals(t.committedState("alice a2")?.seq, 1);
  assertEquals(t.committedState("carol c1")?.seq, 1);
  assertEquals(t.size, 3);

  const root = await tempDir();
  try {
    const dir = `${root}/t`;
    const opts = { maxProducers: 10, maxProducerHolders: 2 };
    let log = await Log.open(dir, opts);
    for (
      const [producer, seq] of [["alice a1", 1], ["bob b1", 1], ["alice a1", 2], [
        "carol c1",
        1,
      ]] as const
    ) {
      const r = log.publish(["{}"], { producer, seq });
      if (r.status === "stored") await r.done;
    }
    assertEquals(log.producers.state("bob b1"), null);
    await log.close();
    log = await Log.open(dir, opts);
    assertEquals(log.producers.state("bob b1"), null);
    assertEquals(log.producers.state("alice a1")?.seq, 2);
    assertEquals(log.producers.state("carol c1")?.seq, 1);
    await log.close();
    const report = await verifyLog(dir, opts);
    assertEquals(report.error, null);
    assertEquals(report.producers?.producers, 2);
  } finally {
    await rmrf(root);
  }
});
