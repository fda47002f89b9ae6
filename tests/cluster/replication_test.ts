// Replication end to end below the HTTP layer: three node processes
// (tests/cluster/_nodes.ts) on a real etcd, with real sockets and real log
// folders. Acknowledgements come only once R nodes hold a row; a follower that
// lags leaves the in-sync set (etcd first) and rejoins; a SIGKILLed leader is
// replaced by a follower holding every committed row; a leader SIGSTOPped past
// its lease acknowledges nothing on SIGCONT, cuts its uncommitted tail and
// converges byte for byte.
import { assert, assertEquals } from "../harness/assert.ts";
import { startEtcd } from "../harness/etcd.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { readInSync } from "../../cluster/in_sync.ts";
import { streamKeys } from "../../cluster/keys.ts";
import { leaderOf, type NodeProc, startNodes } from "./_nodes.ts";

const row = (i: number) => JSON.stringify({ i, pad: "x".repeat(i % 7) });

async function inSync(leader: NodeProc, n: number): Promise<void> {
  await until(async () => (await leader.state()).in_sync.length === n, 20_000, `${n} in sync`);
}

// Every node's rows are the same: offsets, append times and bytes.
async function converged(nodes: NodeProc[]): Promise<[number, number, string][]> {
  let rows: [number, number, string][] = [];
  await until(
    async () => {
      const all = await Promise.all(nodes.map((n) => n.rows()));
      rows = all[0];
      return all.every((r) => JSON.stringify(r) === JSON.stringify(rows));
    },
    20_000,
    "every node's log to be the same",
  );
  return rows;
}

async function dumpLogs(nodes: NodeProc[]): Promise<string> {
  const parts = await Promise.all(nodes.map(async (n) => `--- ${n.name}\n${await n.logTail(15)}`));
  return parts.join("\n");
}

Deno.test("replication: a commit waits for R nodes; a lagging follower leaves the in-sync set and rejoins", async () => {
  await using etcd = await startEtcd();
  const root = await tempDir();
  await using nodes = await startNodes(root, ["n1", "n2", "n3"], {
    etcd: etcd.url,
    replicas: 2,
    lagMs: 1500,
  });
  try {
    const leader = await leaderOf(nodes);
    await inSync(leader, 3);
    const [f1, f2] = nodes.filter((n) => n !== leader);
    const a = await leader.publish([row(1), row(2)]);
    assertEquals(a.status, 200);
    // Acknowledged: every member of the in-sync set holds it fsync'd.
    for (const n of nodes) assert((await n.state()).durable > a.body.last!, `${n.name} holds it`);

    // f2 stops: the next commit waits for it until it is dropped (etcd first).
    f2.pause();
    const b = await leader.publish([row(3)]);
    assertEquals(b.status, 200);
    const etcdSet = await readInSync(new EtcdClient(etcd.url), streamKeys("s"));
    assertEquals(etcdSet?.nodes, [leader.name, f1.name].sort());
    assertEquals((await leader.state()).in_sync, [leader.name, f1.name].sort());
    // The followers learn the set from the leader (their /head shows it).
    await until(
      async () => (await f1.state()).in_sync.join() === [leader.name, f1.name].sort().join(),
      5_000,
      "the follower to learn the in-sync set",
    );

    // f1 stops too: fewer than R in sync, nothing is committed.
    f1.pause();
    const pending = leader.publish([row(4)]);
    let answered = false;
    pending.then(() => (answered = true));
    await until(
      async () => (await leader.state()).publishable?.error === "not_enough_replicas",
      10_000,
      "not_enough_replicas",
    );
    assertEquals(answered, false);
    const l = await leader.state();
    assert(l.durable > l.commit, "durable on the leader, not committed");
    // f1 comes back, catches up, is added back: the waiting publish is answered.
    f1.resume();
    const c = await pending;
    assertEquals(c.status, 200);
    assertEquals(c.body.first, b.body.last! + 1);
    f2.resume();
    await inSync(leader, 3);
    const rows = await converged(nodes);
    assertEquals(rows.map((r) => r[2]), [row(1), row(2), row(3), row(4)]);
  } catch (err) {
    console.error(await dumpLogs(nodes));
    throw err;
  } finally {
    await nodes[Symbol.asyncDispose]();
    await rmrf(root);
  }
});

