// A cluster's follower whose disk fills: three `serve --cluster` nodes at
// R = 2, each with its root on a small tmpfs of its own and
// `--min-free-bytes 0`. A follower's appends of the leader's commits never
// pass the disk gate (only publishes do), so its writes meet the full disk
// whatever the gate's floor: each failed append is cut back, closes the
// follower's gate (`disk_full`) and its replication link
// (`replica_disconnected`), and the follower connects again and fails again
// while the disk stays full. The leader drops it from the in-sync set after
// `--replica-lag-ms` (`in_sync_dropped`) and goes on committing with the
// other follower. Once the test deletes its filler the follower catches up
// and is added back (`in_sync_added`); every acknowledged row is then on
// every node exactly once, and `verify` passes on each node's folder.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { startEtcd } from "../../harness/etcd.ts";
import { SmallDisk } from "../../harness/small_disk.ts";
import {
  converged,
  leaderOf,
  post,
  rowsOf,
  rowsShown,
  type ServeNode,
  startServeNodes,
} from "../../harness/serve_nodes.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";

// Rows in one publish: enough that a few commits need a page of the disk
// that the filler took.
const ROWS = 20;

// Producer "p"'s seqs published to one node, one after another, each
// answered before the next is sent, until `stop`: what was acknowledged,
// and every answer that was not a fresh acknowledgement by that node.
class Publishing {
  readonly acked: number[] = [];
  readonly wrong: string[] = [];
  #seq = 0;
  #stopped = false;
  readonly #done: Promise<void>;

  constructor(url: string) {
    this.#done = this.#run(url);
  }

  async #run(url: string): Promise<void> {
    while (!this.#stopped && this.wrong.length === 0) {
      const seq = ++this.#seq;
      const r = await post(url, rowsOf("p", seq, ROWS), { producer: "p", seq });
      if (r?.status === 200 && r.url === url && r.body.duplicate !== true) this.acked.push(seq);
      else this.wrong.push(`seq ${seq}: ${r?.status} from ${r?.url}: ${JSON.stringify(r?.body)}`);
      // A pause so that the log stays small enough to read back whole.
      await new Promise((res) => setTimeout(res, 20));
    }
  }

  /** Waits until `n` more seqs than now are acknowledged (none refused meanwhile). */
  async more(n: number, what: string): Promise<void> {
    const want = this.acked.length + n;
    await until(() => this.acked.length >= want || this.wrong.length > 0, 30_000, what);
    assertEquals(this.wrong, [], `every publish acknowledged (${what})`);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#done;
  }
}

async function degraded(node: ServeNode): Promise<unknown> {
  const res = await fetch(`${node.url}/_/health`);
  assertEquals(res.status, 200);
  return (await res.json()).degraded;
}

