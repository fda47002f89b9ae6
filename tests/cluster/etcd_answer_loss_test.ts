// Lost etcd answers, through a real etcd and a proxy that lets etcd apply a
// request and drops its answer (tests/harness/jepsen/etcd_answer_loss.ts): the client
// reports such a write as indeterminate rather than resending it; the leader
// re-reads the in-sync set before it acts on it again and commits nothing on a
// set etcd may not hold; a campaign whose answer is lost either leads with its
// lease or gives it up, and no lease is kept alive by nobody. The last test
// loses, in turn, the answer of every etcd call of one leadership's election,
// in-sync and commit paths, and checks what is left each time.
import { assert, assertEquals } from "../harness/assert.ts";
import { startEtcd } from "../harness/etcd.ts";
import { until } from "../harness/util.ts";
import { Logger } from "../../common/logger.ts";
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { campaign, Election, type Leadership } from "../../cluster/election.ts";
import { parseInSync, readInSync, writeInSync } from "../../cluster/in_sync.ts";
import { type StreamKeys, streamKeys } from "../../cluster/keys.ts";
import { LeaseKeeper } from "../../cluster/lease_keeper.ts";
import { CommitTracker, etcdInSyncStore } from "../../cluster/commit_tracker.ts";
import { b64 } from "../../cluster/_etcd_wire.ts";
import { EtcdAnswerLoss, type EtcdCall } from "../harness/jepsen/etcd_answer_loss.ts";

const quiet = new Logger({ level: "error" });

/** The ids of every lease etcd holds. */
async function leases(url: string): Promise<string[]> {
  const res = await fetch(`${url}/v3/lease/leases`, { method: "POST", body: "{}" });
  const body = await res.json() as { leases?: { ID: string }[] };
  return (body.leases ?? []).map((l) => l.ID).sort();
}

/** What a call of the scenario is, for the case lines. */
function label(c: EtcdCall, keys: StreamKeys): string {
  if (c.path !== "/v3/kv/txn") return c.path.replace("/v3/", "");
  if (writes(c, keys.leader)) return "campaign";
  if (writes(c, keys.inSync)) {
    const put = (JSON.parse(c.body) as { success: { request_put?: { value: string } }[] })
      .success[0].request_put!;
    return `in-sync ${JSON.parse(atob(put.value)).nodes.join("+")}`;
  }
  return c.body.includes(b64(keys.term)) ? "campaign read" : "read";
}

/** Whether a call writes `key` (a put of it in a transaction or alone). */
function writes(c: EtcdCall, key: string): boolean {
  return c.body.includes(`"request_put":{"key":"${b64(key)}"`) ||
    (c.path === "/v3/kv/put" && c.body.includes(`"key":"${b64(key)}"`));
}

/**
 * The in-sync set etcd holds, kept from the answers the proxy sees (before
 * the client sees them, or instead of it when lost).
 */
function followSet(proxy: EtcdAnswerLoss, keys: () => StreamKeys | null): { nodes: string[] } {
  const truth = { nodes: [] as string[] };
  proxy.onAnswer = ({ call, status, body }) => {
    const k = keys();
    if (!k || status !== 200 || call.path !== "/v3/kv/txn" || !writes(call, k.inSync)) return;
    if ((JSON.parse(body) as { succeeded?: boolean }).succeeded !== true) return;
    const req = JSON.parse(call.body) as {
      success: { request_put?: { key: string; value: string } }[];
    };
    const put = req.success.find((op) => op.request_put?.key === b64(k.inSync))!.request_put!;
    truth.nodes = parseInSync({
      key: k.inSync,
      value: atob(put.value),
      createRevision: 1,
      modRevision: 1,
      version: 1,
      lease: "0",
    })!.nodes;
  };
  return truth;
}

// Reports nodes' durable ends to `t` (awaiting its set writes), and records
// every commit above what a node of etcd's set — as the proxy saw etcd
// answer it (`truth`) — holds.
function reporter(t: CommitTracker, truth: { nodes: string[] }) {
  const durable = new Map([["n1", 0], ["n2", 0], ["n3", 0]]);
  const r = {
    durable,
    violations: [] as string[],
    acked: 0,
    at(n: string, end: number): Promise<void> {
      durable.set(n, end);
      if (n === "n1") t.leaderDurable(end);
      else t.followerDurable(n, end);
      return t.settled();
    },
  };
  t.onIndex = (i) => {
    r.acked = i;
    for (const n of truth.nodes) {
      if (durable.get(n)! < i) {
        r.violations.push(`${i} committed, ${n} in etcd's set holds ${durable.get(n)}`);
      }
    }
  };
  return r;
}

