// connect(url, { token }): the token goes out as the bearer subprotocol on
// the socket and as Authorization on catch-up's HTTP requests; a server that
// refuses it makes connect() reject with 4401, which is never retried.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { connect, ConnectionClosed } from "../../client/mod.ts";
import { Logger, serve, Stream, TokenTable } from "../../mod.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { row, SCHEMA } from "../harness/security.ts";

const READER = "reader-0123456789abcdef01234567"; // trades only
const OTHER = "other-0123456789abcdef012345678"; // book only

async function setup(maxReplay: number | null = null) {
  const root = await tempDir();
  const trades = await Stream.open("trades", { schema: SCHEMA, root, maxReplay });
  const book = await Stream.open("book", { schema: SCHEMA, root });
  const seen: string[] = [];
  const server = serve([trades, book], {
    port: 0,
    onListen: () => {},
    tokens: TokenTable.parse({
      tokens: [
        { name: "reader", token: READER, streams: ["trades"] },
        { name: "other", token: OTHER, streams: ["book"] },
      ],
    }),
    logger: new Logger({ level: "debug", write: (l) => seen.push(l) }),
  });
  return {
    trades,
    url: `ws://127.0.0.1:${server.addr.port}/trades`,
    seen,
    async stop() {
      await server.shutdown();
      await rmrf(root);
    },
  };
}

Deno.test("connect with a token subscribes where a token is required", async () => {
  const t = await setup();
  try {
    await t.trades.sendMany([row(1), row(2)]);
    const sub = await connect<{ seq: number }>(t.url, { offset: 1, token: READER });
    const got: number[] = [];
    for await (const [offset, msg] of sub) {
      got.push(msg.seq);
      if (offset === 2) break;
    }
    assertEquals(got, [1, 2]);
    assert(t.seen.some((l) => l.includes("subscribe") && l.includes("token_name=reader")));
  } finally {
    await t.stop();
  }
});

Deno.test("connect without a token, or with one for another stream, rejects with 4401 and never retries", async () => {
  const t = await setup();
  try {
    const none = await assertRejects(
      () => connect(t.url, { reconnect: true }),
      ConnectionClosed,
      "401",
    );
    assertEquals(none.code, 4401);
    assertEquals(none.reconnectable, false);
    assert(none.message.includes("requires a bearer token"), none.message);
    const other = await assertRejects(
      () => connect(t.url, { token: OTHER, reconnect: true }),
      ConnectionClosed,
      "403",
    );
    assertEquals(other.code, 4401);
    assert(!other.message.includes(OTHER), "the message does not hold the token");
    const wrong = await assertRejects(
      () => connect(t.url, { token: "wrong-0123456789abcdef012345678" }),
      ConnectionClosed,
      "does not accept this token",
    );
    assertEquals(wrong.code, 4401);
    // A token the subprotocol cannot carry is refused before connecting, unquoted.
    const bad = await assertRejects(
      () => connect(t.url, { token: "has spaces in it, 0123456789" }),
      TypeError,
      "token must be",
    );
    assert(!bad.message.includes("has spaces"), bad.message);
  } finally {
    await t.stop();
  }
});

Deno.test("connect with a token catches up over HTTP with Authorization", async () => {
  const t = await setup(100);
  try {
    for (let i = 1; i <= 1000; i += 250) {
      await t.trades.sendMany(Array.from({ length: 250 }, (_, k) => row(i + k)));
      await t.trades.log!.roll();
    }
    await t.trades.log!.chunks.settled();
    const sub = await connect<{ seq: number }>(t.url, {
      offset: 1,
      token: READER,
      catchUp: true,
    });
    let n = 0;
    for await (const [offset] of sub) {
      assertEquals(offset, ++n);
      if (offset === 1000) break;
    }
    assertEquals(n, 1000);
    // The chunks were read with the token: no request was denied.
    assert(!t.seen.some((l) => l.includes("denied")), t.seen.join("\n"));
    assert(t.seen.every((l) => !l.includes(READER)));
  } finally {
    await t.stop();
  }
});
