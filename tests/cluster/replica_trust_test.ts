// Who may open a leader's replicate route, and what a replica's reports are
// checked against, end to end: a real etcd and real `cli.ts serve --cluster`
// processes. A fake replica is a test-side client: a fetch with upgrade
// headers (the status before the upgrade), a WebSocket, or a raw TCP socket
// that never answers a ping. "Registered" fake nodes are written into etcd
// by the test itself, on a lease it revokes: a node that lies, as opposed to
// a stranger.
import { assert, assertEquals } from "../harness/assert.ts";
import { startEtcd } from "../harness/etcd.ts";
import { rmrf, tempDir, until } from "../harness/util.ts";
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { LeaseKeeper } from "../../cluster/lease_keeper.ts";
import { newInstanceId, registerNode } from "../../cluster/nodes.ts";
import { INSTANCE_HEADER, openReplicationSocket } from "../../cluster/replication_wire.ts";
import { leaderOf, post, rowsOf, type ServeNode, startServeNodes } from "../harness/serve_nodes.ts";

const CLUSTER_TOKEN = "cluster-token-0123456789abcdef";
const NODES_TOKEN = "nodes-entry-token-0123456789abcdef";
const PUBLISH_TOKEN = "publish-only-token-0123456789ab";
const READ_TOKEN = "read-only-token-0123456789abcdef";

/** A node name registered in etcd by the test, as a lying member would be. */
async function registerFake(
  etcd: EtcdClient,
  node: string,
): Promise<{ instance: string; [Symbol.asyncDispose](): Promise<void> }> {
  const instance = newInstanceId();
  const lease = await LeaseKeeper.grant(etcd, { ttlSeconds: 30 });
  await registerNode(etcd, { node, url: "http://127.0.0.1:1", instance }, lease.id, 30);
  return {
    instance,
    async [Symbol.asyncDispose]() {
      await lease.revoke().catch(() => {});
    },
  };
}

/** The instance id a running node wrote in its registration. */
async function instanceOf(etcd: EtcdClient, node: string): Promise<string> {
  const kv = await etcd.get(`/streamcast/nodes/${node}`);
  assert(kv !== null, `${node} is registered`);
  return JSON.parse(kv.value).instance;
}

/** The answer to a replicate upgrade as a fetch sees it (null: none, e.g. a 101 it cannot take). */
async function upgradeAnswer(
  url: string,
  node: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> | null } | null> {
  try {
    const res = await fetch(`${url}/t/replicate?node=${node}`, {
      headers: {
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        ...headers,
      },
      signal: AbortSignal.timeout(5000),
    });
    const text = await res.text();
    return { status: res.status, body: text === "" ? null : JSON.parse(text) };
  } catch {
    return null;
  }
}

/** A WebSocket replica: its messages, and how it ended. */
class FakeLink {
  readonly ws: WebSocket;
  readonly texts: string[] = [];
  opened = false;
  closed: { code: number; reason: string } | null = null;

  constructor(url: string, node: string, o: { instance?: string; token?: string }) {
    this.ws = openReplicationSocket(`${url.replace(/^http/, "ws")}/t/replicate?node=${node}`, o);
    this.ws.onopen = () => (this.opened = true);
    this.ws.onmessage = (e) => {
      if (typeof e.data === "string") this.texts.push(e.data);
    };
    this.ws.onclose = (e) => (this.closed = { code: e.code, reason: e.reason });
  }

  /** Waits for the leader's hello; returns its `end`. */
  async hello(): Promise<number> {
    await until(() => this.texts.length > 0 || this.closed !== null, 10_000, "the hello");
    assert(this.texts.length > 0, `closed before the hello: ${JSON.stringify(this.closed)}`);
    const hello = JSON.parse(this.texts[0]);
    assertEquals(hello.type, "hello");
    return hello.end;
  }

  async close(): Promise<void> {
    if (this.closed === null) {
      this.ws.close();
      await until(() => this.closed !== null, 10_000, "the fake link to close");
    }
  }
}

async function leading(url: string, token?: string): Promise<void> {
  await until(
    async () => {
      const res = await fetch(`${url}/t/head`, {
        headers: token ? { authorization: `Bearer ${token}` } : {},
      }).catch(() => null);
      if (!res) return false;
      const h = await res.json().catch(() => null);
      return h?.cluster?.role === "leader";
    },
    30_000,
    "the node to lead",
  );
}

