// The leader's commit index against a real etcd: it waits for every member of
// the in-sync set (and for R of them), drops a lagging follower by writing etcd
// first, adds a caught-up one back, and stops once the lease may have lapsed.
import { assert, assertEquals } from "../harness/assert.ts";
import { startEtcd } from "../harness/etcd.ts";
import { Logger } from "../../common/logger.ts";
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { campaign, type Leadership } from "../../cluster/election.ts";
import { mayLead, readInSync, writeInSync } from "../../cluster/in_sync.ts";
import { streamKeys } from "../../cluster/keys.ts";
import { LeaseKeeper } from "../../cluster/lease_keeper.ts";
import { CommitTracker, etcdInSyncStore } from "../../cluster/commit_tracker.ts";

const quiet = new Logger({ level: "error" });

async function leaderOf(c: EtcdClient, stream: string, nodes: string[]) {
  const keys = streamKeys(stream);
  const lease = await LeaseKeeper.grant(c, { ttlSeconds: 5 });
  const won = await campaign(c, keys, { node: "n1", url: "http://h1" }, lease.id);
  assert(won.won);
  const leadership: Leadership = {
    stream,
    term: won.term,
    leaseId: lease.id,
    valid: () => lease.valid(),
    remainingMs: () => lease.remainingMs(),
    ended: lease.lost,
  };
  const first = await readInSync(c, keys);
  const w = await writeInSync(c, keys, leadership, first, nodes);
  assert(w.written);
  return { keys, lease, leadership, set: w.set };
}

Deno.test("commit tracker waits for every in-sync member, and for R of them", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const { keys, lease, leadership, set } = await leaderOf(c, "s", ["n1", "n2", "n3"]);
  try {
    const t = new CommitTracker(etcdInSyncStore(c, keys, leadership), leadership, {
      node: "n1",
      replicas: 3,
      set,
      index: 1,
      durable: 1,
      logger: quiet,
    });
    const seen: number[] = [];
    t.onIndex = (i) => seen.push(i);
    t.leaderDurable(10);
    t.connected("n2");
    t.followerDurable("n2", 10);
    assertEquals(t.index, 1); // n3 has said nothing in this term
    t.connected("n3");
    t.followerDurable("n3", 4);
    assertEquals(t.index, 4);
    t.followerDurable("n3", 12); // ahead of the leader: the leader's end bounds it
    assertEquals(t.index, 10);
    t.followerDurable("n2", 8); // a report going back changes nothing
    assertEquals(t.index, 10);
    assertEquals(seen, [4, 10]);
    assertEquals(t.enough, true);
    t.close();
  } finally {
    await lease.revoke();
  }
});

Deno.test("commit tracker drops a lagging follower in etcd before committing without it, and adds it back once caught up", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const { keys, lease, leadership, set } = await leaderOf(c, "s", ["n1", "n2", "n3"]);
  let now = 0;
  try {
    // etcd's set as written (only this tracker writes it): each index the
    // tracker moves to is checked against it — every node of it holds the
    // rows below the index.
    const inner = etcdInSyncStore(c, keys, leadership);
    let etcdSet = set.nodes;
    const store = {
      async write(expected: typeof set, nodes: readonly string[]) {
        const r = await inner.write(expected, nodes);
        if (r.written) etcdSet = r.set.nodes;
        return r;
      },
      read: () => inner.read(),
    };
    const t = new CommitTracker(store, leadership, {
      node: "n1",
      replicas: 2,
      set,
      index: 1,
      durable: 1,
      lagMs: 2000,
      now: () => now,
      logger: quiet,
    });
    const durable = new Map<string, number>([["n1", 1], ["n2", 0], ["n3", 0]]);
    const violations: string[] = [];
    t.onIndex = (index) => {
      for (const n of etcdSet) {
        if (durable.get(n)! < index) violations.push(`${n} in etcd's set below ${index}`);
      }
    };
    const leaderAt = (e: number) => {
      durable.set("n1", e);
      t.leaderDurable(e);
    };
    const followerAt = (n: string, e: number) => {
      durable.set(n, Math.max(durable.get(n)!, e));
      t.followerDurable(n, e);
    };
    t.connected("n2");
    t.connected("n3");
    leaderAt(50);
    followerAt("n2", 50);
    followerAt("n3", 50);
    assertEquals(t.index, 50);
    // n3 stops reporting; n2 keeps up.
    for (let i = 1; i <= 10; i++) {
      now += 250;
      leaderAt(50 + i * 10);
      followerAt("n2", 50 + i * 10);
      t.tick();
    }
    assertEquals(t.index, 50); // n3 still counts: not dropped yet
    now += 1000; // n3 last caught up 3.5 s ago
    t.tick();
    await t.settled();
    assertEquals((await readInSync(c, keys))!.nodes, ["n1", "n2"]);
    assertEquals(t.index, 150);
    assertEquals(t.inSync, ["n1", "n2"]);
    // n3 catches up to the commit index: counted first, then written back.
    followerAt("n3", 150);
    await t.settled();
    assertEquals((await readInSync(c, keys))!.nodes, ["n1", "n2", "n3"]);
    leaderAt(170);
    followerAt("n2", 170);
    assertEquals(t.index, 150); // waits for n3 again
    followerAt("n3", 170);
    assertEquals(t.index, 170);
    assertEquals(violations, []);
    t.close();
  } finally {
    await lease.revoke();
  }
});

