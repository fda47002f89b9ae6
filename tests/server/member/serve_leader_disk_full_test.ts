// A cluster's leader whose disk fills: three `serve --cluster` nodes at R = 2,
// each with its root on a small tmpfs of its own and `--min-free-bytes 0`
// (no space kept free: the write itself meets the full disk, as when space
// goes between two looks of the disk gate). The leader ships a commit
// to its followers before it writes it, so a write that fails for lack of
// space stops its log: the node resigns, another leads, and publishing goes
// on there. Once space is back the stopped node's stream opens again by
// itself (its log recovered to what is on disk) and catches up as a
// follower; every acknowledged row is on every node exactly once.
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
  startServeNodes,
} from "../../harness/serve_nodes.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";

Deno.test("serve --cluster: a leader whose disk fills hands the stream on; freed, it opens the stream again and catches up", async () => {
  const root = await tempDir();
  const names = ["a", "b", "c"];
  await using etcd = await startEtcd();
  const disks: SmallDisk[] = [];
  try {
    for (const n of names) disks.push(await SmallDisk.mount(join(root, n), 24));
    await using nodes = await startServeNodes(root, names, {
      etcd: etcd.url,
      replicas: 2,
      extra: ["--min-free-bytes", "0"],
    });
    const first = await leaderOf(nodes);
    // What was acknowledged: producer p's seqs, three rows each.
    const acked = new Set<number>();
    let seq = 0;
    for (let i = 0; i < 5; i++) {
      const r = await post(first.url, rowsOf("p", ++seq, 3), { producer: "p", seq });
      assertEquals(r?.status, 200, JSON.stringify(r?.body));
      acked.add(seq);
    }
    const disk = disks[nodes.indexOf(first)];
    await disk.fill(0);
    // Rows still fit in the pages the log's files hold already; the publish
    // that meets the full disk is refused, and is sent again to whoever leads
    // until one takes it (answered as stored or as a duplicate: the followers
    // may hold it, shipped before the leader's write failed).
    let full = 0;
    for (let i = 0; i < 2000 && full === 0; i++) {
      const r = await post(first.url, rowsOf("p", ++seq, 3), { producer: "p", seq });
      if (r?.status === 200) acked.add(seq);
      else full = seq;
    }
    assert(full > 0, "the full disk never refused a publish");
    let second = first;
    await until(
      async () => {
        second = await leaderOf(nodes, 30_000);
        if (second === first) return false;
        const r = await post(second.url, rowsOf("p", full, 3), { producer: "p", seq: full });
        return r?.status === 200;
      },
      60_000,
      "another node to lead and take the refused publish",
    );
    acked.add(full);
    for (let i = 0; i < 5; i++) {
      const r = await post(second.url, rowsOf("p", ++seq, 3), { producer: "p", seq });
      assertEquals(r?.status, 200, JSON.stringify(r?.body));
      acked.add(seq);
    }
    assert(
      /"stream_reopening"/.test(first.stderr()),
      "the stopped node said it reopens the stream",
    );
    // Its disk still full, the stream is opening again there: unavailable, not unknown.
    const r = await fetch(`${first.url}/t/head`);
    if (r.status !== 200) {
      assertEquals(r.status, 503);
      assertEquals((await r.json()).error, "unavailable");
    } else await r.body?.cancel();
    await disk.free();
    await until(
      () => /"stream_reopened"/.test(first.stderr()),
      30_000,
      "the stopped node to open its stream again",
    ).catch((err) => {
      console.log(
        first.stderr().split("\n").filter((l) => /warn|error|reopen/.test(l)).slice(-20).join("\n"),
      );
      throw err;
    });
    const end = await converged(nodes, 60_000);
    for (const n of nodes) {
      const shown = await rowsShown(n.url, end);
      const wanted = [...acked].flatMap((s) =>
        [0, 1, 2].map((i) => JSON.stringify({ p: "p", seq: s, i }))
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
