// `cli.ts serve --cluster` end to end: a real etcd (tests/harness/etcd.ts) and three
// real serve processes on free ports, stopped by PID. Election and the
// refusals of a follower (307 to the leader, before a publish upgrade too),
// commit at R (a paused follower holds a publish until it is back; with too
// few nodes, 503 not_enough_replicas), the node refusals at start (another
// schema; --stdin), and the upstream connected by the leader alone.
import { assert, assertEquals } from "../../harness/assert.ts";
import { startEtcd } from "../../harness/etcd.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { runServe } from "../../harness/serve.ts";
import {
  converged,
  leaderOf,
  post,
  rowsOf,
  rowsShown,
  SCHEMA,
  startServeNodes,
} from "../../harness/serve_nodes.ts";

Deno.test("serve --cluster: one leader; a follower answers a publish with 307 to it, before an upgrade too; /head and metrics say so", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], { etcd: etcd.url });
    const leader = await leaderOf(nodes);
    const followers = nodes.filter((n) => n !== leader);
    const heads = await Promise.all(nodes.map((n) => n.head()));
    for (const h of heads) {
      assertEquals(h!.leader, leader.url);
      assertEquals(h!.replicas, 2);
      assertEquals(h!.role, h!.node === leader.name ? "leader" : "follower");
    }
    // POST to a follower: 307 to the leader's same path and query.
    const res = await fetch(`${followers[0].url}/t?x=1`, {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body: rowsOf("a", 1, 1),
      redirect: "manual",
    });
    assertEquals(res.status, 307);
    assertEquals(res.headers.get("location"), `${leader.url}/t?x=1`);
    assertEquals((await res.json()).error, "not_leader");
    // The publish socket of a follower: 307 before the upgrade.
    const up = await fetch(`${followers[1].url}/t/publish?producer=w`, {
      headers: {
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
      },
      redirect: "manual",
    });
    await up.body?.cancel();
    assertEquals(up.status, 307);
    assertEquals(up.headers.get("location"), `${leader.url}/t/publish?producer=w`);
    // Followed (fetch resends the body), stored once, acknowledged once committed at R = 2.
    const a = await post(followers[0].url, rowsOf("a", 1, 3), { producer: "a", seq: 1 });
    assertEquals(a?.status, 200);
    assertEquals(a?.url, leader.url);
    assertEquals([a?.body.first, a?.body.last], [1, 3]);
    const again = await post(followers[1].url, rowsOf("a", 1, 3), { producer: "a", seq: 1 });
    assertEquals(again?.body, { first: 1, last: 3, count: 3, duplicate: true });
    // Every node shows the committed rows, the same.
    await until(async () =>
      (await Promise.all(nodes.map((n) => n.head()))).every((h) => h?.end === 4)
    );
    const shown = await Promise.all(nodes.map((n) => rowsShown(n.url, 4)));
    assertEquals(shown[0].map(([o]) => o), [1, 2, 3]);
    assertEquals(shown[1], shown[0]);
    assertEquals(shown[2], shown[0]);
    const metrics = await (await fetch(`${leader.url}/_/metrics`)).text();
    assert(/streamcast_cluster_leader\{stream="t"\} 1/.test(metrics), metrics);
    assert(
      /streamcast_cluster_leader_changes_total\{change="elected",stream="t"\} 1/.test(metrics),
      metrics,
    );
    assert(
      /streamcast_cluster_commit_wait_seconds_count\{stream="t"\} [1-9]/.test(metrics),
      metrics,
    );
    assert(/"event":"cluster_leader"/.test(leader.stderr()), leader.stderr());
  } finally {
    await rmrf(root);
  }
});

