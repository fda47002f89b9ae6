// `cli.ts serve --cluster` with a node whose disk was wiped (its root
// emptied while it was stopped), against a real etcd and real serve
// processes: a node whose log may lack committed rows is joining — it never
// leads before it has caught up from a node that holds them, whoever founded
// the stream; while no such node runs, publishes are refused (503) rather
// than given an offset that was acknowledged before.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { startEtcd } from "../../harness/etcd.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import {
  converged,
  leaderOf,
  post,
  rowsOf,
  rowsShown,
  SCHEMA,
  ServeNode,
  type ServeNodeOptions,
} from "../../harness/serve_nodes.ts";

// Nodes `names` of one cluster, made (not started); every one is killed on dispose.
async function makeNodes(
  root: string,
  names: string[],
  o: ServeNodeOptions,
): Promise<ServeNode[] & AsyncDisposable> {
  const schemaPath = join(root, "schema.json");
  await Deno.writeTextFile(schemaPath, JSON.stringify(SCHEMA));
  const nodes = names.map((n) => new ServeNode(n, root, schemaPath, o));
  return Object.assign(nodes, {
    async [Symbol.asyncDispose]() {
      await Promise.allSettled(nodes.map((n) => n.kill()));
    },
  });
}

// /head's `joining` (absent on a node that does not say).
async function joining(node: ServeNode): Promise<boolean | null> {
  const res = await fetch(`${node.url}/t/head`).catch(() => null);
  if (!res) return null;
  const h = await res.json();
  return h.cluster?.joining ?? null;
}

// The events a node logged (JSON lines) that are among `names`, in order.
function events(node: ServeNode, names: string[]): string[] {
  const out: string[] = [];
  for (const line of node.stderr().split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      const v = JSON.parse(line);
      if (names.includes(v.event)) out.push(v.event);
    } catch {
      // not a log line
    }
  }
  return out;
}

Deno.test("serve --cluster: the founder's disk wiped while the only other holder is down — publishes answer 503, not offset 1; the holder back leads, no committed row lost or replaced", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await makeNodes(root, ["n1", "n2"], { etcd: etcd.url, replicas: 2 });
    const [n1, n2] = nodes;
    // n1 founds the stream (it writes the stream id and leads term 1).
    await n1.start();
    await until(async () => (await n1.head())?.role === "leader", 20_000, "n1 to lead");
    await n2.start();
    assertEquals((await leaderOf(nodes)).name, "n1");
    const first = await post(n1.url, rowsOf("a", 1, 5), { producer: "a", seq: 1 });
    assertEquals(first?.status, 200, JSON.stringify(first));
    assertEquals(first?.body, { first: 1, last: 5, count: 5 });
    assertEquals(await converged(nodes), 6);
    const committed = await rowsShown(n2.url, 6);
    assertEquals(committed.map(([o]) => o), [1, 2, 3, 4, 5]);

    await n2.stop();
    await n1.stop();
    await rmrf(n1.root);
    await n1.start();

    // n1 comes back with an empty log: it says it is joining, leads nothing
    // and refuses publishes for as long as the holder of rows 1..5 is down.
    await until(async () => (await n1.head()) !== null, 20_000, "n1 to answer");
    // Past two leases: an old leader key has expired, a campaign would have been won.
    const dwellUntil = Date.now() + 6_000;
    const refusals: Record<string, unknown>[] = [];
    while (Date.now() < dwellUntil) {
      const head = await n1.head();
      assert(head?.role !== "leader", `n1 leads with an empty log: ${JSON.stringify(head)}`);
      // A node that took the publish would hold it until a commit that cannot come.
      const r = await post(n1.url, rowsOf("b", 1, 1), { producer: "b", seq: 1 }, 3_000);
      assert(r !== null, "n1 took a publish (no answer: it waits to commit it)");
      assertEquals(r.status, 503, `n1 alone took a publish: ${JSON.stringify(r.body)}`);
      refusals.push(r.body);
      await new Promise((r) => setTimeout(r, 250));
    }
    assert(refusals.length > 0);
    for (const body of refusals) {
      assertEquals(body.error, "no_leader");
      assert(/may lack committed rows/.test(String(body.detail)), JSON.stringify(body));
    }
    const alone = await n1.head();
    assertEquals(alone?.role, "follower");
    assertEquals(alone?.leader, null);
    assertEquals(alone?.end, 1);
    assertEquals(await joining(n1), true, "n1's /head says it is joining");

    // The holder comes back: it leads, n1 catches up and stops joining.
    await n2.start();
    assertEquals((await leaderOf(nodes, 30_000)).name, "n2");
    await until(async () => (await joining(n1)) === false, 30_000, "n1 to have caught up");
    assertEquals(await converged(nodes), 6);
    const [on1, on2] = await Promise.all([rowsShown(n1.url, 6), rowsShown(n2.url, 6)]);
    assertEquals(on1, committed);
    assertEquals(on2, committed);

    // Offsets go on at 6; the first publish's resend is a duplicate at its offsets.
    const again = await post(n1.url, rowsOf("a", 1, 5), { producer: "a", seq: 1 });
    assertEquals(again?.body, { first: 1, last: 5, count: 5, duplicate: true });
    const next = await post(n1.url, rowsOf("a", 2, 3), { producer: "a", seq: 2 });
    assertEquals(next?.body, { first: 6, last: 8, count: 3 });
    assertEquals(await converged(nodes), 9);
    const [end1, end2] = await Promise.all([rowsShown(n1.url, 9), rowsShown(n2.url, 9)]);
    assertEquals(end1, end2);
    assertEquals(end1.slice(0, 5), committed);
    assertEquals(events(n1, ["cluster_leader"]).length, 1, "n1 led term 1 only");
  } finally {
    await rmrf(root);
  }
});

