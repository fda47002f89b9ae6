// Streams created and deleted while a cluster serves, against a real etcd and
// two real `serve --cluster` nodes: created on one node, served by both
// (published to through the leader, read on the other); a conflicting
// definition refused; deleted on one node, closed on both (the subscriber on
// the other gets 4410) and its definition gone from etcd; one given again
// with another description changes nothing (a subscriber stays open); a node started
// later serves what is defined. And a create and a delete whose etcd answer
// is lost are read back and answered as what etcd holds. And a node whose
// disk is full when a stream is created opens it once the disk has room
// (it tries every second), or never, when it is deleted meanwhile. And a node
// down while created streams were deleted (one created again) removes their
// folders at its next start, and nothing else under its root.
import { assert, assertEquals } from "../harness/assert.ts";
import { startEtcd } from "../harness/etcd.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import { SCHEMA, startServeNodes } from "../harness/serve_nodes.ts";
import { TestSub } from "../harness/subscriber.ts";
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { b64 } from "../../cluster/_etcd_wire.ts";
import { definitionsDir } from "../../cluster/keys.ts";
import { EtcdAnswerLoss } from "../harness/jepsen/etcd_answer_loss.ts";
import { SmallDisk } from "../harness/small_disk.ts";
import { join } from "node:path";
import { Log } from "../../log/mod.ts";

async function status(url: string, init?: RequestInit): Promise<number> {
  const res = await fetch(url, init);
  await res.body?.cancel();
  return res.status;
}

async function put(url: string, name: string, body: unknown) {
  const res = await fetch(`${url}/_/streams/${name}`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() as Record<string, unknown> };
}

Deno.test("serve --cluster: a stream created on one node is served by every node, and deleted on one is closed on every node", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2"], { etcd: etcd.url });
    const [n1, n2] = nodes;
    const created = await put(n1.url, "q", { schema: SCHEMA, publish: true });
    assertEquals(created.status, 201, JSON.stringify(created.body));
    assertEquals(created.body.stream, "q");
    // Stored in etcd under the cluster's prefix.
    const kv = await new EtcdClient(etcd.url).get("/streamcast/definitions/q");
    assertEquals(JSON.parse(kv!.value).publish, true);
    // Every node serves it, with one stream id.
    await until(async () => (await status(`${n2.url}/q/head`)) === 200, 20_000, "q on n2");
    const heads = await Promise.all(
      nodes.map(async (n) =>
        (await (await fetch(`${n.url}/q/head`)).json()) as Record<string, unknown>
      ),
    );
    assertEquals(heads[0].stream_id, heads[1].stream_id);
    assert(typeof heads[0].stream_id === "string", "a stream id");
    // Read on n2, published through whichever node leads.
    const sub = await TestSub.open(`${n2.url.replace("http", "ws")}/q`);
    let posted = 0;
    await until(
      async () => {
        for (const n of nodes) {
          const res = await fetch(`${n.url}/q`, {
            method: "POST",
            headers: { "content-type": "application/x-ndjson" },
            body: JSON.stringify({ p: "a", seq: 1, i: 0 }) + "\n",
            redirect: "manual",
          });
          await res.body?.cancel();
          if (res.status === 200) {
            posted++;
            return true;
          }
        }
        return false;
      },
      20_000,
      "a leader of q taking the row",
    );
    assertEquals(posted, 1);
    await sub.waitLines(1);
    assertEquals(sub.offsets(), [1]);
    // Another definition: 409 on any node.
    const other = await put(n2.url, "q", { schema: SCHEMA, publish: false });
    assertEquals([other.status, other.body.error], [409, "conflict"]);
    assertEquals((await put(n2.url, "q", { schema: SCHEMA, publish: true })).status, 200);
    // Only annotations and the order of required differ: the same, nothing written to etcd
    // (so no node reopens it), and the subscriber on n2 stays open and gets the next row.
    const revision = (await new EtcdClient(etcd.url).get("/streamcast/definitions/q"))!.modRevision;
    const annotated = {
      ...SCHEMA,
      description: "quotes",
      required: [...SCHEMA.required].reverse(),
    };
    assertEquals((await put(n1.url, "q", { schema: annotated, publish: true })).status, 200);
    const after = await new EtcdClient(etcd.url).get("/streamcast/definitions/q");
    assertEquals([after!.modRevision, JSON.parse(after!.value).schema], [revision, SCHEMA]);
    await until(
      async () => {
        for (const n of nodes) {
          const res = await fetch(`${n.url}/q`, {
            method: "POST",
            headers: { "content-type": "application/x-ndjson" },
            body: JSON.stringify({ p: "a", seq: 2, i: 1 }) + "\n",
            redirect: "manual",
          });
          await res.body?.cancel();
          if (res.status === 200) return true;
        }
        return false;
      },
      20_000,
      "a leader of q taking the second row",
    );
    await sub.waitLines(2);
    assertEquals([sub.offsets(), sub.closed], [[1, 2], null]);
    // A cluster's streams are durable.
    const ephemeral = await put(n2.url, "e", { schema: SCHEMA, ephemeral: true });
    assertEquals([ephemeral.status, ephemeral.body.error], [400, "bad_request"]);
    // Deleted on n1: closed on n2 too.
    assertEquals(await status(`${n1.url}/_/streams/q`, { method: "DELETE" }), 204);
    const closed = await sub.done;
    assertEquals([closed.code, JSON.parse(closed.reason)], [4410, { error: "stream_deleted" }]);
    await until(
      async () =>
        (await status(`${n1.url}/q/head`)) === 404 && (await status(`${n2.url}/q/head`)) === 404,
      20_000,
      "q closed on every node",
    );
    assertEquals(await new EtcdClient(etcd.url).get("/streamcast/definitions/q"), null);
    assertEquals(await status(`${n2.url}/_/streams/q`, { method: "DELETE" }), 404);
    // The declared stream is untouched on both.
    for (const n of nodes) assertEquals(await status(`${n.url}/t/head`), 200);
    // Defined again, then a node restarted serves it from etcd.
    assertEquals((await put(n2.url, "r", { schema: SCHEMA })).status, 201);
    await n1.kill();
    await n1.start();
    await until(
      async () => (await status(`${n1.url}/r/head`)) === 200,
      20_000,
      "r on restarted n1",
    );
  } finally {
    await rmrf(root);
  }
});