Deno.test("serve --cluster: a node whose schema differs refuses to start naming the difference; --stdin is refused", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await startServeNodes(root, ["n1"], { etcd: etcd.url, replicas: 1 });
    await leaderOf(nodes);
    const other = `${root}/other.json`;
    const schema = structuredClone(SCHEMA);
    schema.properties.i = { type: "number" } as never;
    await Deno.writeTextFile(other, JSON.stringify(schema));
    const common = ["--cluster", etcd.url, "--root", `${root}/n2`, "--stream", `t=${other}`];
    const r = await runServe([...common, "--node", "n2", "--advertise", "http://127.0.0.1:1"]);
    assertEquals(r.code, 1);
    assertEquals(
      r.stderr.trim(),
      `streamcast serve: stream "t": this node's schema differs from the cluster's (written by ` +
        `n1): at properties.i.type this node has "number", the cluster "integer"`,
    );
    const stdin = await runServe([...common, "--node", "n3", "--stdin", "t"]);
    assertEquals(stdin.code, 2);
    assertEquals(stdin.stderr.trim().split("\n").length, 1);
    assert(/--stdin cannot feed a cluster/.test(stdin.stderr), stdin.stderr);
  } finally {
    await rmrf(root);
  }
});

Deno.test("serve --cluster: at R = 3 a paused follower leaves the in-sync set, publishes answer 503 not_enough_replicas, and the one waiting is acknowledged once it is back", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], {
      etcd: etcd.url,
      replicas: 3,
    });
    const leader = await leaderOf(nodes);
    const [f1] = nodes.filter((n) => n !== leader);
    assertEquals(
      (await post(leader.url, rowsOf("a", 1, 1), { producer: "a", seq: 1 }))?.status,
      200,
    );
    f1.pause();
    try {
      let answer: Awaited<ReturnType<typeof post>> | undefined;
      const pending = post(leader.url, rowsOf("a", 2, 1), { producer: "a", seq: 2 }, 30_000)
        .then((a) => (answer = a));
      // The paused follower leaves the in-sync set; R = 3 cannot be met without it.
      await until(async () => (await leader.head())?.in_sync.length === 2, 15_000, "f1 dropped");
      const refused = await post(leader.url, rowsOf("b", 1, 1), { producer: "b", seq: 1 });
      assertEquals([refused?.status, refused?.body.error], [503, "not_enough_replicas"]);
      assertEquals(answer, undefined); // not acknowledged: only two nodes hold it
      f1.resume();
      await pending;
      assertEquals([answer?.status, answer?.body.first], [200, 2]);
      assertEquals((await leader.head())?.in_sync.length, 3);
    } finally {
      f1.resume();
    }
  } finally {
    await rmrf(root);
  }
});

Deno.test("serve --cluster --replica-ring-bytes 65536: a follower back after the ring moved past it is caught up from the leader's log, every row once", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], {
      etcd: etcd.url,
      extra: ["--replica-ring-bytes", "65536"],
    });
    const leader = await leaderOf(nodes);
    const [away] = nodes.filter((n) => n !== leader);
    assertEquals(
      (await post(leader.url, rowsOf("a", 1, 10), { producer: "a", seq: 1 }))?.status,
      200,
    );
    await converged(nodes);
    await away.kill();
    // 40 commits of 250 rows (about 30 bytes each): far more than the ring holds.
    for (let seq = 2; seq <= 41; seq++) {
      const a = await post(leader.url, rowsOf("a", seq, 250), { producer: "a", seq });
      assertEquals(a?.status, 200, `seq ${seq}: ${JSON.stringify(a?.body)}`);
    }
    await away.start();
    const end = await converged(nodes);
    assertEquals(end, 1 + 10 + 40 * 250);
    assert(
      leader.stderr().includes(`"replication_catch_up"`) &&
        new RegExp(`"replication_catch_up".*"node":"${away.name}"`).test(leader.stderr()),
      `the leader did not catch ${away.name} up from its log:\n${leader.stderr().slice(-3000)}`,
    );
    const want = await rowsShown(leader.url, end);
    assertEquals(await rowsShown(away.url, end), want);
    assertEquals(want.map(([o]) => o), Array.from({ length: end - 1 }, (_, i) => i + 1));
  } finally {
    await rmrf(root);
  }
});
