// connect(url, {where}): the filter on the socket, on reconnect, and on catch-up from chunks.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { connect, ProtocolError } from "../../client/mod.ts";
import { fixture, line, row, type TradeRow } from "../harness/client_server.ts";

async function sealed(f: Awaited<ReturnType<typeof fixture>>, to: number): Promise<void> {
  for (let i = 1; i <= to; i += 500) {
    await f.send(i, Math.min(to, i + 499));
    await f.stream.log!.roll();
  }
  await f.stream.log!.chunks.settled();
}

const ETH = (i: number) => row(i).symbol === "ETH-USD";

Deno.test("connect where: a wrong type is a TypeError naming where, at the call", async () => {
  for (const bad of [5, true, null, ["symbol"], () => {}]) {
    await assertRejects(
      () => connect("ws://127.0.0.1:1/trades", { where: bad as never }),
      TypeError,
      "where",
    );
  }
  await assertRejects(
    () => connect("ws://127.0.0.1:1/trades?where=%7B%7D"),
    TypeError,
    "where option",
  );
});

Deno.test("connect where: only matching rows, with their real offsets; the greeting echoes it", async () => {
  const f = await fixture({ maxReplay: null });
  try {
    await f.send(1, 100);
    const sub = await connect<TradeRow>(f.url, { offset: 1, where: { symbol: "ETH-USD" } });
    assertEquals(sub.greeting.where, { symbol: "ETH-USD" });
    const want = Array.from({ length: 120 }, (_, i) => i + 1).filter(ETH);
    const got: string[] = [];
    let sentLive = false;
    for await (const [offset, l] of sub.lines()) {
      got.push(l);
      if (offset === 100 && !sentLive) {
        sentLive = true;
        await f.send(101, 120);
      }
      if (offset === 120) break;
    }
    await sub.close();
    assertEquals(got, want.map((i) => line(i)));
    // JSON text works too; a filter the columns refuse is a ProtocolError naming where.
    const text = await connect(f.url, { where: '{"side":1}' });
    assertEquals(text.greeting.where, { side: 1 });
    await text.close();
    const err = await assertRejects(
      () => connect(f.url, { where: { sym: "x" } }),
      ProtocolError,
    );
    assert(err.message.includes("where: unknown column sym"), err.message);
  } finally {
    await f.stop();
  }
});

Deno.test("connect where: reconnects keep the filter", async () => {
  const f = await fixture({ maxReplay: null });
  try {
    await f.send(1, 20);
    const sub = await connect<TradeRow>(f.url, {
      offset: 1,
      where: { side: 0 },
      reconnect: true,
      backoff: { minMs: 10, maxMs: 50 },
    });
    const got: number[] = [];
    for await (const [offset] of sub) {
      got.push(offset!);
      if (offset === 10) {
        await f.restart();
        await f.send(21, 40);
      }
      if (offset === 40) break;
    }
    await sub.close();
    assertEquals(got, Array.from({ length: 20 }, (_, i) => 2 * (i + 1)));
  } finally {
    await f.stop();
  }
});

Deno.test("connect where with catchUp: chunk rows are filtered alike, then the socket", async () => {
  const f = await fixture({ maxReplay: 100 });
  try {
    await sealed(f, 3000);
    await f.send(3001, 3050); // an unsealed tail
    const where = { symbol: "ETH-USD", price: { gte: 150 } };
    const sub = await connect<TradeRow>(f.url, { offset: 1, catchUp: true, where });
    assertEquals(sub.greeting.where, where);
    assertEquals(sub.greeting.replay, [1, 3051]);
    const got: string[] = [];
    for await (const [offset, l] of sub.lines()) {
      got.push(l);
      if (offset === 3050) break;
    }
    await sub.close();
    const want = Array.from({ length: 3050 }, (_, i) => i + 1)
      .filter((i) => ETH(i) && row(i).price >= 150);
    assertEquals(got, want.map((i) => line(i)));
  } finally {
    await f.stop();
  }
});

Deno.test("connectArrow where: batches hold only the matching rows", async () => {
  const { connectArrow, batchRows } = await import("../../arrow/subscription.ts");
  const f = await fixture({ maxReplay: null });
  try {
    await f.send(1, 50);
    await assertRejects(() => connectArrow(f.url, { where: 3 as never }), TypeError, "where");
    const sub = await connectArrow(f.url, { offset: 1, where: { side: 1 } });
    assertEquals(sub.greeting.where, { side: 1 });
    const got: number[] = [];
    for await (const batch of sub) {
      for (const [offset, msg] of batchRows(batch)) {
        assertEquals(msg, { ...row(offset!) });
        got.push(offset!);
      }
      if (got.at(-1) === 49) break;
    }
    sub.close();
    assertEquals(got, Array.from({ length: 25 }, (_, i) => 2 * i + 1));
  } finally {
    await f.stop();
  }
});