Deno.test("replicate: a publish-only or read-only token is refused 403; the cluster's token opens it", async () => {
  const root = await tempDir();
  await using etcdProc = await startEtcd();
  const etcd = new EtcdClient(etcdProc.url);
  try {
    const tokensPath = `${root}/tokens.json`;
    await Deno.writeTextFile(
      tokensPath,
      JSON.stringify({
        tokens: [
          { name: "pub", token: PUBLISH_TOKEN, publish: ["*"] },
          { name: "reader", token: READ_TOKEN, streams: ["*"] },
          { name: "nodes", token: NODES_TOKEN, cluster: true },
        ],
      }),
    );
    await using nodes = await startServeNodes(root, ["n1"], {
      etcd: etcdProc.url,
      replicas: 1,
      extra: ["--tokens", tokensPath, "--cluster-token", CLUSTER_TOKEN],
    });
    const n1 = nodes[0];
    await leading(n1.url, READ_TOKEN);
    await using fake = await registerFake(etcd, "n9");
    const proof = { [INSTANCE_HEADER]: fake.instance };
    for (const token of [PUBLISH_TOKEN, READ_TOKEN]) {
      const a = await upgradeAnswer(n1.url, "n9", { authorization: `Bearer ${token}`, ...proof });
      assertEquals(a?.status, 403, `${token}: ${JSON.stringify(a)}`);
      assertEquals(a?.body?.error, "forbidden");
      assertEquals(a?.body?.route, "replicate");
      assert(String(a?.body?.detail).includes("cluster"), JSON.stringify(a?.body));
    }
    assertEquals((await upgradeAnswer(n1.url, "n9", proof))?.status, 401);
    // The cluster's token (the flag's, or the file's "cluster": true) with the node's proof opens it.
    for (const token of [CLUSTER_TOKEN, NODES_TOKEN]) {
      const link = new FakeLink(n1.url, "n9", { token, instance: fake.instance });
      assertEquals(await link.hello(), 1);
      await link.close();
    }
    assert(n1.stderr().includes('"why":"forbidden"'), "the denials are logged");
  } finally {
    await rmrf(root);
  }
});

Deno.test("replicate: with --tokens, followers replicate with the cluster's token and publishes commit at --replicas 2", async () => {
  const root = await tempDir();
  await using etcdProc = await startEtcd();
  try {
    const tokensPath = `${root}/tokens.json`;
    await Deno.writeTextFile(
      tokensPath,
      JSON.stringify({
        tokens: [
          { name: "pub", token: PUBLISH_TOKEN, publish: ["*"] },
          { name: "reader", token: READ_TOKEN, streams: ["*"] },
        ],
      }),
    );
    await using nodes = await startServeNodes(root, ["n1", "n2"], {
      etcd: etcdProc.url,
      replicas: 2,
      extra: ["--tokens", tokensPath, "--cluster-token", CLUSTER_TOKEN],
    });
    let answer: { status: number; body: Record<string, unknown> } | null = null;
    await until(
      async () => {
        for (const n of nodes) {
          const res = await fetch(`${n.url}/t`, {
            method: "POST",
            headers: {
              authorization: `Bearer ${PUBLISH_TOKEN}`,
              "content-type": "application/x-ndjson",
            },
            body: rowsOf("a", 1, 3),
            redirect: "manual",
          }).catch(() => null);
          if (res === null) continue;
          const body = await res.json().catch(() => ({}));
          if (res.status === 200) answer = { status: res.status, body };
        }
        return answer !== null;
      },
      30_000,
      "a publish committed on both nodes",
    );
    assertEquals(answer!.body.first, 1);
    for (const n of nodes) {
      assert(!n.stderr().includes('"why":"forbidden"'), `${n.name} refused a link:\n${n.stderr()}`);
    }
  } finally {
    await rmrf(root);
  }
});

Deno.test("replicate: an unregistered node name, or a registered one without its proof, is refused 403 before the upgrade", async () => {
  const root = await tempDir();
  await using etcdProc = await startEtcd();
  const etcd = new EtcdClient(etcdProc.url);
  try {
    await using nodes = await startServeNodes(root, ["n1"], { etcd: etcdProc.url, replicas: 1 });
    const n1 = nodes[0];
    await leading(n1.url);
    // A node's record carries its process's instance id: the proof its follower links show.
    assert(/^[0-9a-f]{32}$/.test(await instanceOf(etcd, "n1")), "n1's instance id");
    const ghost = await upgradeAnswer(n1.url, "ghost", { [INSTANCE_HEADER]: newInstanceId() });
    assertEquals(ghost?.status, 403, JSON.stringify(ghost));
    assertEquals(ghost?.body?.error, "forbidden");
    assert(String(ghost?.body?.detail).includes("not registered"), JSON.stringify(ghost?.body));
    await using fake = await registerFake(etcd, "n9");
    const wrong = await upgradeAnswer(n1.url, "n9", { [INSTANCE_HEADER]: newInstanceId() });
    assertEquals(wrong?.status, 403, JSON.stringify(wrong));
    assert(String(wrong?.body?.detail).includes("proof"), JSON.stringify(wrong?.body));
    const none = await upgradeAnswer(n1.url, "n9");
    assertEquals(none?.status, 403, JSON.stringify(none));
    // The right proof opens it.
    const link = new FakeLink(n1.url, "n9", { instance: fake.instance });
    assertEquals(await link.hello(), 1);
    await link.close();
  } finally {
    await rmrf(root);
  }
});