Deno.test("replication: the leader SIGKILLed, a follower takes over holding every acknowledged row; resends are duplicates", async () => {
  await using etcd = await startEtcd();
  const root = await tempDir();
  const lease = 2;
  await using nodes = await startNodes(root, ["n1", "n2", "n3"], {
    etcd: etcd.url,
    replicas: 2,
    leaseSeconds: lease,
    lagMs: 2000,
  });
  try {
    let leader = await leaderOf(nodes);
    await inSync(leader, 3);
    const first = leader;
    const acked = new Map<number, number>(); // row id → offset
    let killedAt = 0;
    let firstAckAfterKill = 0;
    const perWorker = 20;
    const total = 4 * perWorker;
    let done = 0;
    // Four producers publishing at once, each resending its frame until it
    // is answered (a seq that committed before the kill is a duplicate).
    const worker = async (w: number) => {
      for (let seq = 1; seq <= perWorker; seq++) {
        const id = w * perWorker + seq;
        for (;;) {
          const target = leader;
          try {
            const r = await target.publish([row(id)], `p${w}`, seq, AbortSignal.timeout(15_000));
            if (r.status === 200) {
              acked.set(id, r.body.first!);
              if (killedAt > 0 && firstAckAfterKill === 0 && target !== first) {
                firstAckAfterKill = performance.now();
              }
              break;
            }
            assertEquals(r.status, 503, JSON.stringify(r.body));
          } catch (err) {
            if (err instanceof Error && err.name === "AssertionError") throw err;
            // the leader is gone or paused: find the next one
          }
          if (leader === target) {
            try {
              leader = await leaderOf(nodes.filter((n) => n.running), 30_000);
            } catch {
              // try again
            }
          }
        }
        if (++done === 30) {
          killedAt = performance.now();
          await first.kill();
        }
      }
    };
    await Promise.all([worker(0), worker(1), worker(2), worker(3)]);
    assertEquals(acked.size, total);
    assert(leader !== first);
    const failoverMs = firstAckAfterKill - killedAt;
    console.log(`failover: ${Math.round(failoverMs)} ms (lease ${lease} s)`);
    assert(failoverMs <= (lease + 5) * 1000, `failover took ${failoverMs} ms`);
    const s = await leader.state();
    assert(s.term > 1, "a new term");
    // Every acknowledged row once, at its offset.
    const rows = await leader.rows();
    const bySeq = new Map<number, number[]>();
    for (const [offset, , payload] of rows) {
      const i = JSON.parse(payload).i as number;
      bySeq.set(i, [...(bySeq.get(i) ?? []), offset]);
    }
    for (const [id, offset] of acked) assertEquals(bySeq.get(id), [offset], `row ${id}`);
    assertEquals(rows.length, total, "no row stored twice");
    for (let w = 0; w < 4; w++) assertEquals((await leader.producer(`p${w}`))?.seq, perWorker);
    // The killed node comes back as a follower and converges.
    await first.start();
    await converged(nodes);
    assertEquals((await first.state()).role, "follower");
  } catch (err) {
    console.error(await dumpLogs(nodes));
    throw err;
  } finally {
    await nodes[Symbol.asyncDispose]();
    await rmrf(root);
  }
});

Deno.test("replication: a leader SIGSTOPped past its lease acknowledges nothing on SIGCONT, cuts its uncommitted tail and converges", async () => {
  await using etcd = await startEtcd();
  const root = await tempDir();
  await using nodes = await startNodes(root, ["n1", "n2", "n3"], {
    etcd: etcd.url,
    replicas: 2,
    leaseSeconds: 2,
    lagMs: 3000,
  });
  try {
    const old = await leaderOf(nodes);
    await inSync(old, 3);
    const followers = nodes.filter((n) => n !== old);
    assertEquals((await old.publish([row(1), row(2)], "p", 1)).status, 200);
    // The followers die: what the leader takes now is durable on it alone
    // (paused ones would still find it in their sockets when resumed).
    for (const f of followers) await f.kill();
    const x = old.publish([row(100), row(101)], "p", 2, AbortSignal.timeout(60_000));
    await until(
      async () => {
        const s = await old.state();
        return s.durable > s.commit;
      },
      10_000,
      "the leader to hold rows it cannot commit",
    );
    old.pause();
    for (const f of followers) await f.start();
    // A publish queued to the paused leader.
    const y = old.publish([row(200)], "q", 1, AbortSignal.timeout(60_000)).catch((e) => e);
    const leader = await leaderOf(followers, 30_000);
    const z = await leader.publish([row(3)], "p", 2);
    assertEquals(z.status, 200);
    assertEquals(z.body.duplicate, false, "seq 2 was never committed: stored anew");
    old.resume();
    const [xr, yr] = [await x.catch((e) => e), await y];
    for (const r of [xr, yr]) {
      assert(!(r.status === 200), `the deposed leader acknowledged ${JSON.stringify(r.body)}`);
    }
    const rows = await converged(nodes);
    assertEquals(rows.map((r) => r[2]), [row(1), row(2), row(3)]);
    const s = await old.state();
    assertEquals(s.role, "follower");
    assertEquals(s.counters.rowsCut, 2);
    assertEquals(s.end, (await leader.state()).end);
    assertEquals(await old.producer("p"), await leader.producer("p"));
  } catch (err) {
    console.error(await dumpLogs(nodes));
    throw err;
  } finally {
    await nodes[Symbol.asyncDispose]();
    await rmrf(root);
  }
});

