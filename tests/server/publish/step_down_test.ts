// A publish socket on a node whose leadership ends with several frames
// taken and not yet committed: none of them is answered, and the socket is
// closed with 1013 `no_leader` so that the publisher goes to the next leader.
// The stream's log is a real replicated log on disk, served by the real
// server; the leadership is ended as the cluster node ends it
// (`writable = false`, then `failWaiters`).
import { assertEquals } from "../../harness/assert.ts";
import { tempDir, until } from "../../harness/util.ts";
import { serve, Stream } from "../../../mod.ts";
import { NotLeaderError } from "../../../log/errors.ts";

Deno.test("publish socket: a leadership ending with frames in flight closes it 1013 no_leader, answering none of them", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", {
    root,
    schema: { type: "object", properties: { v: { type: "integer" } }, required: ["v"] },
    logOptions: { replicated: true },
  });
  const rep = stream.log!.replication!;
  rep.writable = true;
  await rep.beginTerm(1);
  const member = {
    head: () => ({}),
    publishable: () => null,
    accept: () => {},
    admit: () => Promise.resolve("no replicas in this test"),
    token: null,
    replicaLagMs: 1000,
    close: async () => {},
  };
  const server = serve([{ stream, role: { kind: "member", member } }], {
    port: 0,
    onListen: () => {},
    publish: ["t"],
  });
  const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}/t/publish?producer=p`);
  const answers: unknown[] = [];
  let closed: { code: number; reason: string } | null = null;
  ws.onmessage = (e) => answers.push(JSON.parse(e.data as string));
  ws.onclose = (e) => (closed = { code: e.code, reason: e.reason });
  try {
    await until(() => answers.length === 1, 10_000, "the greeting");
    for (let seq = 1; seq <= 4; seq++) ws.send(JSON.stringify({ seq, rows: [{ v: seq }] }));
    // Durable here, never committed: the cluster did not hold them.
    await until(() => rep.durableEnd === 5, 10_000, "the frames durable here");
    rep.writable = false;
    rep.failWaiters(new NotLeaderError("t", "http://127.0.0.1:1"));
    await until(() => closed !== null, 10_000, "the socket closed");
    assertEquals(closed!.code, 1013);
    assertEquals(JSON.parse(closed!.reason).error, "no_leader");
    assertEquals(answers.length, 1, "no frame was answered");
  } finally {
    ws.close();
    await server.shutdown();
    await stream.close().catch(() => {});
    await Deno.remove(root, { recursive: true });
  }
});
