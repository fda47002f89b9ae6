// Retention through the real path: `serve --retain-bytes` / `--retain-age`
// on a primary, on a read replica (`--follow`) with an archive (a real S3
// server, s3rver), and on a cluster (a real etcd) with an archive, where a
// follower uploads nothing and learns from the archive's manifest what it
// may drop. Each seals every second, so that a bound is applied in seconds.
import { join } from "node:path";
import { assert, assertEquals } from "../harness/assert.ts";
import { getJson, type ServeProc, startServe } from "../harness/serve.ts";
import { TestSub } from "../harness/subscriber.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import { startS3, stopS3 } from "../harness/s3.ts";
import { startEtcd } from "../harness/etcd.ts";
import { leaderOf, startServeNodes } from "../harness/serve_nodes.ts";

const SCHEMA = {
  type: "object",
  properties: { n: { type: "integer" }, pad: { type: "string" } },
  required: ["n", "pad"],
};

// Rows that do not compress to nothing: a chunk's bytes grow with its rows.
function rows(from: number, count: number): string {
  const out: string[] = [];
  for (let n = from; n < from + count; n++) {
    const pad = crypto.getRandomValues(new Uint8Array(48)).reduce(
      (s, b) => s + b.toString(16).padStart(2, "0"),
      "",
    );
    out.push(JSON.stringify({ n, pad }));
  }
  return out.join("\n") + "\n";
}

/**
 * POSTs rows to `url`/t every 100 ms until stopped; `stop` throws the first
 * failure (a POST not answered 200).
 */
function feed(url: string, perPost = 20, p = "") {
  let next = 1;
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      const body = p === "" ? rows(next, perPost) : clusterRows(p, next, perPost);
      const res = await fetch(`${url}/t`, { method: "POST", body });
      const text = await res.text();
      assertEquals(res.status, 200, text);
      next += perPost;
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  done.catch(() => {}); // seen by stop()
  return {
    async stop() {
      stopped = true;
      await done;
    },
  };
}

// The cluster harness's schema: {p, seq, i}.
function clusterRows(p: string, from: number, count: number): string {
  const out: string[] = [];
  for (let i = from; i < from + count; i++) out.push(JSON.stringify({ p, seq: i, i }));
  return out.join("\n") + "\n";
}

async function head(url: string): Promise<Record<string, unknown>> {
  return await getJson(`${url}/t/head`);
}

/** Sum of the chunk bytes the log's manifest lists. */
async function chunkBytes(logDir: string): Promise<number> {
  const m = JSON.parse(await Deno.readTextFile(join(logDir, "manifest.json")));
  return (m.chunks as { bytes: number }[]).reduce((n, c) => n + c.bytes, 0);
}

async function refusedEvicted(ws: string, earliest: number): Promise<void> {
  const sub = await TestSub.open(`${ws}/t?offset=1`);
  const closed = await sub.done;
  assertEquals(closed.code, 4416);
  const reason = JSON.parse(closed.reason);
  assertEquals(reason.why, "evicted");
  assert(reason.earliest >= earliest, closed.reason);
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/_/metrics`)).text();
  const m = new RegExp(`^${name}\\{stream="t"\\} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : NaN;
}

Deno.test("serve --retain-bytes drops a primary's oldest chunks, keeps the bound, refuses evicted subscribes", async () => {
  const dir = await tempDir();
  let s: ServeProc | null = null;
  try {
    const schema = join(dir, "t.json");
    await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
    const root = join(dir, "data");
    s = await startServe([
      "--stream",
      `t=${schema}`,
      "--publish",
      "t",
      "--root",
      root,
      "--port",
      "0",
      "--seal-every",
      "1",
      "--retain-bytes",
      "12KB",
    ]);
    const url = s.url;
    const f = feed(url);
    try {
      await until(async () => ((await head(url)).earliest as number) > 1, 30_000, "earliest > 1");
      await until(
        async () => (await chunkBytes(join(root, "t"))) <= 12_000,
        10_000,
        "the bound kept",
      );
    } finally {
      await f.stop();
    }
    const h = await head(url);
    assertEquals(h.retention, { age_s: null, bytes: 12_000 });
    assert((h.bytes as number) > 0, JSON.stringify(h));
    await refusedEvicted(s.ws, h.earliest as number);
    // What is left reads from the earliest to the end, in order.
    const sub = await TestSub.open(`${s.ws}/t?offset=${h.earliest}&frames=batch`);
    const end = h.end_offset as number;
    await sub.waitLines(end - (h.earliest as number));
    assertEquals(sub.offsets()[0], h.earliest);
    await sub.close();
    assert(
      (await metric(url, "streamcast_retention_dropped_rows_total")) >= (h.earliest as number) - 1,
    );
    assert((await metric(url, "streamcast_log_bytes")) > 0);
    assertEquals((await s.signal("SIGTERM")).code, 0, s.stderr());
    s = null;
  } finally {
    await s?.stop();
    await rmrf(dir);
  }
});

