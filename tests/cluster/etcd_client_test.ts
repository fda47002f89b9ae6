// The etcd client against a real etcd 3.4 (tests/harness/etcd.ts): every call over
// the JSON gateway, failover between endpoints, refusals naming the
// endpoint, and the watch resuming across a restart of etcd.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { until } from "../harness/util.ts";
import { startEtcd } from "../harness/etcd.ts";
import {
  EtcdClient,
  EtcdError,
  EtcdIndeterminateError,
  EtcdUnavailableError,
} from "../../cluster/etcd_client.ts";
import { type WatchEvent, watchKeys } from "../../cluster/etcd_watch.ts";

// A TCP port that accepts connections and never answers (a hung member).
function silentListener(): { url: string; close: () => void } {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  (async () => {
    for await (const c of l) conns.push(c);
  })().catch(() => {});
  return {
    url: `http://127.0.0.1:${(l.addr as Deno.NetAddr).port}`,
    close: () => {
      l.close();
      for (const c of conns) c.close();
    },
  };
}

Deno.test("etcd client puts, reads, transacts, deletes and keeps leases on a real etcd", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const rev = await c.put("/t/a", "héllo");
  const a = await c.get("/t/a");
  assertEquals(a?.value, "héllo");
  assertEquals(a?.modRevision, rev);
  assertEquals(a?.version, 1);
  await c.put("/t/b", "2");
  await c.put("/u", "outside");
  const under = await c.range("/t/", { prefix: true });
  assertEquals(under.kvs.map((kv) => kv.key), ["/t/a", "/t/b"]);
  assertEquals(await c.get("/t/none"), null);

  // A compare-and-swap: only the first create wins.
  const create = (v: string) =>
    c.txn(
      [{ key: "/t/once", target: "create", op: "==", value: 0 }],
      [{ put: { key: "/t/once", value: v } }],
      [{ range: { key: "/t/once" } }],
    );
  const first = await create("x");
  const second = await create("y");
  assertEquals(first.succeeded, true);
  assertEquals(second.succeeded, false);
  assertEquals(second.ranges[0][0].value, "x");

  const lease = await c.grant(3);
  assert(lease.ttlSeconds >= 3, `granted ${lease.ttlSeconds}`);
  await c.put("/t/leased", "1", { lease: lease.id });
  assertEquals((await c.get("/t/leased"))?.lease, lease.id);
  assert((await c.keepAlive(lease.id)) >= 3);
  assertEquals(await c.revoke(lease.id), true);
  assertEquals(await c.get("/t/leased"), null, "revoking deletes the keys attached");
  assertEquals(await c.keepAlive(lease.id), 0, "a revoked lease renews to TTL 0");
  assertEquals(await c.revoke(lease.id), false);
  assertEquals(await c.delete("/t/", { prefix: true }), 3);
  assertEquals((await c.get("/u"))?.value, "outside");
});

Deno.test("etcd client refusals name the endpoint and etcd's code", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const err = await assertRejects(
    () => c.put("/k", "v", { lease: "12345" }),
    EtcdError,
    `etcd ${etcd.url} /v3/kv/put: etcdserver: requested lease not found`,
  );
  assertEquals(err.code, 5);
});

Deno.test("etcd client fails over past a refused and a silent endpoint, and names each when none answers", async () => {
  await using etcd = await startEtcd();
  const silent = silentListener();
  // Port 1: nothing listens there, so the connection is refused. A free port
  // probed and closed could be taken meanwhile by a parallel test's etcd.
  const refused = "http://127.0.0.1:1";
  try {
    // Long enough for a loaded machine's etcd to answer; the silent one costs that once.
    const c = new EtcdClient(`${refused},${silent.url},${etcd.url}`, { timeoutMs: 3000 });
    // A write moves on past the refused endpoint; sent to the silent one, it
    // may have applied: it is not resent, it is reported as indeterminate.
    const lost = await assertRejects(() => c.put("/f", "1"), EtcdIndeterminateError);
    assertEquals(lost.endpoint, silent.url);
    assert(lost.message.includes("indeterminate: may have applied"), lost.message);
    await c.put("/f", "1");
    assertEquals(c.endpoint, etcd.url, "the endpoint that answered is used next");
    assertEquals((await c.get("/f"))?.value, "1");

    const dead = new EtcdClient([refused, silent.url], { timeoutMs: 300 });
    const err = await assertRejects(() => dead.get("/f"), EtcdUnavailableError);
    assertEquals(err.failures.map((f) => f.endpoint), [refused, silent.url]);
    assert(err.message.includes(`${silent.url}: no answer within 300 ms`), err.message);
    assert(err.message.startsWith(`etcd unreachable for /v3/kv/range: ${refused}: `), err.message);

    // A paused member: the request times out there and goes to the next.
    etcd.pause();
    const c2 = new EtcdClient(`${etcd.url},${refused}`, { timeoutMs: 300 });
    const paused = await assertRejects(() => c2.get("/f"), EtcdUnavailableError);
    assert(paused.message.includes(`${etcd.url}: no answer within 300 ms`), paused.message);
    etcd.resume();
    assertEquals((await c2.get("/f", { timeoutMs: 5000 }))?.value, "1");
  } finally {
    silent.close();
  }
});

Deno.test("etcd watch yields puts and deletes, and resumes after etcd restarts with no change missed", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const stop = new AbortController();
  const seen: WatchEvent[] = [];
  const watching = (async () => {
    for await (
      const events of watchKeys(c, "/w/", { prefix: true, signal: stop.signal, retryMaxMs: 200 })
    ) {
      seen.push(...events);
    }
  })();
  try {
    // The watch starts from the next revision: wait until it sees a put.
    await until(
      async () => {
        await c.put("/w/ready", "1");
        return seen.length > 0;
      },
      10_000,
      "the watch to start",
    );
    await c.put("/w/a", "1");
    await c.delete("/w/a");
    await c.put("/other", "not watched");
    await until(() => seen.some((e) => e.type === "delete"), 10_000, "the delete");
    await etcd.restart();
    await c.put("/w/b", "after restart");
    await until(() => seen.some((e) => e.kv.key === "/w/b"), 20_000, "the put after the restart");
    const after = seen.filter((e) => e.kv.key !== "/w/ready");
    assertEquals(after.map((e) => [e.type, e.kv.key, e.kv.value]), [
      ["put", "/w/a", "1"],
      ["delete", "/w/a", ""],
      ["put", "/w/b", "after restart"],
    ]);
  } finally {
    stop.abort();
    await watching;
  }
});
