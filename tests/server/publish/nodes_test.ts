// publisher() and `cli.ts publish` given several URLs, against a real
// `cli.ts serve` and real HTTP servers in front of it that answer as a
// cluster's follower does: 307 to the leader (the publish upgrade and a POST),
// 503 no_leader for a while, a redirect loop. A dead first node is skipped.
import { assert, assertEquals } from "../../harness/assert.ts";
import { freePort } from "../../harness/util.ts";
import { CLI, withTimeout } from "../../harness/serve.ts";
import { publisher, PublishError } from "../../../client/mod.ts";
import {
  endOffset,
  type PublishServer,
  readAll,
  startPublishServer,
} from "../../harness/publish_child.ts";

/** An HTTP server on a free port answering every request with `answer`. */
function front(answer: (req: Request, url: URL) => Response): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (req) => answer(req, new URL(req.url)),
  );
}

/** A follower's 307 to `leader` (an http:// base), same path and query. */
function redirectTo(leader: string) {
  return (_req: Request, url: URL) =>
    new Response(null, {
      status: 307,
      headers: { location: `${leader}${url.pathname}${url.search}` },
    });
}

function noLeader(): Response {
  return Response.json({ error: "no_leader", detail: "no leader is known" }, { status: 503 });
}

async function withServer(f: (s: PublishServer) => Promise<void>): Promise<void> {
  const s = await startPublishServer();
  try {
    await f(s);
  } finally {
    await s.stop();
  }
}

Deno.test("publisher([dead, live]) publishes to the live node", async () => {
  await withServer(async (s) => {
    const dead = `ws://127.0.0.1:${freePort()}/t`;
    const pub = await publisher([dead, `${s.ws}/t`], { producer: "nodes-c" });
    assertEquals(pub.url, `${s.ws}/t/publish?producer=nodes-c`);
    assertEquals(await pub.sendMany([{ sym: "a", px: 1 }, { sym: "b", px: 2 }]), [1, 2]);
    await pub.close();
    assertEquals(await endOffset(s.http), 3);
  });
});

Deno.test("a follower's 307 before the publish upgrade: the publisher follows it to the leader; a POST is redirected too", async () => {
  await withServer(async (s) => {
    const f = front(redirectTo(s.http));
    try {
      const via = `ws://127.0.0.1:${f.addr.port}/t`;
      const pub = await publisher(via, { producer: "nodes-d" });
      assertEquals(pub.url, `${s.ws}/t/publish?producer=nodes-d`);
      assertEquals(await pub.send({ sym: "a", px: 1 }), 1);
      await pub.close();
      // POST /t through the follower: 307 keeps the method and body (curl -L, fetch).
      const res = await fetch(`http://127.0.0.1:${f.addr.port}/t`, {
        method: "POST",
        headers: {
          "content-type": "application/x-ndjson",
          "streamcast-producer": "nodes-post",
          "streamcast-seq": "1",
        },
        body: '{"sym":"b","px":2}\n',
      });
      assertEquals(res.redirected, true);
      assertEquals(await res.json(), { first: 2, last: 2, count: 1 });
      const rows = await readAll(s.ws, 2);
      assertEquals(rows.map((r) => r.offset), [1, 2]);
    } finally {
      await f.shutdown();
    }
  });
});

Deno.test("503 no_leader, then a redirect: publisher() waits for a leader, then publishes there", async () => {
  await withServer(async (s) => {
    let elected = false;
    const seen: string[] = [];
    const f = front((req, url) => {
      seen.push(elected ? "307" : "503");
      return elected ? redirectTo(s.http)(req, url) : noLeader();
    });
    try {
      const starting = publisher(`ws://127.0.0.1:${f.addr.port}/t`, {
        producer: "nodes-e",
        backoff: { minMs: 20, maxMs: 100 },
      });
      // Elected only once the publisher was told no_leader at least twice.
      while (seen.length < 2) await new Promise((r) => setTimeout(r, 10));
      elected = true;
      const pub = await withTimeout(starting, 10_000, "the start after the election");
      assertEquals(await pub.send({ sym: "a", px: 1 }), 1);
      await pub.close();
    } finally {
      await f.shutdown();
    }
  });
});

