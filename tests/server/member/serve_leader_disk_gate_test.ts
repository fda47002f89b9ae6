// A cluster's leader under its disk gate: three `serve --cluster` nodes at
// R = 2, each with its root on a 24 MiB tmpfs of its own and
// `--min-free-bytes 8MiB`. The test fills the leader's disk until 4 MiB are
// left: the leader's next look at the free space closes the gate, and it
// refuses rows as one server does — a POST 507 `disk_full` with
// `Retry-After: 1`, a publish socket's frame `{"seq":S,"error":"disk_full"}`
// — storing nothing of them (on no node), while it keeps leading and serving
// reads and `/_/health` lists the stream as degraded. Once the test deletes
// its filler the same leader takes rows again by itself (it looks every
// second); every acknowledged row is then on every node exactly once, none
// of the refused rows that were not sent again is anywhere, and `verify`
// passes on each node's folder.
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

const ROWS = 3;

// A POST of `body` to `node` itself (no redirect followed), as (producer, seq) when tagged.
function postTo(
  node: ServeNode,
  body: string,
  tag: { producer: string; seq: number } | null,
): Promise<Response> {
  return fetch(`${node.url}/t`, {
    method: "POST",
    redirect: "manual",
    headers: {
      "content-type": "application/x-ndjson",
      ...(tag ? { "streamcast-producer": tag.producer, "streamcast-seq": String(tag.seq) } : {}),
    },
    body,
    signal: AbortSignal.timeout(10_000),
  });
}

async function health(node: ServeNode): Promise<Record<string, unknown>> {
  const res = await fetch(`${node.url}/_/health`);
  assertEquals(res.status, 200);
  return await res.json();
}

async function takesRows(node: ServeNode): Promise<string | undefined> {
  const text = await (await fetch(`${node.url}/_/metrics`)).text();
  return /^streamcast_stream_takes_rows\{stream="t"\} (\d)$/m.exec(text)?.[1];
}

// A publish socket of producer `producer` on `node`: its greeting, then one answer a frame.
async function publishSocket(node: ServeNode, producer: string) {
  const ws = new WebSocket(`${node.ws}/t/publish?producer=${producer}`);
  const answers: Record<string, unknown>[] = [];
  ws.onmessage = (e) => answers.push(JSON.parse(e.data));
  await until(() => answers.length === 1, 10_000, "the publish socket's greeting");
  return {
    greeting: answers[0],
    async send(seq: number, rows: unknown[]): Promise<Record<string, unknown>> {
      const n = answers.length;
      ws.send(JSON.stringify({ seq, rows }));
      await until(() => answers.length > n, 10_000, `the answer to seq ${seq}`);
      return answers[n];
    },
    close: () => ws.close(),
  };
}

