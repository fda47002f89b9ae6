// A keyed stream on a cluster: every node keeps its own index from the rows
// the cluster commits, so at the same end their snapshots are equal; the
// leader SIGKILLed, the new leader's snapshot at that end equals the old
// one's, and after more rows the survivors' still equal the reference model
// (each key's latest row among the rows the nodes show). A real etcd and
// three real `cli.ts serve --cluster` processes.
import { assertEquals } from "../../harness/assert.ts";
import { startEtcd } from "../../harness/etcd.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import {
  converged,
  leaderOf,
  post,
  rowsOf,
  rowsShown,
  type ServeNode,
  startServeNodes,
} from "../../harness/serve_nodes.ts";

async function latest(n: ServeNode): Promise<{ end: string | null; body: string }> {
  const res = await fetch(`${n.url}/t/latest`);
  return { end: res.headers.get("streamcast-end"), body: await res.text() };
}

// Each key (p, i)'s latest row among `rows`, as /latest's lines.
function model(rows: [number, string][]): string {
  const latest = new Map<string, string>();
  for (const [o, row] of rows) {
    const { p, i } = JSON.parse(row);
    const k = `${p},${i}`;
    latest.delete(k);
    latest.set(k, `[${o},${row}]\n`);
  }
  return [...latest.values()].join("");
}

Deno.test("serve --cluster: a keyed stream's snapshot is the same on every node, and on the new leader after a failover", async () => {
  const root = await tempDir();
  await using etcd = await startEtcd();
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], {
      etcd: etcd.url,
      extra: ["--key", "t=p,i"],
    });
    const leader = await leaderOf(nodes);
    for (let seq = 1; seq <= 6; seq++) {
      const a = await post(leader.url, rowsOf(`p${seq % 3}`, seq, 1 + (seq % 4)), null);
      assertEquals(a?.status, 200, JSON.stringify(a));
    }
    const end = await converged(nodes);
    const before = await Promise.all(nodes.map(latest));
    assertEquals(before[0].end, String(end));
    for (const b of before) assertEquals(b, before[0]);
    assertEquals(before[0].body, model(await rowsShown(leader.url, end)));

    await leader.kill();
    const survivors = nodes.filter((n) => n.running);
    const next = await leaderOf(survivors, 20_000);
    assertEquals(await converged(survivors), end);
    assertEquals(await latest(next), before[0]);

    for (let seq = 7; seq <= 10; seq++) {
      const a = await post(next.url, rowsOf(`p${seq % 5}`, seq, 3), null);
      assertEquals(a?.status, 200, JSON.stringify(a));
    }
    const after = await converged(survivors);
    const want = model(await rowsShown(next.url, after));
    for (const n of survivors) assertEquals(await latest(n), { end: String(after), body: want });
  } finally {
    await rmrf(root);
  }
});