Deno.test("serve --cluster: a create and a delete whose etcd answer is lost are read back, not sent again", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  const proxy = new EtcdAnswerLoss(etcd.url);
  try {
    await using nodes = await startServeNodes(root, ["n1"], { etcd: proxy.url, replicas: 1 });
    const [n1] = nodes;
    const key = b64(`${definitionsDir()}q`);
    // The first write of q's definition: applied by etcd, its answer dropped.
    let once = true;
    proxy.loseWhen((c) => {
      const pick = once && c.path === "/v3/kv/txn" && c.body.includes(key) &&
        c.body.includes("request_put");
      if (pick) once = false;
      return pick;
    });
    const created = await put(n1.url, "q", { schema: SCHEMA, publish: true });
    assertEquals(created.status, 201, JSON.stringify(created.body));
    assertEquals(proxy.lost.length, 1);
    assertEquals(await status(`${n1.url}/q/head`), 200);
    once = true;
    proxy.loseWhen((c) => {
      const pick = once && c.path === "/v3/kv/txn" && c.body.includes(key) &&
        c.body.includes("request_delete_range");
      if (pick) once = false;
      return pick;
    });
    assertEquals(await status(`${n1.url}/_/streams/q`, { method: "DELETE" }), 204);
    assertEquals(proxy.lost.length, 2);
    assertEquals(await new EtcdClient(etcd.url).get("/streamcast/definitions/q"), null);
    assertEquals(await status(`${n1.url}/q/head`), 404);
  } finally {
    await proxy.close();
    await rmrf(root);
  }
});

Deno.test("serve --cluster: a node whose disk was full when a stream was created opens it once there is room", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  // n2's root is a small disk of its own, full when q and r are created.
  const disk = await SmallDisk.mount(join(root, "n2"), 16);
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2"], {
      etcd: etcd.url,
      extra: ["--min-free-bytes", "0"],
    });
    const [n1, n2] = nodes;
    await disk.fill(0);
    assertEquals((await put(n1.url, "q", { schema: SCHEMA, publish: true })).status, 201);
    assertEquals((await put(n1.url, "r", { schema: SCHEMA })).status, 201);
    await until(
      () => n2.stderr().split("\n").filter((l) => l.includes("stream_open_failed")).length >= 2,
      20_000,
      "n2 failing to open q and r",
    );
    assertEquals(await status(`${n2.url}/q/head`), 404);
    // r is deleted while n2 has not opened it: n2 stops trying.
    assertEquals(await status(`${n1.url}/_/streams/r`, { method: "DELETE" }), 204);
    await disk.free();
    await until(async () => (await status(`${n2.url}/q/head`)) === 200, 20_000, "q on n2");
    // Said once, however many tries it took.
    assertEquals(n2.stderr().split("\n").filter((l) => l.includes("stream_open_failed")).length, 2);
    const heads = await Promise.all(
      nodes.map(async (n) => (await (await fetch(`${n.url}/q/head`)).json()).stream_id),
    );
    assertEquals(heads[0], heads[1]);
    // A row published through the leader reaches n2.
    const sub = await TestSub.open(`${n2.ws}/q?offset=1`);
    await until(
      async () => {
        for (const n of nodes) {
          const res = await fetch(`${n.url}/q`, {
            method: "POST",
            headers: { "content-type": "application/x-ndjson" },
            body: JSON.stringify({ p: "a", seq: 1, i: 0 }) + "\n",
            redirect: "manual",
          });
          await res.body?.cancel();
          if (res.status === 200) return true;
        }
        return false;
      },
      20_000,
      "a leader of q taking the row",
    );
    await sub.waitLines(1);
    await sub.close();
    // r was never opened on n2 and is not now; its folder is not there.
    await new Promise((r) => setTimeout(r, 2500));
    assertEquals(await status(`${n2.url}/r/head`), 404);
    assertEquals(await Deno.stat(join(n2.root, "r")).then(() => true, () => false), false);
    const opened = n2.stderr().split("\n").filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l)).filter((e) => e.event === "stream_created");
    assertEquals(opened.map((e) => e.stream), ["q"]);
  } finally {
    await disk.close();
    await rmrf(root);
  }
});