Deno.test("serve --retain-age drops a primary's chunks older than the bound, per stream from the config", async () => {
  const dir = await tempDir();
  let s: ServeProc | null = null;
  try {
    const config = join(dir, "serve.json");
    await Deno.writeTextFile(
      config,
      JSON.stringify({
        root: join(dir, "data"),
        port: 0,
        sealEvery: 1,
        retainAge: "1h",
        streams: { t: { schema: SCHEMA, publish: true, retainAge: "2s" } },
      }),
    );
    s = await startServe(["--config", config]);
    const url = s.url;
    const first = await fetch(`${url}/t`, { method: "POST", body: rows(1, 50) });
    assertEquals(first.status, 200, await first.text());
    const f = feed(url, 5);
    try {
      await until(
        async () => ((await head(url)).earliest as number) > 50,
        30_000,
        "the first rows aged out",
      );
    } finally {
      await f.stop();
    }
    assertEquals((await head(url)).retention, { age_s: 2, bytes: null });
    assertEquals((await s.signal("SIGTERM")).code, 0, s.stderr());
    s = null;
  } finally {
    await s?.stop();
    await rmrf(dir);
  }
});

Deno.test("serve --follow --archive --retain-bytes: a read replica drops its own history; the primary keeps all", async () => {
  const dir = await tempDir();
  const s3 = await startS3();
  let primary: ServeProc | null = null;
  let mirror: ServeProc | null = null;
  try {
    const schema = join(dir, "t.json");
    await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
    const archive = [
      "--archive",
      "s3://archive/r",
      "--s3-endpoint",
      s3.endpoint,
      "--s3-path-style",
    ];
    primary = await startServe([
      "--stream",
      `t=${schema}`,
      "--publish",
      "t",
      "--root",
      join(dir, "p"),
      "--port",
      "0",
      "--seal-every",
      "1",
      ...archive,
    ]);
    mirror = await startServe([
      "--follow",
      `t=${primary.ws}/t`,
      "--root",
      join(dir, "m"),
      "--port",
      "0",
      "--seal-every",
      "1",
      "--follow-poll",
      "0.5",
      "--retain-bytes",
      "12KB",
      ...archive,
    ]);
    const m = mirror.url;
    const f = feed(primary.url);
    try {
      await until(
        async () => ((await head(m)).earliest as number) > 1,
        40_000,
        "the replica's earliest > 1",
      );
      await until(
        async () => (await chunkBytes(join(dir, "m", "t"))) <= 12_000,
        10_000,
        "the bound kept",
      );
    } finally {
      await f.stop();
    }
    assertEquals((await head(primary.url)).earliest, 1);
    const h = await head(m);
    assertEquals(h.retention, { age_s: null, bytes: 12_000 });
    await refusedEvicted(mirror.ws, h.earliest as number);
    assertEquals((await mirror.signal("SIGTERM")).code, 0, mirror.stderr());
    mirror = null;
    assertEquals((await primary.signal("SIGTERM")).code, 0, primary.stderr());
    primary = null;
  } finally {
    await mirror?.stop();
    await primary?.stop();
    await stopS3(s3);
    await rmrf(dir);
  }
});

Deno.test("serve --cluster --archive --retain-bytes: the leader drops what it uploaded, a follower what the archive's manifest covers", async () => {
  const root = await tempDir();
  const s3 = await startS3();
  try {
    await using etcd = await startEtcd();
    await using nodes = await startServeNodes(root, ["n1", "n2"], {
      etcd: etcd.url,
      extra: [
        "--archive",
        "s3://archive/c",
        "--s3-endpoint",
        s3.endpoint,
        "--s3-path-style",
        "--seal-every",
        "1",
        "--retain-bytes",
        "4KB",
      ],
    });
    const leader = await leaderOf(nodes);
    const follower = nodes.find((n) => n !== leader)!;
    const f = feed(leader.url, 40, "p");
    try {
      for (const n of [leader, follower]) {
        await until(
          async () => ((await head(n.url)).earliest as number) > 1,
          40_000,
          `${n.name}'s earliest > 1`,
        );
      }
      await until(
        async () => (await chunkBytes(join(follower.root, "t"))) <= 4000,
        10_000,
        "the follower's bound kept",
      );
    } finally {
      await f.stop();
    }
    // Whatever a node dropped, the archive holds: its manifest covers from offset 1.
    const archived = JSON.parse(
      await (await fetch(`${s3.endpoint}/archive/c/t/manifest.json`)).text(),
    );
    assertEquals(archived.chunks[0].first, 1);
    assertEquals((await head(follower.url)).retention, { age_s: null, bytes: 4000 });
  } finally {
    await stopS3(s3);
    await rmrf(root);
  }
});