async function leaderOf(c: EtcdClient, keys: StreamKeys, nodes: string[]) {
  const lease = await LeaseKeeper.grant(c, { ttlSeconds: 5 });
  const won = await campaign(c, keys, { node: "n1", url: "http://h1" }, lease.id);
  assert(won.won);
  const leadership: Leadership = {
    stream: "s",
    term: won.term,
    leaseId: lease.id,
    valid: () => lease.valid(),
    remainingMs: () => lease.remainingMs(),
    ended: lease.lost,
  };
  const w = await writeInSync(c, keys, leadership, await readInSync(c, keys), nodes);
  assert(w.written);
  return { lease, leadership, set: w.set };
}

Deno.test("etcd client: a write whose answer is lost is reported as indeterminate and not resent; a read is resent", async () => {
  await using etcd = await startEtcd();
  const proxy = new EtcdAnswerLoss(etcd.url);
  try {
    // The proxy first, etcd itself second: a resent write would reach etcd twice.
    const c = new EtcdClient([proxy.url, etcd.url], { timeoutMs: 3000 });
    proxy.loseWhen((call) => call.path === "/v3/kv/txn");
    const err = await c.txn(
      [{ key: "/once", target: "create", op: "==", value: 0 }],
      [{ put: { key: "/once", value: "1" } }],
    ).then(() => null, (e: Error) => e);
    assert(err !== null, "the lost answer is reported");
    assertEquals(err.name, "EtcdIndeterminateError");
    assert(err.message.includes("indeterminate: may have applied"), err.message);
    assertEquals(proxy.lost.length, 1);
    const direct = new EtcdClient(etcd.url);
    const kv = await direct.get("/once");
    assertEquals(kv?.value, "1", "etcd applied it");
    assertEquals(kv?.version, 1, "once: it was not resent");
    // A read whose answer is lost goes on to the next endpoint.
    proxy.loseWhen((call) => call.path === "/v3/kv/range");
    const c2 = new EtcdClient([proxy.url, etcd.url], { timeoutMs: 3000 });
    assertEquals((await c2.get("/once"))?.value, "1");
  } finally {
    await proxy.close();
  }
});

Deno.test("in-sync add whose answer is lost: the leader re-reads etcd's set and commits nothing the added node does not hold", async () => {
  await using etcd = await startEtcd();
  const direct = new EtcdClient(etcd.url);
  const keys = streamKeys("s");
  const { lease, leadership, set } = await leaderOf(direct, keys, ["n1", "n2"]);
  const proxy = new EtcdAnswerLoss(etcd.url);
  const truth = followSet(proxy, () => keys);
  truth.nodes = set.nodes;
  try {
    const c = new EtcdClient(proxy.url, { timeoutMs: 1000 });
    const t = new CommitTracker(etcdInSyncStore(c, keys, leadership), leadership, {
      node: "n1",
      replicas: 2,
      set,
      index: 0,
      durable: 0,
      now: () => 0, // nobody lags: no drop but the ones the test makes
      logger: quiet,
    });
    const { violations, at } = reporter(t, truth);
    t.connected("n2");
    t.connected("n3");
    at("n1", 50);
    at("n2", 50);
    assertEquals(t.index, 50);
    proxy.loseWhen((call) => writes(call, keys.inSync));
    at("n3", 50); // caught up: added, the answer lost
    await t.settled();
    proxy.loseWhen(null);
    assertEquals(proxy.lost.length, 1);
    assertEquals((await readInSync(direct, keys))!.nodes, ["n1", "n2", "n3"]);
    assertEquals(t.inSync, ["n1", "n2", "n3"], "the leader's set is etcd's after the re-read");
    // n3 stops reporting; the leader and n2 go on.
    at("n1", 101);
    at("n2", 101);
    assertEquals(t.index, 50, "n3, in etcd's set, holds nothing past 50");
    assertEquals(violations, []);
    t.close();
  } finally {
    await proxy.close();
    await lease.revoke();
  }
});