// Posts one row of `stream` through whichever of `nodes` leads it.
async function postRow(nodes: { url: string }[], stream: string, i: number): Promise<void> {
  await until(
    async () => {
      for (const n of nodes) {
        const res = await fetch(`${n.url}/${stream}`, {
          method: "POST",
          headers: { "content-type": "application/x-ndjson" },
          body: JSON.stringify({ p: "a", seq: i + 1, i }) + "\n",
          redirect: "manual",
        });
        await res.body?.cancel();
        if (res.status === 200) return true;
      }
      return false;
    },
    20_000,
    `a leader of ${stream} taking row ${i}`,
  );
}

async function headOf(url: string, stream: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}/${stream}/head`);
  return await res.json() as Record<string, unknown>;
}

const exists = (path: string) => Deno.stat(path).then(() => true, () => false);

Deno.test("serve --cluster: a node down while created streams were deleted removes their folders at its next start, and serves one created again afresh", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2"], { etcd: etcd.url, replicas: 1 });
    const [n1, n2] = nodes;
    assertEquals((await put(n1.url, "q", { schema: SCHEMA, publish: true })).status, 201);
    assertEquals((await put(n1.url, "r", { schema: SCHEMA, publish: true })).status, 201);
    await until(
      async () =>
        (await status(`${n2.url}/q/head`)) === 200 &&
        (await status(`${n2.url}/r/head`)) === 200,
      20_000,
      "q and r on n2",
    );
    await postRow(nodes, "r", 0);
    await postRow(nodes, "r", 1);
    await until(
      async () => (await headOf(n2.url, "r")).end_offset === 3,
      20_000,
      "r's two rows on n2",
    );
    const oldR = (await headOf(n2.url, "r")).stream_id;
    // What n2 holds that is not a created stream: a folder of the operator's,
    // and a log of the operator's own (not opened as a created stream).
    await Deno.mkdir(join(n2.root, "notes"));
    await Deno.writeTextFile(join(n2.root, "notes", "readme.txt"), "mine\n");
    await (await Log.open(join(n2.root, "own"))).close();
    // n2 is down while q is deleted and r deleted and created again.
    await n2.kill();
    assertEquals(await status(`${n1.url}/_/streams/q`, { method: "DELETE" }), 204);
    assertEquals(await status(`${n1.url}/_/streams/r`, { method: "DELETE" }), 204);
    assertEquals((await put(n1.url, "r", { schema: SCHEMA, publish: true })).status, 201);
    const newR = (await headOf(n1.url, "r")).stream_id;
    assert(typeof newR === "string" && newR !== oldR, "r created again has another stream_id");
    await postRow([n1], "r", 0);
    assert(await exists(join(n2.root, "q")), "q's folder left on the stopped n2");
    await n2.start();
    await until(
      async () => (await status(`${n2.url}/r/head`)) === 200,
      20_000,
      "r on restarted n2",
    );
    // q's folder is gone; r's is the new stream's, holding only its row.
    assertEquals(await exists(join(n2.root, "q")), false);
    assertEquals(await status(`${n2.url}/q/head`), 404);
    await until(
      async () => (await headOf(n2.url, "r")).end_offset === 2,
      20_000,
      "the new r's one row on n2",
    );
    assertEquals((await headOf(n2.url, "r")).stream_id, newR);
    const sub = await TestSub.open(`${n2.ws}/r?offset=1`);
    await sub.waitLines(1);
    assertEquals(sub.offsets(), [1]);
    await sub.close();
    // One line for each folder removed, saying why.
    const removed = n2.stderr().split("\n").filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l)).filter((e) => e.event === "stream_folder_removed")
      .map((e) => [e.stream, e.why, e.stream_id]).sort();
    assertEquals(removed.length, 2);
    assertEquals(removed[0].slice(0, 2), ["q", "deleted"]);
    assertEquals(removed[1], ["r", "created_again", oldR]);
    // Untouched: the operator's folder and log, and the declared stream.
    assertEquals(await Deno.readTextFile(join(n2.root, "notes", "readme.txt")), "mine\n");
    assert(await exists(join(n2.root, "own", "log.json")), "the operator's own log kept");
    assert(await exists(join(n2.root, "t", "log.json")), "the declared stream's log kept");
    assertEquals(await status(`${n2.url}/t/head`), 200);
  } finally {
    await rmrf(root);
  }
});
