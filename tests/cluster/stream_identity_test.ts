// What a node's copy of a stream's log stands for, weighed against a real
// etcd: a copy that may lack committed rows is joining, and stays so across
// restarts until it has caught up and recorded itself.
import { assertEquals, assertRejects } from "../harness/assert.ts";
import { startEtcd } from "../harness/etcd.ts";
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { encodeInSync } from "../../cluster/in_sync.ts";
import { streamKeys } from "../../cluster/keys.ts";
import { claimCopy, type LogCopy, recordCopy } from "../../cluster/stream_identity.ts";

const PREFIX = { prefix: "/t" };
const keys = streamKeys("s", "/t");

function copy(createdUs: number, more: Partial<LogCopy> = {}): LogCopy {
  return { createdUs, madeNow: false, end: 6, committed: 6, ...more };
}

async function recorded(etcd: EtcdClient, node: string): Promise<unknown> {
  const kv = await etcd.get(keys.copies + node);
  return kv ? JSON.parse(kv.value) : null;
}

Deno.test("claimCopy: a copy stands, or is joining, by what the cluster recorded", async () => {
  await using etcd = await startEtcd();
  const client = new EtcdClient(etcd.url);

  // No in-sync set yet (no term was ever won): nothing can be committed, any copy stands.
  assertEquals(await claimCopy(client, "s", "n1", copy(100, { madeNow: true }), PREFIX), {
    joining: false,
    why: null,
  });
  assertEquals(await recorded(client, "n1"), { created_us: 100 });

  await client.put(keys.inSync, encodeInSync(1, ["n1", "n2"]));
  // The copy n1 recorded stands.
  assertEquals((await claimCopy(client, "s", "n1", copy(100), PREFIX)).joining, false);
  // A log made now (the folder wiped), whoever founded the stream: joining,
  // and the record says n1 holds no copy.
  const wiped = await claimCopy(client, "s", "n1", copy(200, { madeNow: true, end: 1 }), PREFIX);
  assertEquals(wiped.joining, true);
  assertEquals(await recorded(client, "n1"), { created_us: null });
  // Restarted halfway through catching up: still joining.
  const halfway = await claimCopy(client, "s", "n1", copy(200, { end: 3, committed: 3 }), PREFIX);
  assertEquals(halfway, { joining: true, why: "this node stopped before it caught up" });
  // Caught up and recorded: it stands again.
  await recordCopy(client, "s", "n1", 200, PREFIX);
  assertEquals((await claimCopy(client, "s", "n1", copy(200), PREFIX)).joining, false);
  // Another copy than the recorded one (a folder from elsewhere): joining.
  assertEquals((await claimCopy(client, "s", "n1", copy(300), PREFIX)).joining, true);
  await recordCopy(client, "s", "n1", 300, PREFIX);
  // The recorded copy, but shorter than the commit index it recorded itself: joining.
  const short = await claimCopy(client, "s", "n1", copy(300, { end: 4, committed: 6 }), PREFIX);
  assertEquals(short, {
    joining: true,
    why: "this node's log ends at 4 but rows up to 5 were committed",
  });

  // A node with no record: a log older than this start (from before copies were
  // recorded) stands and is recorded; a log made now is joining.
  assertEquals((await claimCopy(client, "s", "n2", copy(400), PREFIX)).joining, false);
  assertEquals(await recorded(client, "n2"), { created_us: 400 });
  const fresh = await claimCopy(client, "s", "n3", copy(500, { madeNow: true, end: 1 }), PREFIX);
  assertEquals(fresh.joining, true);

  await client.put(keys.copies + "n4", "not json");
  await assertRejects(() => claimCopy(client, "s", "n4", copy(600), PREFIX), TypeError);
});
