// What a cluster keeps in a real etcd besides the leader: the in-sync set
// (compare-and-swap by revision and by the leader's lease; only members may
// campaign), node registration, and the stream schema every node must share.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { startEtcd } from "../harness/etcd.ts";
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { campaign } from "../../cluster/election.ts";
import { mayLead, readInSync, writeInSync } from "../../cluster/in_sync.ts";
import { streamKeys } from "../../cluster/keys.ts";
import { LeaseKeeper } from "../../cluster/lease_keeper.ts";
import { listNodes, NodeNameTakenError, registerNode } from "../../cluster/nodes.ts";
import { checkClusterSchema } from "../../cluster/schema_check.ts";

Deno.test("in-sync set: written by the leader only, compare-and-swap by revision; only members may campaign", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const keys = streamKeys("trades");
  const l1 = await LeaseKeeper.grant(c, { ttlSeconds: 5 });
  const l2 = await LeaseKeeper.grant(c, { ttlSeconds: 5 });
  const l3 = await LeaseKeeper.grant(c, { ttlSeconds: 5 });
  try {
    const n1 = { node: "n1", url: "http://h1:8801" };
    const won = await campaign(c, keys, n1, l1.id);
    assert(won.won);
    assertEquals(won.term, 1);
    const lost = await campaign(c, keys, { node: "n2", url: "http://h2:8801" }, l2.id);
    assert(!lost.won);
    assertEquals(lost.leader?.node, "n1");
    // A retry of the winner's own campaign (its answer lost) finds itself.
    assertEquals((await campaign(c, keys, n1, l1.id)).won, true);

    const leader = { term: 1, leaseId: l1.id, valid: () => l1.valid() };
    const s0 = await readInSync(c, keys);
    assertEquals(s0?.nodes, ["n1"]);
    const grown = await writeInSync(c, keys, leader, s0, ["n1", "n2", "n3"]);
    assert(grown.written);
    assertEquals(grown.set.nodes, ["n1", "n2", "n3"]);
    // A write based on the set read before: refused, not deposed.
    const stale = await writeInSync(c, keys, leader, s0, ["n1"]);
    assertEquals(stale, { written: false, deposed: false, set: grown.set });
    // The leader drops n3 (lagging) by writing first.
    const shrunk = await writeInSync(c, keys, leader, grown.set, ["n1", "n2"]);
    assert(shrunk.written);
    assertEquals(mayLead(shrunk.set, "n3"), false);
    assertEquals(mayLead(shrunk.set, "n2"), true);

    // n1 goes; n3 may not lead, n2 may, with the next term.
    await l1.revoke();
    const n3 = await campaign(c, keys, { node: "n3", url: "http://h3:8801" }, l3.id);
    assertEquals(n3, { won: false, leader: null, inSync: false, revision: n3.revision });
    const n2 = await campaign(c, keys, { node: "n2", url: "http://h2:8801" }, l2.id);
    assert(n2.won);
    assertEquals(n2.term, 2);
    assertEquals((await readInSync(c, keys))?.term, 2);

    // The old leader's write, as if its clock still said valid: deposed.
    const late = await writeInSync(c, keys, { ...leader, valid: () => true }, shrunk.set, ["n1"]);
    assert(!late.written);
    assertEquals(late.deposed, true);
    // And with its own clock it does not even try.
    await assertRejects(
      () => writeInSync(c, keys, leader, shrunk.set, ["n1"]),
      RangeError,
      "no longer holds its lease",
    );
  } finally {
    await l1.revoke();
    await l2.revoke();
    await l3.revoke();
  }
});

Deno.test("node registration: a name is one node's; the same node restarted takes its record over", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const a = await LeaseKeeper.grant(c, { ttlSeconds: 5 });
  const b = await LeaseKeeper.grant(c, { ttlSeconds: 5 });
  try {
    await registerNode(c, { node: "n1", url: "http://h1:8801" }, a.id, 5);
    await registerNode(c, { node: "n2", url: "http://h2:8801" }, a.id, 5);
    const err = await assertRejects(
      () => registerNode(c, { node: "n1", url: "http://h9:8801" }, b.id, 5),
      NodeNameTakenError,
    );
    assertEquals(
      err.message,
      'node name "n1" is registered by http://h1:8801, not this node (http://h9:8801): give each ' +
        "node its own --node; if that node is gone, its registration lapses within 5 s",
    );
    // The same URL under a new lease: the node restarted.
    await registerNode(c, { node: "n1", url: "http://h1:8801" }, b.id, 5);
    assertEquals((await c.get("/streamcast/nodes/n1"))?.lease, b.id);
    assertEquals(await listNodes(c), [
      { node: "n1", url: "http://h1:8801" },
      { node: "n2", url: "http://h2:8801" },
    ]);
    await a.revoke();
    assertEquals((await listNodes(c)).map((n) => n.node), ["n1"], "n2 went with its lease");
  } finally {
    await a.revoke();
    await b.revoke();
  }
});

Deno.test("schema check: the first node writes the stream's schema; a node with another refuses in one line", async () => {
  await using etcd = await startEtcd();
  const c = new EtcdClient(etcd.url);
  const schema = {
    type: "object",
    properties: { sym: { type: "string" }, px: { type: "number" } },
    required: ["sym", "px"],
  };
  assertEquals(await checkClusterSchema(c, "trades", "n1", schema), null);
  assertEquals(await checkClusterSchema(c, "trades", "n2", structuredClone(schema)), null);
  // Keyword order and the order of `required` mean nothing.
  assertEquals(
    await checkClusterSchema(c, "trades", "n2", {
      required: ["px", "sym"],
      properties: { sym: { type: "string" }, px: { type: "number" } },
      type: "object",
    }),
    null,
  );
  const typed = structuredClone(schema);
  typed.properties.px.type = "string";
  assertEquals(
    await checkClusterSchema(c, "trades", "n3", typed),
    `stream "trades": this node's schema differs from the cluster's (written by n1): ` +
      `at properties.px.type this node has "string", the cluster "number"`,
  );
  const reordered = { ...schema, properties: { px: { type: "number" }, sym: { type: "string" } } };
  assertEquals(
    await checkClusterSchema(c, "trades", "n3", reordered),
    `stream "trades": this node's schema differs from the cluster's (written by n1): ` +
      `the columns at properties are in another order: this node ["px","sym"], the cluster ["sym","px"]`,
  );
  const added = {
    ...schema,
    properties: { ...schema.properties, venue: { type: ["string", "null"] } },
  };
  const msg = await checkClusterSchema(c, "trades", "n3", added);
  assertEquals(
    msg,
    `stream "trades": this node's schema differs from the cluster's (written by n1): ` +
      `at properties.venue this node has {"type":["string","null"]}, the cluster nothing`,
  );
  assert(!msg!.includes("\n"), "one line");
  // Another stream has its own schema.
  assertEquals(await checkClusterSchema(c, "quotes", "n3", added), null);
});