/** Two nodes at R = 2 with rows committed on both: the leader and its follower. */
async function twoNodes(root: string, etcd: string, extra: string[] = []) {
  const nodes = await startServeNodes(root, ["n1", "n2"], { etcd, replicas: 2, extra });
  const leader = await leaderOf(nodes);
  const follower = nodes.find((n) => n !== leader)!;
  const a = await post(leader.url, rowsOf("a", 1, 5), { producer: "a", seq: 1 });
  assertEquals(a?.status, 200, JSON.stringify(a));
  return { nodes, leader, follower };
}

async function inSync(n: ServeNode): Promise<string[] | null> {
  return (await n.head())?.in_sync ?? null;
}

Deno.test("replicate: a second link under a live follower's name without its proof leaves the follower's link open", async () => {
  const root = await tempDir();
  await using etcdProc = await startEtcd();
  try {
    const { nodes, leader, follower } = await twoNodes(root, etcdProc.url);
    await using _nodes = nodes;
    const impostor = new FakeLink(leader.url, follower.name, {});
    await until(() => impostor.opened || impostor.closed !== null, 10_000, "the impostor's end");
    assert(!impostor.opened, "the impostor's socket was upgraded");
    await impostor.close().catch(() => {});
    // A publish commits on both (R = 2) through the follower's one link.
    const b = await post(leader.url, rowsOf("a", 2, 1), { producer: "a", seq: 2 });
    assertEquals(b?.status, 200, JSON.stringify(b));
    await until(async () => (await follower.head())?.durable_end === 7, 10_000, "row 6 on n2");
    // Displaced, the follower's link would have been closed as "replaced".
    assert(
      !/"replica_disconnected".*"reason":"replaced"/.test(follower.stderr()),
      `the follower's link was displaced:\n${follower.stderr()}`,
    );
    assert(/"denied".*"route":"replicate"/.test(leader.stderr()), "the leader logs the refusal");
  } finally {
    await rmrf(root);
  }
});

Deno.test("replicate: a durable report past what was sent closes the link; the in-sync set stays and --replicas 2 still refuses publishes", async () => {
  const root = await tempDir();
  await using etcdProc = await startEtcd();
  const etcd = new EtcdClient(etcdProc.url);
  try {
    const { nodes, leader, follower } = await twoNodes(root, etcdProc.url);
    await using _nodes = nodes;
    await follower.stop();
    await until(
      async () => JSON.stringify(await inSync(leader)) === JSON.stringify([leader.name]),
      20_000,
      "the stopped follower to leave the in-sync set",
    );
    const refused = await post(leader.url, rowsOf("a", 2, 1), { producer: "a", seq: 2 });
    assertEquals(refused?.status, 503);
    // A registered node that lies: it holds nothing, and says it holds everything.
    await using fake = await registerFake(etcd, "n9");
    const link = new FakeLink(leader.url, "n9", { instance: fake.instance });
    assertEquals(await link.hello(), 6);
    link.ws.send(JSON.stringify({ type: "from", from: 1 }));
    link.ws.send(JSON.stringify({ type: "durable", end: 1e15 }));
    // Whichever comes first: the link closed, or the lie believed.
    await until(
      async () => link.closed !== null || (await inSync(leader))?.includes("n9") === true,
      10_000,
      "the leader to close the link",
    );
    assertEquals(await inSync(leader), [leader.name]);
    assertEquals(link.closed?.code, 4416);
    assertEquals(JSON.parse(link.closed!.reason).error, "ahead");
    const after = await post(leader.url, rowsOf("a", 2, 1), { producer: "a", seq: 2 });
    assertEquals(after?.status, 503, JSON.stringify(after));
    assertEquals(after?.body.error, "not_enough_replicas");
    assertEquals(await inSync(leader), [leader.name]);
    // etcd's in-sync set never named it.
    const { kvs } = await etcd.range("/streamcast/", { prefix: true });
    for (const kv of kvs) {
      if (kv.key.includes("in_sync")) assert(!kv.value.includes("n9"), `${kv.key}: ${kv.value}`);
    }
  } finally {
    await rmrf(root);
  }
});