Deno.test("replication: etcd killed — publishes refused once no lease can be held, nothing acknowledged lost; etcd back — an election, publishes again", async () => {
  await using etcd = await startEtcd();
  const root = await tempDir();
  await using nodes = await startNodes(root, ["n1", "n2", "n3"], {
    etcd: etcd.url,
    replicas: 2,
    leaseSeconds: 2,
  });
  try {
    let leader = await leaderOf(nodes);
    await inSync(leader, 3);
    const acked: number[] = [];
    for (let i = 1; i <= 5; i++) {
      const r = await leader.publish([row(i)], "p", i);
      assertEquals(r.status, 200);
      acked.push(r.body.first!);
    }
    await etcd.kill();
    // The leader's lease runs out on its own clock: it stops taking publishes.
    await until(
      async () => {
        const r = await leader.publish([row(6)], "p", 6);
        return r.status === 503;
      },
      15_000,
      "publishes to be refused without etcd",
    );
    for (const n of nodes) {
      const s = await n.state();
      assertEquals(s.role, "follower", `${n.name} leads without etcd`);
      // Every node goes on serving what it showed.
      assert(s.end >= acked.at(-1)! + 1, `${n.name} shows every acknowledged row`);
    }
    await etcd.start();
    leader = await leaderOf(nodes, 30_000);
    const s = await leader.state();
    assert(s.term > 1, "a new term after etcd is back");
    const r = await leader.publish([row(6)], "p", 6);
    assertEquals(r.status, 200);
    const rows = await converged(nodes);
    for (const [i, offset] of acked.entries()) {
      assertEquals(rows.find((x) => x[0] === offset)?.[2], row(i + 1));
    }
    assertEquals(rows.filter((x) => x[2] === row(6)).length, 1);
  } catch (err) {
    console.error(await dumpLogs(nodes));
    throw err;
  } finally {
    await nodes[Symbol.asyncDispose]();
    await rmrf(root);
  }
});

Deno.test("replication: a node back with an empty disk, still named in the in-sync set, does not lead before it has caught up", async () => {
  await using etcd = await startEtcd();
  const root = await tempDir();
  await using nodes = await startNodes(root, ["n1", "n2", "n3"], {
    etcd: etcd.url,
    replicas: 2,
    leaseSeconds: 2,
    lagMs: 4000,
  });
  try {
    const first = await leaderOf(nodes);
    await inSync(first, 3);
    const [a, b] = nodes.filter((n) => n !== first);
    const acked: number[] = [];
    for (let i = 1; i <= 10; i++) {
      const r = await first.publish([row(i)], "p", i);
      assertEquals(r.status, 200);
      acked.push(r.body.first!);
    }
    // b loses its disk and comes back at once, still in the set.
    await b.kill();
    await rmrf(b.dir);
    await b.start();
    assert((await first.state()).in_sync.includes(b.name));
    // The leader dies before b could catch up from it... or after: either
    // way, b may not lead with less than every committed row.
    await first.kill();
    const leader = await leaderOf([a, b], 30_000);
    const rows = await leader.rows();
    for (const [i, offset] of acked.entries()) {
      assertEquals(rows.find((x) => x[0] === offset)?.[2], row(i + 1), `row ${i + 1}`);
    }
    await first.start();
    await converged(nodes);
  } catch (err) {
    console.error(await dumpLogs(nodes));
    throw err;
  } finally {
    await nodes[Symbol.asyncDispose]();
    await rmrf(root);
  }
});

