// connect(url, {snapshot: true}): a keyed stream's latest row per key, then
// every row after them, live; a reconnect resumes with offset= after the
// last row received; the options are checked at the call.
import { assertEquals, assertRejects } from "../harness/assert.ts";
import { connect } from "../../client/mod.ts";
import { fixture, line, type TradeRow } from "../harness/client_server.ts";

Deno.test("connect snapshot: the latest row per key, then live, then resumed by offset after a reconnect", async () => {
  const f = await fixture({ key: ["symbol"] });
  try {
    await f.send(1, 10);
    const sub = await connect<TradeRow>(f.url, {
      snapshot: true,
      reconnect: true,
      backoff: { minMs: 10, maxMs: 50 },
    });
    assertEquals(sub.greeting.snapshot, { end: 11, keys: 2 });
    const got: string[] = [];
    for await (const [offset, l] of sub.lines()) {
      got.push(l);
      if (offset === 10) await f.send(11, 14);
      if (offset === 14) {
        await f.restart(); // the socket closes with 1001: the client reconnects
        await f.send(15, 16);
      }
      if (offset === 16) break;
    }
    assertEquals(sub.reconnects, 1);
    assertEquals(sub.greeting.snapshot, undefined); // resumed with offset=, no snapshot
    assertEquals(sub.greeting.replay?.[0], 15);
    await sub.close();
    assertEquals(got, [9, 10, 11, 12, 13, 14, 15, 16].map((i) => line(i)));
  } finally {
    await f.stop();
  }
});

Deno.test("connect snapshot: a filtered snapshot; an empty one goes live from its end", async () => {
  const f = await fixture({ key: ["symbol"] });
  try {
    await f.send(1, 10);
    const eth = await connect<TradeRow>(f.url, { snapshot: true, where: { symbol: "ETH-USD" } });
    assertEquals(eth.greeting.snapshot, { end: 11, keys: 1 });
    const none = await connect<TradeRow>(f.url, { snapshot: true, where: { side: 7 } });
    assertEquals(none.greeting.snapshot, { end: 11, keys: 0 });
    await f.send(11, 12);
    const first = async (s: typeof eth): Promise<number | null> => {
      for await (const [o] of s) return o;
      return null;
    };
    assertEquals(await first(eth), 10);
    await eth.close();
    await f.stream.sendMany([{ event_ts: 13, symbol: "X", price: 1, side: 7 }]);
    assertEquals(await first(none), 13);
    await none.close();
  } finally {
    await f.stop();
  }
});

Deno.test("connect snapshot: compressed frames (compress=zstd) carry the same rows", async () => {
  const f = await fixture({ key: ["symbol"] });
  try {
    await f.send(1, 10);
    const sub = await connect<TradeRow>(f.url, { snapshot: true, compress: "zstd" });
    assertEquals(sub.greeting.compress, "zstd");
    assertEquals(sub.greeting.snapshot, { end: 11, keys: 2 });
    const got: string[] = [];
    for await (const [offset, l] of sub.lines()) {
      got.push(l);
      if (offset === 10) await f.send(11, 12);
      if (offset === 12) break;
    }
    await sub.close();
    assertEquals(got, [9, 10, 11, 12].map((i) => line(i)));
  } finally {
    await f.stop();
  }
});

Deno.test("connect snapshot: not with offset or since, and a boolean", async () => {
  await assertRejects(
    () => connect("ws://127.0.0.1:1/t", { snapshot: true, offset: 1 }),
    TypeError,
    "give no offset or since",
  );
  await assertRejects(
    () => connect("ws://127.0.0.1:1/t", { snapshot: true, since: 0 }),
    TypeError,
    "give no offset or since",
  );
  await assertRejects(
    () => connect("ws://127.0.0.1:1/t", { snapshot: 1 as never }),
    TypeError,
    "snapshot must be a boolean",
  );
});