Deno.test("replicate: links past --max-replica-links are answered 503", async () => {
  const root = await tempDir();
  await using etcdProc = await startEtcd();
  const etcd = new EtcdClient(etcdProc.url);
  try {
    await using nodes = await startServeNodes(root, ["n1"], {
      etcd: etcdProc.url,
      replicas: 1,
      extra: ["--max-replica-links", "1"],
    });
    const n1 = nodes[0];
    await leading(n1.url);
    await using a = await registerFake(etcd, "n8");
    await using b = await registerFake(etcd, "n9");
    const first = new FakeLink(n1.url, "n8", { instance: a.instance });
    assertEquals(await first.hello(), 1);
    const second = await upgradeAnswer(n1.url, "n9", { [INSTANCE_HEADER]: b.instance });
    assertEquals(second?.status, 503, JSON.stringify(second));
    assertEquals(second?.body?.limit, "max_replica_links");
    assertEquals(second?.body?.max, 1);
    // A closed link frees its place.
    await first.close();
    const again = new FakeLink(n1.url, "n9", { instance: b.instance });
    assertEquals(await again.hello(), 1);
    await again.close();
  } finally {
    await rmrf(root);
  }
});

// A WebSocket client over raw TCP that never answers a ping: it says where
// to start and then stays silent. Resolves with the close code the server
// sent (0: the connection ended without one).
async function silentLink(url: string, node: string, instance: string): Promise<number> {
  const u = new URL(url);
  const conn = await Deno.connect({ hostname: u.hostname, port: Number(u.port) });
  try {
    const enc = new TextEncoder();
    await conn.write(enc.encode(
      `GET /t/replicate?node=${node} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\n` +
        `Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
        `Sec-WebSocket-Version: 13\r\n${INSTANCE_HEADER}: ${instance}\r\n\r\n`,
    ));
    let buf = new Uint8Array(0);
    const chunk = new Uint8Array(65536);
    const more = async (): Promise<boolean> => {
      const n = await conn.read(chunk);
      if (n === null) return false;
      const next = new Uint8Array(buf.length + n);
      next.set(buf);
      next.set(chunk.subarray(0, n), buf.length);
      buf = next;
      return true;
    };
    while (!new TextDecoder().decode(buf).includes("\r\n\r\n")) {
      if (!(await more())) throw new Error("no answer to the upgrade");
    }
    const head = new TextDecoder().decode(buf);
    assert(head.startsWith("HTTP/1.1 101"), head);
    buf = buf.subarray(head.indexOf("\r\n\r\n") + 4);
    // One masked text frame: {"type":"from","from":1}.
    const payload = enc.encode(JSON.stringify({ type: "from", from: 1 }));
    const mask = crypto.getRandomValues(new Uint8Array(4));
    const frame = new Uint8Array(6 + payload.length);
    frame.set([0x81, 0x80 | payload.length, ...mask]);
    for (let i = 0; i < payload.length; i++) frame[6 + i] = payload[i] ^ mask[i % 4];
    await conn.write(frame);
    // Read frames (pings unanswered) until the server closes.
    for (;;) {
      while (buf.length >= 2) {
        const op = buf[0] & 0x0f;
        let len = buf[1] & 0x7f;
        let at = 2;
        if (len === 126) {
          if (buf.length < 4) break;
          len = (buf[2] << 8) | buf[3];
          at = 4;
        } else if (len === 127) {
          if (buf.length < 10) break;
          len = Number(new DataView(buf.buffer, buf.byteOffset + 2, 8).getBigUint64(0));
          at = 10;
        }
        if (buf.length < at + len) break;
        if (op === 0x8) return len >= 2 ? (buf[at] << 8) | buf[at + 1] : 0;
        buf = buf.subarray(at + len);
      }
      if (!(await more())) return 0;
    }
  } finally {
    conn.close();
  }
}

Deno.test("replicate: a link that answers no ping is closed within --replica-lag-ms", async () => {
  const root = await tempDir();
  await using etcdProc = await startEtcd();
  const etcd = new EtcdClient(etcdProc.url);
  try {
    await using nodes = await startServeNodes(root, ["n1"], {
      etcd: etcdProc.url,
      replicas: 1,
      lagMs: 1000,
    });
    const n1 = nodes[0];
    await leading(n1.url);
    await using fake = await registerFake(etcd, "n9");
    let code: number | null = null;
    const closed = silentLink(n1.url, "n9", fake.instance).then((c) => (code = c));
    // Bounded wait: without pings the link would stay open for good.
    await until(() => code !== null, 30_000, "the leader to close the silent link");
    await closed;
    assertEquals(code, 1001);
    await until(
      () => /"replication_link_closed".*"node":"n9"/.test(n1.stderr()),
      10_000,
      "the leader to log the closed link",
    );
  } finally {
    await rmrf(root);
  }
});