Deno.test("replication: the leader ships a commit before its own sync; no ack before the leader and the follower both hold it synced", async () => {
  await using etcd = await startEtcd();
  const root = await tempDir();
  await using nodes = await startNodes(root, ["n1", "n2"], {
    etcd: etcd.url,
    replicas: 2,
    lagMs: 10_000,
  });
  try {
    const leader = await leaderOf(nodes);
    await inSync(leader, 2);
    const follower = nodes.find((n) => n !== leader)!;
    assertEquals((await leader.publish([row(0)], "p", 1)).status, 200);

    // The leader's sync held: the follower syncs the row all the same (it
    // was shipped once written), and no ack comes.
    const at = (await leader.state()).durable;
    await leader.holdSyncs(true);
    let answered: number | null = null;
    const a = leader.publish([row(1)], "p", 2).then((r) => (answered = r.status, r));
    await until(
      async () => (await follower.state()).durable > at,
      10_000,
      "the follower to sync the row",
    );
    await new Promise((r) => setTimeout(r, 300));
    assertEquals(answered, null, "acknowledged before the leader's sync");
    const s = await leader.state();
    assertEquals(s.durable, at);
    assert(s.commit <= at, `commit index ${s.commit} past the leader's durable end ${at}`);
    await leader.holdSyncs(false);
    const ra = await a;
    assertEquals(ra.status, 200);
    assertEquals(ra.body.first, at);

    // The follower's sync held: the leader syncs, and no ack comes either.
    const at2 = (await leader.state()).durable;
    await follower.holdSyncs(true);
    answered = null;
    const b = leader.publish([row(2)], "p", 3).then((r) => (answered = r.status, r));
    await until(
      async () => (await leader.state()).durable > at2,
      10_000,
      "the leader to sync the row",
    );
    await new Promise((r) => setTimeout(r, 300));
    assertEquals(answered, null, "acknowledged before the follower's sync");
    assertEquals((await follower.state()).durable, at2);
    await follower.holdSyncs(false);
    assertEquals((await b).status, 200);
    const rows = await converged(nodes);
    assertEquals(rows.map((r) => JSON.parse(r[2]).i), [0, 1, 2]);
  } catch (err) {
    console.error(await dumpLogs(nodes));
    throw err;
  } finally {
    await nodes[Symbol.asyncDispose]();
    await rmrf(root);
  }
});

Deno.test("replication: a leader whose sync fails after it shipped the commit stops and resigns; the next leader keeps the row, never acknowledged by the first", async () => {
  await using etcd = await startEtcd();
  const root = await tempDir();
  await using nodes = await startNodes(root, ["n1", "n2", "n3"], {
    etcd: etcd.url,
    replicas: 2,
    lagMs: 1500,
  });
  try {
    const first = await leaderOf(nodes);
    await inSync(first, 3);
    assertEquals((await first.publish([row(0)], "p", 1)).status, 200);
    const at = (await first.state()).durable;
    await first.holdSyncs(true);
    const a = first.publish([row(1)], "p", 2);
    const others = nodes.filter((n) => n !== first);
    await until(
      async () => (await Promise.all(others.map((n) => n.state()))).every((s) => s.durable > at),
      10_000,
      "the followers to sync the row",
    );
    await first.holdSyncs(false, true);
    const ra = await a;
    assertEquals(ra.status, 503, JSON.stringify(ra.body));
    assertEquals(ra.body.error, "write_failed");
    // Another node leads at once (the first resigned), and holds the row.
    const next = await leaderOf(others, 20_000);
    assert((await next.state()).term > (await first.state()).term, "a new term");
    // A resend of seq 2 finds it stored: a duplicate at the offset it was shipped at.
    const again = await next.publish([row(1)], "p", 2, AbortSignal.timeout(15_000));
    assertEquals(again.status, 200, JSON.stringify(again.body));
    assertEquals(again.body.first, at);
    assertEquals(again.body.duplicate, true);
    assertEquals((await first.state()).role, "follower");
    assertEquals((await first.publish([row(2)], "p", 3)).status, 503);
  } catch (err) {
    console.error(await dumpLogs(nodes));
    throw err;
  } finally {
    await nodes[Symbol.asyncDispose]();
    await rmrf(root);
  }
});