for (const reads of [0, 2]) {
  Deno.test(`in-sync removal whose answer is lost (and the answers of ${reads} reads after it): the leader re-reads etcd's set, counts the dropped node until then, and goes on without it`, async () => {
    await using etcd = await startEtcd();
    const direct = new EtcdClient(etcd.url);
    const keys = streamKeys("s");
    const { lease, leadership, set } = await leaderOf(direct, keys, ["n1", "n2", "n3"]);
    const proxy = new EtcdAnswerLoss(etcd.url);
    const truth = followSet(proxy, () => keys);
    truth.nodes = set.nodes;
    let now = 0;
    try {
      const c = new EtcdClient(proxy.url, { timeoutMs: 1000 });
      const t = new CommitTracker(etcdInSyncStore(c, keys, leadership), leadership, {
        node: "n1",
        replicas: 2,
        set,
        index: 0,
        durable: 0,
        lagMs: 2000,
        now: () => now,
        logger: quiet,
      });
      const { violations, at } = reporter(t, truth);
      t.connected("n2");
      t.connected("n3");
      at("n1", 50);
      at("n2", 50);
      at("n3", 50);
      assertEquals(t.index, 50);
      at("n1", 80);
      at("n2", 80); // n3 stays at 50
      now += 3000;
      let readsLost = 0;
      proxy.loseWhen((call) => {
        if (writes(call, keys.inSync)) return true;
        // The set read back (alone, or with the leader key): lost too, `reads` times.
        const reread = call.path === "/v3/kv/txn" && !call.body.includes("request_put") &&
          call.body.includes(b64(keys.inSync));
        return reread && readsLost++ < reads;
      });
      t.tick(); // n3 dropped, the answer lost
      assertEquals(t.index, 50, "n3 counts until etcd is known not to hold it");
      await t.settled();
      proxy.loseWhen(null);
      assertEquals(proxy.lost.length, 1 + reads);
      assertEquals((await readInSync(direct, keys))!.nodes, ["n1", "n2"]);
      assertEquals(t.inSync, ["n1", "n2"], "the leader's set is etcd's after the re-read");
      assertEquals(t.index, 80, "no longer waiting for n3");
      // The set is not stuck: n3 catches up and is added back.
      at("n3", 80);
      await t.settled();
      assertEquals((await readInSync(direct, keys))!.nodes, ["n1", "n2", "n3"]);
      assertEquals(t.inSync, ["n1", "n2", "n3"]);
      assertEquals(violations, []);
      t.close();
    } finally {
      await proxy.close();
      await lease.revoke();
    }
  });
}

/** The next leadership `e` wins, or null after `ms`. */
function electedWithin(e: Election, ms: number): Promise<Leadership | null> {
  return Promise.race([
    e.elected(),
    new Promise<null>((r) => setTimeout(() => r(null), ms)),
  ]);
}

for (
  const [what, pick] of [
    ["the winning transaction", (c: EtcdCall, k: StreamKeys) => writes(c, k.leader)],
    [
      "the campaign's read",
      (c: EtcdCall, k: StreamKeys) =>
        c.path === "/v3/kv/txn" && !c.body.includes("request_put") &&
        c.body.includes(b64(k.leader)),
    ],
  ] as const
) {
  Deno.test(`campaign whose answer is lost (${what}): one leader, one lease, none left renewed`, async () => {
    await using etcd = await startEtcd();
    const direct = new EtcdClient(etcd.url);
    const proxy = new EtcdAnswerLoss(etcd.url);
    const c = new EtcdClient(proxy.url, { timeoutMs: 1000 });
    const e = new Election(c, {
      stream: "s",
      node: "n1",
      url: "http://h1",
      ttlSeconds: 2,
      retryMaxMs: 200,
      logger: quiet,
    });
    let once = false;
    proxy.loseWhen((call) => !once && pick(call, e.keys) && (once = true));
    try {
      e.start();
      // Bounded so that a stuck election fails here rather than hangs: many TTLs.
      const l = await electedWithin(e, 15_000);
      assertEquals(proxy.lost.length, 1);
      assert(l !== null, "n1, the only candidate, leads");
      const key = await direct.get(e.keys.leader);
      assertEquals(key?.lease, l.leaseId, "the leader key is the leadership's");
      // Past two renewals: a leaked lease would still be kept alive.
      await new Promise((r) => setTimeout(r, 1500));
      assertEquals(await leases(etcd.url), [l.leaseId], "no other lease in etcd");
      await e.close();
      assertEquals(await direct.get(e.keys.leader), null);
      await until(async () => (await leases(etcd.url)).length === 0, 5000, "no lease left");
    } finally {
      await e.close();
      await proxy.close();
    }
  });
}

