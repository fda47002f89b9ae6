// `cli.ts serve --cluster` under the faults of docs/SPEC.md §11.11, each against a real
// etcd and three real serve processes (lease 2 s): the leader SIGKILLed while
// producers pipeline over HTTP and WebSocket and subscribers read on every
// node; the leader SIGSTOPped past its lease with a publish queued to it;
// etcd SIGKILLed and restarted. What must hold: every acknowledged row once
// at its offset, resends answered as duplicates with the original offsets,
// no subscriber sees a gap or a row twice, the nodes converge.
import { assert, assertEquals } from "../../harness/assert.ts";
import { startEtcd } from "../../harness/etcd.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import {
  type Ack,
  HttpProducer,
  MovingSub,
  WsProducer,
} from "../../harness/jepsen/cluster_clients.ts";
import {
  converged,
  leaderOf,
  post,
  rowsOf,
  rowsShown,
  type ServeNode,
  startServeNodes,
} from "../../harness/serve_nodes.ts";

// Every acknowledged seq's rows are at its offsets, in the final log.
function checkAcks(
  id: string,
  acks: Ack[],
  log: Map<number, string>,
  rows: (seq: number) => number,
) {
  for (const a of acks) {
    assertEquals(a.last - a.first + 1, rows(a.seq), `${id} seq ${a.seq}: ${JSON.stringify(a)}`);
    for (let o = a.first; o <= a.last; o++) {
      assertEquals(
        JSON.parse(log.get(o) ?? "null"),
        { p: id, seq: a.seq, i: o - a.first },
        `${id} seq ${a.seq} at ${o}`,
      );
    }
  }
}

// A subscriber saw consecutive offsets from 1, each as the final log has it.
function checkSub(name: string, sub: MovingSub, log: Map<number, string>) {
  sub.rows.forEach(([o, row], k) => {
    assertEquals(o, k + 1, `${name}: offset ${o} at position ${k} (a gap or a row twice)`);
    assertEquals(row, log.get(o), `${name}: row ${o}`);
  });
}

Deno.test("serve --cluster: the leader SIGKILLed under pipelining producers — every acknowledged row once at its offset, resends are duplicates, subscribers see no gap", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  const clients: { stop(): Promise<void> }[] = [];
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], { etcd: etcd.url });
    const leader = await leaderOf(nodes);
    const subs = nodes.map((n) => new MovingSub(nodes, n));
    clients.push(...subs);
    const http = ["h1", "h2"].map((id) => new HttpProducer(id, nodes));
    const ws = ["w1", "w2"].map((id) => new WsProducer(id, nodes));
    clients.push(...http, ...ws);
    const acked = () => [...http, ...ws].map((p) => p.acks.length);
    await until(() => acked().every((n) => n >= 5), 20_000, "acks before the kill");
    const before = acked();
    const killedAt = performance.now();
    await leader.kill();
    const survivors = nodes.filter((n) => n.running);
    const next = await leaderOf(survivors, 20_000);
    await until(
      () => acked().every((n, i) => n >= before[i] + 5),
      20_000,
      "acks from the new leader",
    );
    console.log(`failover: ${Math.round(performance.now() - killedAt)} ms to a new leader's acks`);
    for (const p of [...http, ...ws]) await p.stop();
    const end = await converged(survivors);
    const shown = await Promise.all(survivors.map((n) => rowsShown(n.url, end)));
    assertEquals(shown[1], shown[0]);
    const log = new Map(shown[0]);
    assertEquals([...log.keys()], Array.from({ length: end - 1 }, (_, k) => k + 1));
    // Every row is in the log once.
    const rows = new Set(shown[0].map(([, r]) => r));
    assertEquals(rows.size, end - 1);
    for (const p of http) {
      assertEquals(p.problems, [], p.id);
      checkAcks(p.id, p.acks, log, () => 3);
      // Its last seq, sent again to any node: a duplicate with the original offsets.
      const last = p.acks[p.acks.length - 1];
      const again = await post(survivors[0].url, rowsOf(p.id, last.seq, 3), {
        producer: p.id,
        seq: last.seq,
      });
      assertEquals(again?.body, { first: last.first, last: last.last, count: 3, duplicate: true });
    }
    for (const p of ws) {
      assertEquals(p.problems, [], p.id);
      checkAcks(p.id, p.acks, log, () => 2);
      // Every frame sent is in the log once, acknowledged or found stored by a later greeting.
      const seqs = new Set(
        shown[0].map(([, r]) => JSON.parse(r)).filter((r) => r.p === p.id).map((r) => r.seq),
      );
      const max = Math.max(...seqs);
      assertEquals(seqs.size, max, `${p.id}: seqs 1..${max}`);
      assertEquals(await p.lastSeq(next), max, `${p.id}: the greeting's last_seq`);
    }
    // Subscribers: the ones on the survivors stayed; the one on the killed leader moved.
    await until(() => subs.every((s) => s.next === end), 20_000, "subscribers at the end");
    subs.forEach((s, i) => checkSub(nodes[i].name, s, log));
    // R = 2 with one node left: nothing can be committed.
    const other = survivors.find((n) => n !== next)!;
    await other.kill();
    await until(async () => (await next.head())?.in_sync.length === 1, 15_000, "the set of one");
    const alone = await post(next.url, rowsOf("h1", 1000, 1), { producer: "h1", seq: 1000 });
    assertEquals([alone?.status, alone?.body.error], [503, "not_enough_replicas"]);
  } finally {
    await Promise.allSettled(clients.map((c) => c.stop()));
    await rmrf(root);
  }
});