Deno.test("the leader lost: frames published meanwhile go out once a node takes them, each stored once", async () => {
  await withServer(async (s) => {
    const f = front(redirectTo(s.http));
    try {
      // The "leader" is reached directly first; the follower points back to it after its restart.
      const pub = await publisher([`${s.ws}/t`, `ws://127.0.0.1:${f.addr.port}/t`], {
        producer: "nodes-f",
        backoff: { minMs: 20, maxMs: 100 },
      });
      const first = await pub.send({ sym: "a", px: 0 });
      await s.proc.stop(); // SIGKILL: the leader is gone
      const sends: Promise<number>[] = [];
      for (let i = 1; i <= 50; i++) sends.push(pub.send({ sym: "a", px: i }));
      await s.restart(); // up again on the same port and root
      const offsets = [first, ...await withTimeout(Promise.all(sends), 20_000, "every answer")];
      assertEquals(offsets, Array.from({ length: 51 }, (_, i) => i + 1));
      await pub.close();
      const rows = await readAll(s.ws, 51);
      assertEquals(rows.map((r) => JSON.parse(r.line)[1].px), offsets.map((o) => o - 1));
    } finally {
      await f.shutdown();
    }
  });
});

Deno.test("no node takes the publish: a redirect loop and no_leader are named, within retryTimeoutMs", async () => {
  const loop = front((_req, url) =>
    new Response(null, { status: 307, headers: { location: `${url.pathname}${url.search}` } })
  );
  const waiting = front(() => noLeader());
  try {
    const a = `ws://127.0.0.1:${loop.addr.port}/t`;
    const b = `ws://127.0.0.1:${waiting.addr.port}/t`;
    const err = await withTimeout(
      publisher([a, b], {
        producer: "nodes-g",
        retryTimeoutMs: 300,
        backoff: { minMs: 20, maxMs: 50 },
      }).catch((e) => e),
      10_000,
      "the start to give up",
    );
    assert(err instanceof PublishError, String(err));
    assertEquals(err.error, "closed");
    assert(err.message.includes(`${a}/publish?producer=nodes-g: a redirect loop`), err.message);
    assert(err.message.includes(`${b}/publish?producer=nodes-g: 503 no_leader`), err.message);

    const hops = front((_req, url) => {
      const n = Number(url.searchParams.get("n") ?? "0");
      url.searchParams.set("n", String(n + 1));
      return new Response(null, { status: 307, headers: { location: url.toString() } });
    });
    try {
      const far = await publisher(`ws://127.0.0.1:${hops.addr.port}/t`, {
        producer: "nodes-h",
        maxRedirects: 2,
        retryTimeoutMs: 200,
        backoff: { minMs: 20, maxMs: 50 },
      }).catch((e) => e);
      assert(far instanceof PublishError, String(far));
      assert(far.message.includes("more than 2 redirects"), far.message);
    } finally {
      await hops.shutdown();
    }
  } finally {
    await loop.shutdown();
    await waiting.shutdown();
  }
});

Deno.test("cli.ts publish DEAD,LIVE --producer: every row acknowledged on the live node", async () => {
  await withServer(async (s) => {
    const dead = `ws://127.0.0.1:${freePort()}/t`;
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, "publish", `${dead},${s.ws}/t`, "--producer", "cli-n", "--acks"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
    const w = child.stdin.getWriter();
    let input = "";
    for (let i = 0; i < 30; i++) input += JSON.stringify({ sym: "x", px: i }) + "\n";
    await w.write(new TextEncoder().encode(input));
    await w.close();
    const out = await withTimeout(child.output(), 30_000, "cli publish");
    const stderr = new TextDecoder().decode(out.stderr);
    assertEquals(out.code, 0, stderr);
    const acks = new TextDecoder().decode(out.stdout).trim().split("\n").map((l) => JSON.parse(l));
    assertEquals(acks.at(-1).last, 30);
    assertEquals(await endOffset(s.http), 31);
  });
});
