// `cli.ts serve --cluster --archive --iceberg`: one Iceberg table per stream in
// the archive the nodes share (s3rver), committed to by the leader alone.
// Three real serve processes (R = 2, lease 2 s) and a real etcd; producers
// publish with producer ids while the leader is SIGKILLed mid-feed and, once
// a new leader acknowledges, started again. Then the table, read by DuckDB
// and by icebird, holds offsets 1..N each once with the final log's rows, the
// leader's /head shows it, and `verify` passes on every node's folder. And
// `--iceberg` with `--cluster` but no `--archive` is refused, saying why.
import { assert, assertEquals } from "../../harness/assert.ts";
import { startEtcd } from "../../harness/etcd.ts";
import { startS3, stopS3 } from "../../harness/s3.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { CLI, runServe } from "../../harness/serve.ts";
import { s3Files } from "../../harness/read_table.ts";
import { HttpProducer } from "../../harness/jepsen/cluster_clients.ts";
import {
  checkTable,
  tableFlags,
  tableLast,
  tableRows,
} from "../../harness/jepsen/cluster_table.ts";
import {
  converged,
  leaderOf,
  rowsShown,
  SCHEMA,
  type ServeNode,
  startServeNodes,
} from "../../harness/serve_nodes.ts";

// /head's iceberg object of node `n` (null on a follower; undefined: no answer).
async function icebergHead(n: ServeNode): Promise<Record<string, unknown> | null | undefined> {
  try {
    const res = await fetch(`${n.url}/t/head`, { signal: AbortSignal.timeout(1000) });
    return (await res.json()).iceberg;
  } catch {
    return undefined;
  }
}

Deno.test("serve --cluster --iceberg: the leader SIGKILLed mid-feed and restarted — the shared table holds every row of the final log once, as the log has it", async () => {
  const root = await tempDir();
  const s3 = await startS3();
  const get = s3Files(s3.endpoint);
  const producers: HttpProducer[] = [];
  try {
    await using etcd = await startEtcd();
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], {
      etcd: etcd.url,
      extra: tableFlags(s3.endpoint),
    });
    const first = await leaderOf(nodes);
    producers.push(...["h1", "h2"].map((id) => new HttpProducer(id, nodes)));
    const acked = () => producers.map((p) => p.acks.length);
    // The first leader has committed some rows to the table before it is killed.
    await until(async () => (await tableLast(get)) > 0, 30_000, "the first leader's commits");
    assert(/"event":"iceberg_table_kept"/.test(first.stderr()), "the leader took the table");
    const before = acked();
    await first.kill();
    const next = await leaderOf(nodes.filter((n) => n.running), 20_000);
    await until(() => acked().every((n, i) => n >= before[i] + 5), 30_000, "the new leader's acks");
    await first.start(); // back, as a follower
    const again = acked();
    await until(() => acked().every((n, i) => n >= again[i] + 5), 30_000, "acks after the restart");
    for (const p of producers) await p.stop();
    for (const p of producers) assertEquals(p.problems, [], p.id);

    const end = await converged(nodes);
    const shown = await rowsShown(nodes[0].url, end);
    assertEquals(shown.map(([o]) => o), Array.from({ length: end - 1 }, (_, k) => k + 1));
    const log = new Map(shown.map(([o, text]) => [o, JSON.parse(text)]));
    // The leader seals its tail within --seal-every and commits it.
    const leader = await leaderOf(nodes);
    await until(async () => (await tableLast(get)) >= end - 1, 30_000, `the table at ${end - 1}`);
    const problems: string[] = [];
    checkTable(await tableRows(get, problems), log, problems);
    assertEquals(problems, []);
    // /head: the table's state on the leader, nothing on a follower.
    await until(
      async () => (await icebergHead(leader))?.last_offset === end - 1,
      10_000,
      "the leader's /head to show the table",
    );
    const h = (await icebergHead(leader))!;
    assertEquals(h.location, "s3://archive/cluster/t/iceberg");
    assertEquals(h.last_error, null);
    for (const n of nodes.filter((x) => x !== leader)) assertEquals(await icebergHead(n), null);
    assert(/"event":"iceberg_table_kept"/.test(next.stderr()), "the new leader took the table");

    for (const n of nodes) await n.stop();
    for (const n of nodes) {
      const v = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", CLI, "verify", `${n.root}/t`],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assertEquals(v.code, 0, `verify ${n.name}: ${new TextDecoder().decode(v.stderr)}`);
    }
  } finally {
    await Promise.allSettled(producers.map((p) => p.stop()));
    await stopS3(s3);
    await rmrf(root);
  }
});

Deno.test("serve --cluster refuses --iceberg without --archive, in one line saying why and what to do", async () => {
  const root = await tempDir();
  try {
    const schema = `${root}/t.json`;
    await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
    const common = ["--cluster", "http://127.0.0.1:1", "--node", "n1", "--root", root];
    const flags = await runServe([...common, "--stream", `t=${schema}`, "--iceberg", "t"]);
    assertEquals(flags.code, 2);
    assertEquals(flags.stderr.trim().split("\n").length, 1, flags.stderr);
    assert(/--iceberg "t" with --cluster needs --archive/.test(flags.stderr), flags.stderr);
    assert(/each node's own disk would hold a separate table/.test(flags.stderr), flags.stderr);
    // The config file's "iceberg": true the same.
    const config = `${root}/serve.json`;
    await Deno.writeTextFile(
      config,
      JSON.stringify({ streams: { t: { schema, iceberg: true } }, cluster: "http://127.0.0.1:1" }),
    );
    const file = await runServe(["--config", config, "--node", "n1", "--root", root]);
    assertEquals(file.code, 2);
    assert(/--iceberg "t" with --cluster needs --archive/.test(file.stderr), file.stderr);
  } finally {
    await rmrf(root);
  }
});
