// A stream created while the cluster serves (`PUT /_/streams/q`) whose
// leader's disk fills: three `serve --cluster` nodes at R = 2, each with its
// root on a small tmpfs of its own and `--min-free-bytes 0`. The leader ships
// a commit it then cannot write, so its log of q stops and the node tries to
// open q again every second while the disk is full. Freed, it opens q again
// and catches up; every acknowledged row is on every node exactly once. And
// q deleted (`DELETE` on another node) while its stopped node keeps trying:
// that node stops trying, removes its folder, and answers 404 for q — not
// 503 for good.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { startEtcd } from "../../harness/etcd.ts";
import { SmallDisk } from "../../harness/small_disk.ts";
import {
  assertShownOnce,
  converged,
  leaderOf,
  post,
  rowsOf,
  rowsShown,
  SCHEMA,
  type ServeNode,
  startServeNodes,
} from "../../harness/serve_nodes.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";

// Rows of a publish that cannot fit in what the log's files hold already
// (some 12 KiB: new pages of the segment file), and of the others.
const BIG = 400;
const SMALL = 3;
const q = { stream: "q" };

// A line of `node`'s log: event `event` about stream q.
const said = (node: ServeNode, event: string) =>
  new RegExp(`"event":"${event}","stream":"q"`).test(node.stderr());

async function status(url: string, init?: RequestInit): Promise<number> {
  const res = await fetch(url, init);
  await res.body?.cancel();
  return res.status;
}

async function create(node: ServeNode, name: string): Promise<void> {
  const res = await fetch(`${node.url}/_/streams/${name}`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ schema: SCHEMA, publish: true }),
  });
  assertEquals(res.status, 201, await res.text());
}

/** The cluster of one test: nodes a, b, c, each root a small disk; q created. */
async function cluster(root: string, etcd: string, disks: SmallDisk[]) {
  const names = ["a", "b", "c"];
  for (const n of names) disks.push(await SmallDisk.mount(join(root, n), 24));
  const nodes = await startServeNodes(root, names, {
    etcd,
    replicas: 2,
    extra: ["--min-free-bytes", "0"],
  });
  await create(nodes[0], "q");
  return nodes;
}

/**
 * Fills the disk of q's leader and publishes to it until a publish is
 * refused (its log of q stopped); then waits until the node has tried to
 * open q again and failed. The leader, and the refused seq.
 */
async function stopLeader(
  nodes: ServeNode[],
  disks: SmallDisk[],
  publish: (url: string, n: number) => Promise<{ s: number; status: number | undefined }>,
): Promise<{ stopped: ServeNode; refused: number }> {
  const stopped = await leaderOf(nodes, 20_000, "q");
  for (let i = 0; i < 5; i++) {
    const { status } = await publish(stopped.url, SMALL);
    assertEquals(status, 200);
  }
  await disks[nodes.indexOf(stopped)].fill(0);
  let refused = 0;
  for (let i = 0; i < 10 && refused === 0; i++) {
    const { s, status } = await publish(stopped.url, BIG);
    if (status !== 200) refused = s;
  }
  assert(refused > 0, "the full disk never refused a publish");
  await until(
    () => said(stopped, "stream_reopen_failed"),
    30_000,
    "the stopped node to try to open q again on its full disk",
  ).catch((err) => {
    console.log(lines(stopped.stderr()));
    throw err;
  });
  assert(said(stopped, "cluster_log_stopped"), lines(stopped.stderr()));
  return { stopped, refused };
}

Deno.test("serve --cluster: a created stream whose leader's disk fills opens again there once freed, and catches up", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  const disks: SmallDisk[] = [];
  try {
    await using nodes = await cluster(root, etcd.url, disks);
    const acked = new Map<number, number>();
    let seq = 0;
    const publish = async (url: string, n: number) => {
      const s = ++seq;
      const r = await post(url, rowsOf("p", s, n), { producer: "p", seq: s }, 10_000, q);
      if (r?.status === 200) acked.set(s, n);
      return { s, status: r?.status };
    };
    const { stopped, refused } = await stopLeader(nodes, disks, publish);
    // Unavailable while it opens again, not unknown.
    assertEquals(await status(`${stopped.url}/q/head`), 503);
    // The refused publish, sent again to whoever leads until one takes it.
    await until(
      async () => {
        const leader = await leaderOf(nodes, 30_000, "q");
        if (leader === stopped) return false;
        const r = await post(
          leader.url,
          rowsOf("p", refused, BIG),
          {
            producer: "p",
            seq: refused,
          },
          10_000,
          q,
        );
        return r?.status === 200;
      },
      60_000,
      "another node to lead q and take the refused publish",
    );
    acked.set(refused, BIG);
    await disks[nodes.indexOf(stopped)].free();
    await until(() => said(stopped, "stream_reopened"), 30_000, "q opened again").catch(
      (err) => {
        console.log(lines(stopped.stderr()));
        throw err;
      },
    );
    const leader = await leaderOf(nodes, 30_000, "q");
    for (let i = 0; i < 5; i++) {
      assertEquals((await publish(leader.url, SMALL)).status, 200);
    }
    const end = await converged(nodes, 60_000, "q");
    for (const n of nodes) {
      const shown = await rowsShown(n.url, end, q);
      const wanted = [...acked].flatMap(([s, count]) =>
        [...Array(count)].map((_, i) => JSON.stringify({ p: "p", seq: s, i }))
      );
      assertShownOnce(n.name, shown, end, wanted);
    }
  } finally {
    for (const d of disks) {
      await d.free().catch(() => {});
      await d.close();
    }
    await rmrf(root);
  }
});

Deno.test("serve --cluster: a created stream deleted while its stopped node tries to open it again is gone from that node", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  const disks: SmallDisk[] = [];
  try {
    await using nodes = await cluster(root, etcd.url, disks);
    let seq = 0;
    const publish = async (url: string, n: number) => {
      const s = ++seq;
      const r = await post(url, rowsOf("p", s, n), { producer: "p", seq: s }, 10_000, q);
      return { s, status: r?.status };
    };
    const { stopped } = await stopLeader(nodes, disks, publish);
    const other = nodes.find((n) => n !== stopped)!;
    assertEquals(await status(`${other.url}/_/streams/q`, { method: "DELETE" }), 204);
    await until(() => said(stopped, "stream_deleted"), 30_000, "q deleted on the stopped node");
    await disks[nodes.indexOf(stopped)].free();
    // Changes are applied one at a time, in order: once a stream created
    // after the delete is served there, the node has no try of q left.
    await create(other, "r");
    await until(
      async () => (await status(`${stopped.url}/r/head`)) === 200,
      30_000,
      "r served on the node that stopped",
    );
    for (const n of nodes) assertEquals(await status(`${n.url}/q/head`), 404, n.name);
    assert(!said(stopped, "stream_reopened"), lines(stopped.stderr()));
    const gone = await Deno.stat(join(stopped.root, "q")).then(() => false, () => true);
    assert(gone, "the stopped node's folder of q is removed");
  } finally {
    for (const d of disks) {
      await d.free().catch(() => {});
      await d.close();
    }
    await rmrf(root);
  }
});

// The lines of a node's log about q or its faults (what a failure shows).
function lines(stderr: string): string {
  return stderr.split("\n").filter((l) => /warn|error|"q"/.test(l)).slice(-30).join("\n");
}
