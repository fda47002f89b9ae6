// `serve --cluster --no-fsync` is refused before it contacts etcd: a cluster
// counts a row as held by a node only once it is synced to its disk.
import { assert, assertEquals } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { runServe } from "../harness/serve.ts";

Deno.test("serve: --no-fsync with --cluster is refused at start with one line", async () => {
  const root = await tempDir();
  try {
    const schema = `${root}/t.json`;
    await Deno.writeTextFile(
      schema,
      JSON.stringify({
        type: "object",
        properties: { v: { type: "integer" } },
        required: ["v"],
      }),
    );
    // Nothing listens at the etcd address: the refusal comes before any contact.
    const common = ["--cluster", "http://127.0.0.1:9", "--node", "n1", "--root", `${root}/n1`];
    const r = await runServe([...common, "--stream", `t=${schema}`, "--no-fsync"]);
    assertEquals(r.code, 2, r.stderr);
    assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert(/^streamcast serve: --no-fsync with --cluster: /.test(r.stderr.trim()), r.stderr);
    assert(/synced/.test(r.stderr), r.stderr);
    // The same from a config file's "fsync": false.
    const config = `${root}/serve.json`;
    await Deno.writeTextFile(config, JSON.stringify({ fsync: false }));
    const c = await runServe([...common, "--stream", `t=${schema}`, "--config", config]);
    assertEquals(c.code, 2, c.stderr);
    assert(/--no-fsync with --cluster/.test(c.stderr), c.stderr);
  } finally {
    await rmrf(root);
  }
});