Deno.test("commit tracker: fewer than R in sync commits nothing; a lapsed lease moves nothing", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const { keys, lease, leadership, set } = await leaderOf(c, "s", ["n1", "n2"]);
  let now = 0;
  try {
    const t = new CommitTracker(etcdInSyncStore(c, keys, leadership), leadership, {
      node: "n1",
      replicas: 2,
      set,
      index: 1,
      durable: 1,
      lagMs: 1000,
      now: () => now,
      logger: quiet,
    });
    t.leaderDurable(20);
    now += 2000;
    t.tick(); // n2 never connected: dropped
    await t.settled();
    assertEquals(t.inSync, ["n1"]);
    assertEquals(t.enough, false);
    t.leaderDurable(30);
    assertEquals(t.index, 1);
    t.connected("n2");
    t.followerDurable("n2", 30);
    await t.settled();
    assertEquals(t.enough, true);
    assertEquals(t.index, 30);
    // The lease is lost on this node's clock: nothing more is committed, even
    // with every follower caught up.
    await lease.close();
    t.leaderDurable(40);
    t.followerDurable("n2", 40);
    assertEquals(t.index, 30);
    t.close();
  } finally {
    await lease.revoke();
  }
});

Deno.test("a stream's first set is fresh until it holds R nodes: nothing commits before etcd has them, and while it is fresh any node may lead", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const keys = streamKeys("f");
  const lease = await LeaseKeeper.grant(c, { ttlSeconds: 5 });
  const won = await campaign(c, keys, { node: "n1", url: "http://h1", replicas: 2 }, lease.id);
  assert(won.won);
  const first = (await readInSync(c, keys))!;
  assertEquals([first.nodes, first.fresh], [["n1"], true]);
  assertEquals(mayLead(first, "n3"), true, "no row can have been committed: anyone may lead");
  const leadership: Leadership = {
    stream: "f",
    term: won.term,
    leaseId: lease.id,
    valid: () => lease.valid(),
    remainingMs: () => lease.remainingMs(),
    ended: lease.lost,
  };
  try {
    const t = new CommitTracker(etcdInSyncStore(c, keys, leadership, 2), leadership, {
      node: "n1",
      replicas: 2,
      set: first,
      index: 1,
      durable: 1,
      logger: quiet,
    });
    t.leaderDurable(5);
    t.connected("n2");
    t.followerDurable("n2", 5); // caught up: added here, then in etcd
    t.leaderDurable(6); // counted again while etcd's answer is on its way
    assertEquals(t.index, 1, "nothing commits before etcd's set holds R nodes");
    await t.settled();
    const grown = (await readInSync(c, keys))!;
    assertEquals([grown.nodes, grown.fresh], [["n1", "n2"], undefined]);
    assertEquals(t.index, 5, "committed once etcd has the set of R");
    assertEquals(mayLead(grown, "n3"), false);
    // Shrunk again, it stays not fresh: rows were committed.
    const shrunk = await writeInSync(c, keys, leadership, grown, ["n1"], 2);
    assert(shrunk.written);
    assertEquals([shrunk.set.nodes, shrunk.set.fresh], [["n1"], undefined]);
    assertEquals(mayLead(shrunk.set, "n2"), false);
    t.close();
  } finally {
    await lease.revoke();
  }
});

Deno.test("a new leader of a fresh set starts it again from itself: the one that lost its disk is not waited for", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const keys = streamKeys("g");
  const a = await LeaseKeeper.grant(c, { ttlSeconds: 5 });
  assert((await campaign(c, keys, { node: "n2", url: "http://h2", replicas: 2 }, a.id)).won);
  await a.revoke(); // n2 gone (its disk wiped) before any follower joined
  const b = await LeaseKeeper.grant(c, { ttlSeconds: 5 });
  try {
    const won = await campaign(c, keys, { node: "n1", url: "http://h1", replicas: 2 }, b.id);
    assert(won.won, "n1 leads though the set named only n2");
    const set = (await readInSync(c, keys))!;
    assertEquals([set.term, set.nodes, set.fresh], [2, ["n1"], true]);
  } finally {
    await b.revoke();
  }
});