Deno.test("serve --cluster: a leader under --min-free-bytes refuses rows disk_full, stores none, serves reads, and takes rows again once space is back", async () => {
  const root = await tempDir();
  const names = ["a", "b", "c"];
  await using etcd = await startEtcd();
  const disks: SmallDisk[] = [];
  let socket: Awaited<ReturnType<typeof publishSocket>> | null = null;
  try {
    for (const n of names) disks.push(await SmallDisk.mount(join(root, n), 24));
    await using nodes = await startServeNodes(root, names, {
      etcd: etcd.url,
      replicas: 2,
      // Long enough that a loaded machine does not lose the lease: one leader throughout.
      leaseSeconds: 5,
      extra: ["--min-free-bytes", "8MiB"],
    });
    const leader = await leaderOf(nodes);
    const followers = nodes.filter((n) => n !== leader);
    await until(
      async () => (await leader.head())?.in_sync.length === 3,
      30_000,
      "every node in the leader's in-sync set",
    );
    // What was acknowledged: producer p's seqs (ROWS rows each), and producer w's seq 1 (one row).
    const acked: number[] = [];
    let seq = 0;
    for (let i = 0; i < 5; i++) {
      const r = await post(leader.url, rowsOf("p", ++seq, ROWS), { producer: "p", seq });
      assertEquals(r?.status, 200, JSON.stringify(r?.body));
      acked.push(seq);
    }

    await disks[nodes.indexOf(leader)].fill(4 << 20); // under the 8 MiB kept free
    // Looked at before a commit, at most once a second: rows sent before the
    // look that closes the gate are stored (4 MiB is room enough for them).
    let refused: Response | null = null;
    await until(
      async () => {
        const res = await postTo(leader, rowsOf("p", ++seq, ROWS), { producer: "p", seq });
        if (res.status === 507) refused = res;
        else {
          const text = await res.text();
          assertEquals(res.status, 200, text);
          acked.push(seq);
        }
        return refused !== null;
      },
      15_000,
      "the leader to refuse a publish",
    );
    const refusedSeq = seq;
    const first = refused!;
    assertEquals(first.headers.get("retry-after"), "1");
    const body = await first.json();
    assertEquals(body.error, "disk_full");
    assert(/kept free/.test(body.detail), body.detail);
    const stuck = (await leader.head())!;
    // Rows with no producer: refused, never sent again, so never stored anywhere.
    const untagged = await postTo(leader, rowsOf("x", 1, ROWS), null);
    assertEquals(untagged.status, 507);
    assertEquals(untagged.headers.get("retry-after"), "1");
    assertEquals((await untagged.json()).error, "disk_full");
    socket = await publishSocket(leader, "w");
    assertEquals(socket.greeting.last_seq, 0);
    const wRow = { p: "w", seq: 1, i: 0 };
    const frame = await socket.send(1, [wRow]);
    assertEquals(frame.seq, 1);
    assertEquals(frame.error, "disk_full", JSON.stringify(frame));

    // Nothing of them was stored or shipped: every node holds the acknowledged rows alone.
    assertEquals(stuck.end - 1, acked.length * ROWS);
    assertEquals(await converged(nodes, 30_000), stuck.end);
    // The same node leads, serves reads, and says the stream takes no rows.
    assertEquals(stuck.role, "leader");
    for (const f of followers) assertEquals((await f.head())?.leader, leader.url);
    const shown = await rowsShown(leader.url, stuck.end);
    assertEquals(shown.length, acked.length * ROWS);
    assertEquals((await health(leader)).degraded, [{ stream: "t", why: "disk_full" }]);
    for (const f of followers) assertEquals((await health(f)).degraded, undefined);
    assertEquals(await takesRows(leader), "0");
    await until(() => leader.events("disk_full").length > 0, 10_000, "the leader to say so");
    const said = leader.events("disk_full")[0];
    assert(/kept free/.test(String(said.detail)), JSON.stringify(said));

    await disks[nodes.indexOf(leader)].free();
    await until(
      async () => (await health(leader)).degraded === undefined,
      10_000,
      "the leader to take rows again",
    );
    await until(() => leader.events("disk_ok").length > 0, 10_000, "the leader to say so");
    assertEquals(await takesRows(leader), "1");
    // The refused publishes, sent again, are stored now, by the same leader.
    const again = await socket.send(1, [wRow]);
    assertEquals(again.first, stuck.end, JSON.stringify(again));
    assertEquals(again.duplicate, undefined, JSON.stringify(again));
    const resent = await postTo(leader, rowsOf("p", refusedSeq, ROWS), {
      producer: "p",
      seq: refusedSeq,
    });
    const resentBody = await resent.json();
    assertEquals(resent.status, 200, JSON.stringify(resentBody));
    assertEquals(resentBody.first, stuck.end + 1, JSON.stringify(resentBody));
    acked.push(refusedSeq);
    for (let i = 0; i < 5; i++) {
      const r = await post(leader.url, rowsOf("p", ++seq, ROWS), { producer: "p", seq });
      assertEquals(r?.status, 200, JSON.stringify(r?.body));
      assertEquals(r?.url, leader.url);
      acked.push(seq);
    }
    socket.close();
    socket = null;

    // Every acknowledged row on every node, exactly once, and nothing else.
    const end = await converged(nodes, 60_000);
    assertEquals(end - 1, acked.length * ROWS + 1, "the log holds the acknowledged rows only");
    for (const n of nodes) {
      const rows = await rowsShown(n.url, end);
      assertEquals(rows.map(([o]) => o), [...Array(end - 1)].map((_, i) => i + 1), n.name);
      const seen = new Map<string, number>();
      for (const [, row] of rows) seen.set(row, (seen.get(row) ?? 0) + 1);
      const want = [JSON.stringify(wRow)];
      for (const s of acked) {
        for (let i = 0; i < ROWS; i++) want.push(JSON.stringify({ p: "p", seq: s, i }));
      }
      for (const row of want) {
        assertEquals(seen.get(row), 1, `${n.name} shows ${row} ${seen.get(row) ?? 0} times`);
      }
    }
    // The followers first: no election while the nodes stop.
    for (const n of [...followers, leader]) await n.stop();
    for (const n of nodes) {
      const v = await n.verify();
      assertEquals(v.code, 0, `verify ${n.name}: ${v.stderr}`);
    }
  } finally {
    socket?.close();
    for (const d of disks) {
      await d.free().catch(() => {});
      await d.close();
    }
    await rmrf(root);
  }
});