Deno.test("serve --cluster: a leader SIGSTOPped past its lease does not acknowledge the publish queued to it, and converges as a follower", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], { etcd: etcd.url });
    const old = await leaderOf(nodes);
    assertEquals((await post(old.url, rowsOf("a", 1, 2), { producer: "a", seq: 1 }))?.status, 200);
    old.pause();
    let queued: Awaited<ReturnType<typeof post>> | undefined;
    let next: ServeNode;
    try {
      // Sent while it is stopped: the kernel queues it; it is read on SIGCONT.
      const pending = post(old.url, rowsOf("q", 1, 1), { producer: "q", seq: 1 }, 30_000)
        .then((a) => (queued = a));
      next = await leaderOf(nodes.filter((n) => n !== old), 20_000);
      // Sent again until answered, as a publisher would (a resend of seq 2 is
      // a duplicate with its first answer's offsets): on a busy machine the
      // new leader's first commit can wait past one request's 10 s for the
      // other follower to join it, or for the paused node to leave the set.
      let b: Awaited<ReturnType<typeof post>> = null;
      await until(
        async () =>
          (b = await post(next.url, rowsOf("a", 2, 2), { producer: "a", seq: 2 }))
            ?.status === 200,
        40_000,
        "the new leader to acknowledge",
      );
      assertEquals(b!.body.first, 3);
      old.resume();
      await pending;
    } finally {
      old.resume();
    }
    // Not acknowledged by the deposed leader (a 307 followed to the new one is).
    assert(
      !queued || queued.status !== 200 || queued.url === next!.url,
      JSON.stringify(queued),
    );
    await until(
      async () => (await old.head())?.leader === next.url,
      20_000,
      "the old leader follows",
    );
    const end = await converged(nodes);
    const shown = await Promise.all(nodes.map((n) => rowsShown(n.url, end)));
    assertEquals(shown[1], shown[0]);
    assertEquals(shown[2], shown[0]);
    const q = shown[0].filter(([, r]) => JSON.parse(r).p === "q");
    // The queued row is in the log once if it was acknowledged (by the new leader), never otherwise.
    assertEquals(q.length, queued?.status === 200 ? 1 : 0);
    assertEquals((await old.head())?.role, "follower");
    assert(/"event":"cluster_step_down"/.test(old.stderr()), old.stderr());
  } finally {
    await rmrf(root);
  }
});

Deno.test("serve --cluster: etcd SIGKILLed — publishes refused once no lease can be held, nothing acknowledged lost; restarted — a new term takes publishes", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], { etcd: etcd.url });
    const leader = await leaderOf(nodes);
    const term = (await leader.head())!.term;
    for (let seq = 1; seq <= 3; seq++) {
      assertEquals(
        (await post(leader.url, rowsOf("a", seq, 2), { producer: "a", seq }))?.status,
        200,
      );
    }
    await etcd.kill();
    // Within the lease (2 s, on the leader's own clock) it stops taking publishes.
    await until(
      async () => {
        const a = await post(leader.url, rowsOf("b", 1, 1), { producer: "b", seq: 1 }, 3000);
        return a?.status === 503;
      },
      15_000,
      "publishes refused",
    );
    const r = await post(leader.url, rowsOf("b", 1, 1), { producer: "b", seq: 1 }, 3000);
    assertEquals([r?.status, r?.body.error], [503, "no_leader"]);
    // Every node goes on showing what was committed.
    for (const n of nodes) assert(((await n.head())?.end ?? 0) >= 7, n.name);
    await etcd.start();
    const next = await leaderOf(nodes, 30_000);
    assert((await next.head())!.term > term);
    const c = await post(next.url, rowsOf("a", 4, 2), { producer: "a", seq: 4 });
    assertEquals(c?.status, 200);
    const end = await converged(nodes);
    const shown = await Promise.all(nodes.map((n) => rowsShown(n.url, end)));
    assertEquals(shown[1], shown[0]);
    assertEquals(shown[2], shown[0]);
    const mine = shown[0].map(([, r]) => JSON.parse(r)).filter((r) => r.p === "a");
    assertEquals(mine.map((r) => `${r.seq}.${r.i}`), [
      "1.0",
      "1.1",
      "2.0",
      "2.1",
      "3.0",
      "3.1",
      "4.0",
      "4.1",
    ]);
  } finally {
    await rmrf(root);
  }
});
