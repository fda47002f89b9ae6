// The Jepsen-style checks at a soak's size: an hour's feed gives a producer
// hundreds of thousands of seqs, which once overflowed the call stack when
// spread into Math.max; and the check still names a missing seq.
import { assertEquals } from "../../harness/assert.ts";
import type { Ack } from "../../harness/jepsen/cluster_clients.ts";
import { checkSeqProducer, type Log } from "../../harness/jepsen/checks.ts";

Deno.test("checkSeqProducer: 300 000 seqs, every one in the log, then one missing", () => {
  const n = 300_000;
  const log: Log = new Map();
  const acks: Ack[] = [];
  for (let seq = 1; seq <= n; seq++) {
    log.set(seq, { p: "h1", seq, i: 0 });
    acks.push({ seq, first: seq, last: seq, duplicate: false });
  }
  const problems: string[] = [];
  checkSeqProducer("h1", acks, 1, log, problems);
  assertEquals(problems, []);
  log.delete(n / 2);
  checkSeqProducer("h1", acks.filter((a) => a.seq !== n / 2), 1, log, problems);
  assertEquals(problems, [`h1 seq ${n / 2} missing from the log (max ${n})`]);
});
