// A cluster's leader whose disk fills while etcd does not answer: three
// `serve --cluster` nodes at R = 2, each with its root on a small tmpfs of
// its own and `--min-free-bytes 0`, etcd SIGSTOPped just before a publish
// that cannot fit on the leader's full disk. The leader ships the commit and
// then fails to write it, so its log stops: the node closes (its resignation
// cannot reach etcd) and tries to open the stream again while every etcd call
// waits out its timeout, and the try fails. Once etcd answers again (SIGCONT)
// and the disk has room, the node opens the stream again and catches up as a
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

// Rows of a publish that cannot fit in what the log's files hold already
// (some 12 KiB: new pages of the segment file), and of the others.
const BIG = 400;
const SMALL = 3;

Deno.test("serve --cluster: a leader whose disk fills while etcd is paused opens its stream again once both are back", async () => {
  const root = await tempDir();
  const names = ["a", "b", "c"];
  await using etcd = await startEtcd();
  const disks: SmallDisk[] = [];
  try {
    for (const n of names) disks.push(await SmallDisk.mount(join(root, n), 24));
    await using nodes = await startServeNodes(root, names, {
      etcd: etcd.url,
      replicas: 2,
      // A lease that outlasts the publish made right after etcd is paused.
      leaseSeconds: 5,
      extra: ["--min-free-bytes", "0"],
    });
    const first = await leaderOf(nodes);
    // What was acknowledged: producer p's seqs, and the rows of each.
    const acked = new Map<number, number>();
    const rows = new Map<number, number>();
    let seq = 0;
    const publish = async (url: string, n: number, s = ++seq) => {
      rows.set(s, n);
      const r = await post(url, rowsOf("p", s, n), { producer: "p", seq: s });
      if (r?.status === 200) acked.set(s, n);
      return { s, r };
    };
    for (let i = 0; i < 5; i++) {
      const { r } = await publish(first.url, SMALL);
      assertEquals(r?.status, 200, JSON.stringify(r?.body));
    }
    const disk = disks[nodes.indexOf(first)];
    await disk.fill(0);
    let refused = 0;
    etcd.pause();
    try {
      // Within the leader's lease: the publish is taken, shipped, and its write fails.
      for (let i = 0; i < 10 && refused === 0; i++) {
        const { s, r } = await publish(first.url, BIG);
        if (r?.status !== 200) refused = s;
      }
      assert(refused > 0, "the full disk never refused a publish");
      assert(
        /"cluster_log_stopped"/.test(first.stderr()),
        `the leader's log did not stop:\n${lines(first.stderr(), /warn|error/)}`,
      );
      // The node closes and tries to open the stream again, etcd paused all along.
      await until(
        () => /"stream_reopen_failed"/.test(first.stderr()),
        60_000,
        "the stopped node to try to open its stream again while etcd is paused",
      ).catch((err) => {
        console.log(lines(first.stderr(), /warn|error|reopen/));
        throw err;
      });
      // Unavailable while it opens again, not unknown.
      const head = await fetch(`${first.url}/t/head`);
      assertEquals(head.status, 503);
      assertEquals((await head.json()).error, "unavailable");
    } finally {
      etcd.resume();
    }
    // The refused publish is sent again to whoever leads until one takes it
    // (as stored, or as a duplicate of what the followers hold).
    await until(
      async () => {
        const leader = await leaderOf(nodes, 30_000);
        if (leader === first) return false;
        const r = await post(leader.url, rowsOf("p", refused, BIG), {
          producer: "p",
          seq: refused,
        });
        return r?.status === 200;
      },
      60_000,
      "another node to lead and take the refused publish",
    );
    acked.set(refused, BIG);
    await disk.free();
    await until(
      () => /"stream_reopened"/.test(first.stderr()),
      30_000,
      "the stopped node to open its stream again",
    ).catch((err) => {
      console.log(lines(first.stderr(), /warn|error|reopen/));
      throw err;
    });
    const second = await leaderOf(nodes, 30_000);
    for (let i = 0; i < 5; i++) {
      const { r } = await publish(second.url, SMALL);
      assertEquals(r?.status, 200, JSON.stringify(r?.body));
    }
    const end = await converged(nodes, 60_000);
    for (const n of nodes) {
      const shown = await rowsShown(n.url, end);
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

// The last lines of a node's log that match `pattern` (what a failure shows).
function lines(stderr: string, pattern: RegExp): string {
  return stderr.split("\n").filter((l) => pattern.test(l)).slice(-30).join("\n");
}
