import { assertEquals, assertThrows } from "./harness/assert.ts";
import handler from "../examples/binance_trades.ts";
import { compileSchema } from "../schema/compile.ts";
import depthHandler from "../examples/binance_depth.ts";
import { join } from "node:path";
import { freePort, rmrf, tempDir, until } from "./harness/util.ts";
import { startServe } from "./harness/serve.ts";
import { TestSub } from "./harness/subscriber.ts";

Deno.test("examples: the Binance handler makes rows the example schema accepts", async () => {
  const schema = compileSchema(
    JSON.parse(await Deno.readTextFile(new URL("../examples/trades.json", import.meta.url))),
  );
  const row = handler(
    '{"e":"trade","E":1672515782136,"s":"BTCUSDT","t":12345,"p":"85565.01","q":"0.015","T":1672515782136,"m":true,"M":true}',
  );
  assertEquals(row, {
    event_ts: 1672515782136000,
    symbol: "BTCUSDT",
    price: 85565.01,
    amount: 0.015,
    side: 0,
    trade_id: 12345,
  });
  assertEquals(schema.validate(row), null);
  assertEquals(handler('{"result":null,"id":1}'), null);
  assertThrows(() => handler("not json"), SyntaxError);
});

// --- the order book example (issue 19) ------------------------------------

const DEPTH_SAMPLE = new URL("./fixtures/binance_depth.ndjson", import.meta.url);

Deno.test("examples: the Binance depth handler makes order-book rows the example schema accepts", async () => {
  const schema = compileSchema(
    JSON.parse(await Deno.readTextFile(new URL("../examples/orderbook.json", import.meta.url))),
  );
  const frames = (await Deno.readTextFile(DEPTH_SAMPLE)).trimEnd().split("\n");
  assertEquals(depthHandler(frames[0]), null, "a subscription ack is skipped");
  const snapshot = depthHandler(frames[1])!;
  assertEquals(snapshot.kind, "snapshot");
  assertEquals(snapshot.symbol, "BTCUSDT");
  assertEquals(snapshot.event_ts, null);
  assertEquals([snapshot.bids.length, snapshot.asks.length], [10, 10]);
  assertEquals(snapshot.bids[0], { price: 85565.01, qty: 2.62 });
  const update = depthHandler(frames[3])!;
  assertEquals(update.kind, "update");
  assertEquals(update.event_ts, 1764582000123000);
  assertEquals(update.first_update_id, 1027032);
  for (const f of frames.slice(1, 6)) assertEquals(schema.validate(depthHandler(f)), null);
  assertThrows(() => depthHandler(frames[6]), TypeError, "b[0] is not a [price, qty] pair");
  assertThrows(() => depthHandler("not json"), SyntaxError);
});

Deno.test("examples: serve --upstream with the depth handler stores the recorded feed as nested rows", async () => {
  const frames = (await Deno.readTextFile(DEPTH_SAMPLE)).trimEnd().split("\n");
  const ac = new AbortController();
  const feed = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen: () => {} },
    (req) => {
      const { socket, response } = Deno.upgradeWebSocket(req);
      socket.onopen = () => frames.forEach((f) => socket.send(f));
      socket.onerror = () => {};
      return response;
    },
  );
  const root = await tempDir();
  try {
    const s = await startServe([
      "--root",
      root,
      "--stream",
      `book=${new URL("../examples/orderbook.json", import.meta.url).pathname}`,
      "--upstream",
      `book=ws://127.0.0.1:${feed.addr.port}/ws/btcusdt@depth`,
      "--handler",
      new URL("../examples/binance_depth.ts", import.meta.url).pathname,
      "--port",
      String(freePort()),
    ]);
    try {
      const sub = await TestSub.open(`${s.ws}/book?offset=1&frames=batch`);
      await sub.waitLines(5);
      const expected = frames.slice(1, 6).map((f) => depthHandler(f));
      assertEquals(sub.lines, expected.map((r, i) => `[${i + 1},${JSON.stringify(r)}]`));
      await sub.close();
      await until(
        async () => {
          try {
            return (await Deno.readTextFile(join(root, "book", "rejects.ndjson"))).includes("pair");
          } catch {
            return false;
          }
        },
        10_000,
        "the broken frame in rejects.ndjson",
      );
      assertEquals((await s.signal("SIGTERM")).code, 0);
    } finally {
      await s.stop();
    }
  } finally {
    ac.abort();
    await feed.finished;
    await rmrf(root);
  }
});