// One leadership of n1 with followers n2 and n3 reporting (their reports are
// the test's): elected, the set read, n2 and n3 added, n3 dropped after a lag
// and added back, rows committed along the way, then resigned; then n2 elected
// in the next term and resigned. Every etcd call of it but lease renewals is
// counted; case k loses the k-th one's answer.
async function scenario(
  proxy: EtcdAnswerLoss,
  etcdUrl: string,
  prefix: string,
  lose: number,
): Promise<{ calls: number; index: number }> {
  const direct = new EtcdClient(etcdUrl);
  const c = new EtcdClient(proxy.url, { timeoutMs: 1000 });
  const e = new Election(c, {
    stream: "s",
    node: "n1",
    url: "http://h1",
    ttlSeconds: 2,
    retryMaxMs: 100,
    prefix,
    logger: quiet,
  });
  const keys = e.keys;
  const truth = followSet(proxy, () => keys);
  let counted = 0;
  const first = proxy.calls.length;
  proxy.loseWhen((call) => {
    if (call.path === "/v3/lease/keepalive") return false;
    return ++counted === lose;
  });
  let tracker: CommitTracker | null = null;
  let second: Election | null = null;
  let closed = false;
  try {
    e.start();
    const l = await electedWithin(e, 15_000);
    assert(l !== null, "n1 leads");
    // What a leader does first: read the set (again until it answers).
    let set = null;
    for (let i = 0; set === null; i++) {
      set = await readInSync(c, keys).catch(() => null);
      if (set === null) await new Promise((r) => setTimeout(r, 50));
      assert(i < 100, "the set is read");
    }
    let now = 0;
    const t = tracker = new CommitTracker(etcdInSyncStore(c, keys, l), l, {
      node: "n1",
      replicas: 2,
      set,
      index: 0,
      durable: 0,
      lagMs: 1000,
      now: () => now,
      logger: quiet,
    });
    const r = reporter(t, truth);
    const { violations, durable, at } = r;
    t.connected("n2");
    t.connected("n3");
    await at("n1", 10);
    await at("n2", 10); // n2 added
    await at("n3", 10); // n3 added
    await at("n1", 20);
    await at("n2", 20);
    await at("n3", 20);
    await at("n1", 30);
    await at("n2", 30);
    now += 2000;
    t.tick(); // n3 dropped
    await t.settled();
    await at("n3", 30); // n3 added back
    await at("n1", 40);
    await at("n2", 40);
    await at("n3", 40);
    assertEquals(violations, []);
    assertEquals(r.acked, 40, "every row committed");
    // What the leader acts on is what etcd holds.
    assert(l.valid(), "still leader");
    assertEquals((await direct.get(keys.leader))?.lease, l.leaseId, "the leader key");
    assertEquals(t.inSync, (await readInSync(direct, keys))!.nodes, "the in-sync set");
    assertEquals(t.inSync, ["n1", "n2", "n3"]);
    for (const n of t.inSync) assert(durable.get(n)! >= r.acked, `${n} holds every committed row`);
    t.close();
    closed = true;
    await e.close();
    assertEquals(e.leadership, null);
    // n2 takes over in a new term: it is in etcd's set, and holds every
    // committed row.
    const e2 = second = new Election(c, {
      stream: "s",
      node: "n2",
      url: "http://h2",
      ttlSeconds: 2,
      retryMaxMs: 100,
      prefix,
      logger: quiet,
    });
    e2.start();
    const l2 = await electedWithin(e2, 15_000);
    assert(l2 !== null, "n2 leads once n1 resigned");
    assertEquals(l2.term, l.term + 1);
    assert(truth.nodes.includes("n2"), "n2 is in etcd's set");
    assert(durable.get("n2")! >= r.acked, "n2 holds every committed row");
    assertEquals((await direct.get(keys.leader))?.lease, l2.leaseId, "the leader key is n2's");
    second = null;
    await e2.close();
    // No lease left, none renewed by nobody (one whose grant answer was lost
    // lapses by its TTL).
    await until(async () => (await leases(etcdUrl)).length === 0, 6000, "no lease left");
    assertEquals(await direct.get(keys.leader), null);
    return {
      calls: proxy.calls.slice(first).filter((x) => x.path !== "/v3/lease/keepalive").length,
      index: r.acked,
    };
  } finally {
    tracker?.close();
    if (!closed) await e.close();
    await second?.close();
    proxy.loseWhen(null);
  }
}

Deno.test("every etcd call of a leadership and its handover loses its answer in turn: nothing acknowledged is lost, etcd and the leader agree, no lease is left", async () => {
  await using etcd = await startEtcd();
  const proxy = new EtcdAnswerLoss(etcd.url);
  const renewal = (x: EtcdCall) => x.path === "/v3/lease/keepalive";
  try {
    const firstCalls = proxy.calls.length;
    const clean = await scenario(proxy, etcd.url, "/run0", 0);
    const recorded = proxy.calls.slice(firstCalls).filter((x) => !renewal(x))
      .map((x) => label(x, streamKeys("s", "/run0")));
    const n = recorded.length;
    console.log(`${n} etcd calls (lease renewals aside): ${recorded.join(", ")}`);
    assertEquals(clean.calls, n);
    for (let k = 1; k <= n; k++) {
      const lostBefore = proxy.lost.length;
      const r = await scenario(proxy, etcd.url, `/run${k}`, k);
      const lost = proxy.lost.slice(lostBefore);
      assertEquals(lost.length, 1, `case ${k}: one answer lost`);
      const what = label(lost[0], streamKeys("s", `/run${k}`));
      console.log(`case ${k}/${n}: ${what} answer lost; committed ${r.index}, ${r.calls} calls`);
      assertEquals(what, recorded[k - 1], `case ${k} lost the call the first run made ${k}th`);
    }
  } finally {
    await proxy.close();
  }
});
