// The client's catch-up for a row-level grant: refused too_old by a server,
// it asks for the chunks, is answered 403 "row-level grant: read through the
// socket", and catches up through the socket instead. A fake server plays
// the refusals over real sockets (the real server does not refuse such a
// holder too_old: tests/server/access/expiry_test.ts).
import { assertEquals } from "../harness/assert.ts";
import { connect } from "../../client/connect.ts";
import { ROW_LEVEL_DETAIL } from "../../wire/subscribe.ts";

Deno.test("connect with catchUp falls back to the socket when the chunks are refused to a row-level grant", async () => {
  const ac = new AbortController();
  const asked: string[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    (req) => {
      const u = new URL(req.url);
      asked.push(`${u.pathname}${u.search.includes("offset=1") ? "?offset=1" : ""}`);
      if (u.pathname === "/x/manifest") {
        return Response.json({ error: "forbidden", detail: ROW_LEVEL_DETAIL }, { status: 403 });
      }
      const first = asked.filter((a) => a === "/x?offset=1").length === 1;
      const { socket, response } = Deno.upgradeWebSocket(req, { protocol: "streamcast" });
      socket.onerror = () => {};
      socket.onopen = () => {
        if (first) {
          socket.close(
            4416,
            JSON.stringify({ error: "not_replayable", why: "too_old", offset: 1 }),
          );
          return;
        }
        socket.send(JSON.stringify({
          streamcast: 2,
          stream: "x",
          stream_id: "0123456789abcdef0123456789abcdef",
          end_offset: 5,
          replay: [1, 5],
          log: { name: "x", archive: null },
          durable: true,
          schema: { type: "object", properties: { v: { type: "integer" } } },
          frames: "batch",
        }));
        socket.send('[1,{"v":1}]\n[3,{"v":3}]');
      };
      return response;
    },
  );
  try {
    const sub = await connect(`ws://127.0.0.1:${server.addr.port}/x`, {
      offset: 1,
      catchUp: true,
      token: "row-level-token-0123456789",
    });
    const got: number[] = [];
    for await (const [offset] of sub) {
      got.push(offset!);
      if (offset === 3) break;
    }
    await sub.close();
    assertEquals(got, [1, 3]);
    assertEquals(asked, ["/x?offset=1", "/x/manifest", "/x?offset=1"]);
  } finally {
    ac.abort();
    await server.finished;
  }
});