Deno.test("serve --cluster: a follower whose disk fills leaves the in-sync set while the leader goes on; freed, it catches up and rejoins", async () => {
  const root = await tempDir();
  const names = ["a", "b", "c"];
  await using etcd = await startEtcd();
  const disks: SmallDisk[] = [];
  let publishing: Publishing | null = null;
  try {
    for (const n of names) disks.push(await SmallDisk.mount(join(root, n), 24));
    await using nodes = await startServeNodes(root, names, {
      etcd: etcd.url,
      replicas: 2,
      // Long enough that a loaded machine does not lose the lease: one leader throughout.
      leaseSeconds: 5,
      lagMs: 1000,
      extra: ["--min-free-bytes", "0"],
    });
    const leader = await leaderOf(nodes);
    const [full, other] = nodes.filter((n) => n !== leader);
    const inSync = async () => (await leader.head())?.in_sync ?? null;
    await until(
      async () => (await inSync())?.length === 3,
      30_000,
      "every node in the leader's in-sync set",
    );

    publishing = new Publishing(leader.url);
    await publishing.more(5, "publishes before the disk fills");
    await disks[nodes.indexOf(full)].fill(0);

    // The follower's append meets the full disk: its gate closes and it drops its link.
    await until(
      () => full.events("disk_full").length > 0,
      30_000,
      "the follower to say its disk is full",
    );
    assert(
      /os error 28/.test(String(full.events("disk_full")[0].detail)),
      JSON.stringify(full.events("disk_full")[0]),
    );
    const failedLinks = () =>
      full.events("replica_disconnected").filter((e) => /os error 28/.test(String(e.error)));
    await until(() => failedLinks().length > 0, 30_000, "the follower to drop its link");
    assertEquals(failedLinks()[0].leader, leader.url);

    // It keeps trying, backing off: each failed link waits longer before the
    // next (at least 50, 100, 200, 400, 800 ms with jitter), rather than
    // reconnecting, and having the leader resend, many times a second.
    await until(() => failedLinks().length >= 6, 30_000, "the follower's sixth failed link");
    const at = failedLinks().slice(0, 6).map((e) => Date.parse(String(e.ts)));
    assert(
      at[5] - at[0] >= 1550,
      `six failed links within ${at[5] - at[0]} ms: the follower does not back off`,
    );

    // The leader drops it from the in-sync set and commits with the other follower.
    await until(
      async () => {
        const set = await inSync();
        return set !== null && !set.includes(full.name);
      },
      30_000,
      "the full follower to leave the in-sync set",
    );
    assertEquals((await inSync())?.toSorted(), [leader.name, other.name].toSorted());
    // The leader's changes of the set for this node, in order (its start added it).
    const changes = () =>
      leader.events("in_sync_added", "in_sync_dropped").filter((e) => e.node === full.name);
    await until(
      () => changes().at(-1)?.event === "in_sync_dropped",
      10_000,
      "the leader to say it dropped the follower",
    );
    // Dropped once it had not caught up for longer than --replica-lag-ms.
    const dropped = changes().at(-1)!;
    assert((dropped.lag_ms as number) >= 1000, JSON.stringify(dropped));

    // It connects again, and fails again while the disk stays full.
    await until(() => failedLinks().length >= 2, 30_000, "the follower to connect and fail again");
    await publishing.more(10, "publishes while the follower's disk is full");
    const behind = (await full.head())!;
    const ahead = (await leader.head())!;
    assertEquals(behind.role, "follower");
    assertEquals(behind.leader, leader.url);
    assert(
      behind.durable_end < ahead.durable_end,
      `the full follower holds ${behind.durable_end}, the leader ${ahead.durable_end}`,
    );
    // It serves reads meanwhile, and says its stream is degraded.
    assertEquals(await degraded(full), [{ stream: "t", why: "disk_full" }]);
    assertEquals(await inSync().then((s) => s?.includes(full.name)), false);

    await disks[nodes.indexOf(full)].free();
    const missed = (await leader.head())!.durable_end;
    await until(
      async () => ((await full.head())?.durable_end ?? 0) >= missed,
      30_000,
      "the follower to catch up",
    );
    await until(
      async () => (await inSync())?.length === 3,
      30_000,
      "the follower back in the in-sync set",
    );
    await until(
      () => changes().at(-1)?.event === "in_sync_added",
      10_000,
      "the leader to say it added the follower back",
    );
    await until(async () => (await degraded(full)) === undefined, 10_000, "its gate open again");
    await until(
      () => full.events("disk_ok").length > 0,
      10_000,
      "the follower to say its disk has room again",
    );
    await publishing.more(5, "publishes after the follower caught up");
    await publishing.stop();
    assertEquals(publishing.wrong, []);

    // Every acknowledged row on every node, exactly once, and nothing else.
    const end = await converged(nodes, 60_000);
    const acked = publishing.acked;
    assertEquals(end - 1, acked.length * ROWS, "the log holds the acknowledged rows only");
    for (const n of nodes) {
      const shown = await rowsShown(n.url, end);
      assertEquals(shown.map(([o]) => o), [...Array(end - 1)].map((_, i) => i + 1), n.name);
      const seen = new Map<string, number>();
      for (const [, row] of shown) seen.set(row, (seen.get(row) ?? 0) + 1);
      for (const seq of acked) {
        for (let i = 0; i < ROWS; i++) {
          const row = JSON.stringify({ p: "p", seq, i });
          assertEquals(seen.get(row), 1, `${n.name} shows ${row} ${seen.get(row) ?? 0} times`);
        }
      }
    }
    // The followers first: no election while the nodes stop.
    for (const n of [full, other, leader]) await n.stop();
    for (const n of nodes) {
      const v = await n.verify();
      assertEquals(v.code, 0, `verify ${n.name}: ${v.stderr}`);
    }
  } finally {
    await publishing?.stop();
    for (const d of disks) {
      await d.free().catch(() => {});
      await d.close();
    }
    await rmrf(root);
  }
});
