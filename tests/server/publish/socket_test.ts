import { assert, assertEquals } from "../../harness/assert.ts";
import { until } from "../../harness/util.ts";
import { publisher, PublishError } from "../../../client/mod.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { startFixture } from "../../harness/publish_in_process.ts";
import { RawPub } from "./_raw_pub.ts";

const r = (px: number) => ({ sym: "A", px });

Deno.test("publish socket greets, acks pipelined frames in order once durable, refuses per frame", async () => {
  const f = await startFixture();
  try {
    const p = await RawPub.open(`${f.ws}/t/publish?producer=w1`);
    assertEquals(p.greeting!.publish, true);
    assertEquals([p.greeting!.producer, p.greeting!.last_seq, p.greeting!.max_in_flight], [
      "w1",
      0,
      64,
    ]);
    assertEquals(p.greeting!.stream_id, f.stream.streamId);
    p.send(1, [r(1), r(2)]);
    p.send(2, [r(3), { sym: "A" }]);
    p.send(3, [r(4)]);
    p.send(3, [r(4)]);
    p.send(2, [r(5)]);
    await p.wait(5);
    assertEquals(p.answers, [
      { seq: 1, first: 1, last: 2 },
      { seq: 2, error: "invalid_row", index: 1, detail: p.answers[1].detail },
      { seq: 3, first: 3, last: 3 },
      { seq: 3, first: 3, last: 3, duplicate: true },
      { seq: 2, error: "stale_seq", last_seq: 3 },
    ]);
    assertEquals(f.stream.endOffset, 4);
    await p.close();
    // The producer's state is what a new connection is greeted with.
    const again = await RawPub.open(`${f.ws}/t/publish?producer=w1`);
    assertEquals(again.greeting!.last_seq, 3);
    await again.close();
  } finally {
    await f.close();
  }
});

Deno.test("publish socket closes with 1008 on a malformed frame and refuses bad upgrades", async () => {
  const f = await startFixture({ maxPublishBytes: 4096 });
  try {
    for (
      const bad of [
        "nope",
        "[1]",
        '{"seq":1}',
        '{"seq":0,"rows":[{}]}',
        '{"seq":1,"rows":[]}',
        '{"seq":1,"rows":[{}],"x":1}',
      ]
    ) {
      const p = await RawPub.open(`${f.ws}/t/publish?producer=w2`);
      p.ws.send(bad);
      await until(() => p.closed !== null, 5000, "close");
      assertEquals(p.closed!.code, 1008, bad);
      assertEquals(JSON.parse(p.closed!.reason).error, "protocol");
    }
    const bin = await RawPub.open(`${f.ws}/t/publish`);
    bin.ws.send(new Uint8Array([1, 2]));
    await until(() => bin.closed !== null, 5000, "close");
    assertEquals(bin.closed!.code, 1008);
    const big = await RawPub.open(`${f.ws}/t/publish`);
    big.send(1, Array.from({ length: 500 }, (_, i) => r(i)));
    await until(() => big.closed !== null, 5000, "close");
    assertEquals(big.closed!.code, 1009);
    const q = await RawPub.open(`${f.ws}/t/publish?producr=x`);
    assertEquals(q.closed?.code, 4400);
    const sp = await RawPub.open(`${f.ws}/t/publish?producer=a%20b`);
    assertEquals(sp.closed?.code, 4400);
    for (const [path, status] of [["/ro/publish", 405], ["/nope/publish", 404]] as const) {
      const res = await fetch(`${f.http}${path}`, {
        headers: {
          upgrade: "websocket",
          connection: "upgrade",
          "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
          "sec-websocket-version": "13",
        },
      });
      await res.body?.cancel();
      assertEquals(res.status, status, path);
    }
    assertEquals(f.stream.endOffset, 1);
    // The server is still serving.
    assertEquals(
      await fetch(`${f.http}/_/health`).then(async (x) => (await x.body?.cancel(), x.status)),
      200,
    );
  } finally {
    await f.close();
  }
});

Deno.test("publish socket holds frames beyond max_in_flight and answers them all", async () => {
  const f = await startFixture({ maxInFlight: 2 });
  try {
    const p = await RawPub.open(`${f.ws}/t/publish?producer=w3`);
    assertEquals(p.greeting!.max_in_flight, 2);
    for (let s = 1; s <= 20; s++) p.send(s, [r(s)]);
    await p.wait(20);
    assertEquals(p.answers.map((a) => a.seq), Array.from({ length: 20 }, (_, i) => i + 1));
    assertEquals(p.answers.map((a) => a.first), Array.from({ length: 20 }, (_, i) => i + 1));
    await p.close();
  } finally {
    await f.close();
  }
});

Deno.test("publisher() resolves sends with offsets; subscribers see the rows; a refused frame rejects", async () => {
  const f = await startFixture();
  try {
    const sub = await TestSub.open(`${f.ws}/t?offset=0`);
    const pub = await publisher(`${f.ws}/t`, { producer: "lib-1" });
    const offsets = await Promise.all([pub.send(r(1)), pub.sendMany([r(2), r(3)]), pub.send(r(4))]);
    assertEquals(offsets, [1, [2, 3], 4]);
    let err: unknown = null;
    await pub.send({ sym: 1 }).catch((e) => (err = e));
    assert(
      err instanceof PublishError && err.error === "invalid_row" && err.index === 0,
      String(err),
    );
    assertEquals(await pub.send(r(5)), 5);
    await pub.close();
    await sub.waitLines(5);
    assertEquals(sub.offsets(), [1, 2, 3, 4, 5]);
    assertEquals(JSON.parse(sub.lines[4])[1], r(5));
    await sub.close();
    // The same producer, later: it continues from last_seq + 1.
    const again = await publisher(`${f.http}/t`, { producer: "lib-1" });
    assertEquals(again.nextSeq, 6);
    await again.close();
  } finally {
    await f.close();
  }
});

Deno.test("publish socket closes with 1008 too_many_in_flight when a publisher ignores the window", async () => {
  const f = await startFixture({ maxInFlight: 1, maxPublishBytes: 2000 });
  try {
    const p = await RawPub.open(`${f.ws}/t/publish?producer=w4`);
    for (let s = 1; s <= 400; s++) p.send(s, [r(s)]);
    await until(() => p.closed !== null, 10_000, "close");
    assertEquals(p.closed!.code, 1008);
    assertEquals(JSON.parse(p.closed!.reason).error, "too_many_in_flight");
    // Every frame taken was answered before the close, and only those are stored.
    assert(p.answers.length >= 1, "answers before the close");
    assertEquals(
      p.answers.map((a) => a.seq),
      Array.from({ length: p.answers.length }, (_, i) => i + 1),
    );
    assertEquals(f.stream.endOffset, p.answers.length + 1);
  } finally {
    await f.close();
  }
});