Deno.test("serve --cluster: a follower's disk wiped while the leader stays up — it rejoins, catches up before it may lead, then takes over at the right offset", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await makeNodes(root, ["n1", "n2", "n3"], {
      etcd: etcd.url,
      replicas: 2,
    });
    const [n1] = nodes;
    // n1 founds the stream; rows 1..5 are committed; then n1 is killed and
    // another node leads, so that the founder is the follower that gets wiped.
    await n1.start();
    await until(async () => (await n1.head())?.role === "leader", 20_000, "n1 to lead");
    await Promise.all([nodes[1].start(), nodes[2].start()]);
    assertEquals((await leaderOf(nodes)).name, "n1");
    const first = await post(n1.url, rowsOf("a", 1, 5), { producer: "a", seq: 1 });
    assertEquals(first?.body, { first: 1, last: 5, count: 5 });
    assertEquals(await converged(nodes), 6);
    const committed = await rowsShown(n1.url, 6);
    await n1.kill();
    const leader = await leaderOf(nodes.filter((n) => n.running), 30_000);
    const more = await post(leader.url, rowsOf("a", 2, 2), { producer: "a", seq: 2 });
    assertEquals(more?.body, { first: 6, last: 7, count: 2 });

    await rmrf(n1.root);
    await n1.start();
    await until(async () => (await joining(n1)) === false, 30_000, "n1 to have caught up");
    assertEquals(await converged(nodes), 8);
    const shown = await Promise.all(nodes.map((n) => rowsShown(n.url, 8)));
    assertEquals(shown[0], shown[1]);
    assertEquals(shown[0], shown[2]);
    assertEquals(shown[0].slice(0, 5), committed);
    // The restarted n1 joined before it could lead (it led term 1 before the wipe).
    assertEquals(events(n1, ["cluster_leader", "cluster_joining", "cluster_joined"]), [
      "cluster_leader",
      "cluster_joining",
      "cluster_joined",
    ]);

    // The leader goes; the survivors (n1 among them) go on at offset 8.
    await leader.kill();
    const next = await leaderOf(nodes.filter((n) => n.running), 30_000);
    const last = await post(next.url, rowsOf("a", 3, 1), { producer: "a", seq: 3 });
    assertEquals(last?.body, { first: 8, last: 8, count: 1 });
    const survivors = nodes.filter((n) => n.running);
    assertEquals(await converged(survivors), 9);
    const after = await Promise.all(survivors.map((n) => rowsShown(n.url, 9)));
    assertEquals(after[0], after[1]);
    assertEquals(after[0].slice(0, 7), shown[0]);
  } finally {
    await rmrf(root);
  }
});
