import { assertEquals } from "../../harness/assert.ts";
import { post, startFixture } from "../../harness/publish_in_process.ts";

const row = (i: number) => JSON.stringify({ sym: "A", px: i });

Deno.test("publish POST stores an NDJSON body in one commit and answers its offsets", async () => {
  const f = await startFixture();
  try {
    const r = await post(`${f.http}/t`, `${row(1)}\n${row(2)}\n\n${row(3)}\n`);
    assertEquals(r, { status: 200, body: { first: 1, last: 3, count: 3 } });
    const a = await post(`${f.http}/t`, `[${row(4)},${row(5)}]`, {
      "content-type": "application/json",
    });
    assertEquals(a, { status: 200, body: { first: 4, last: 5, count: 2 } });
    assertEquals(f.stream.endOffset, 6);
  } finally {
    await f.close();
  }
});

Deno.test("publish POST refuses a body with a bad row and stores none of it", async () => {
  const f = await startFixture();
  try {
    const bad = await post(`${f.http}/t`, `${row(1)}\n{"sym":"A","px":"x"}\n`);
    assertEquals(bad.status, 400);
    assertEquals([bad.body.error, bad.body.line], ["invalid_row", 2]);
    const notJson = await post(`${f.http}/t`, `${row(1)}\n\n{nope\n`);
    assertEquals([notJson.status, notJson.body.line], [400, 3]);
    const arr = await post(`${f.http}/t`, `[${row(1)},{"sym":1,"px":1}]`, {
      "content-type": "application/json",
    });
    assertEquals([arr.status, arr.body.error, arr.body.line], [400, "invalid_row", 2]);
    const notArr = await post(`${f.http}/t`, row(1), { "content-type": "application/json" });
    assertEquals([notArr.status, notArr.body.error], [400, "invalid_body"]);
    const empty = await post(`${f.http}/t`, "\n\n");
    assertEquals([empty.status, empty.body.error], [400, "invalid_body"]);
    const bytes = new Uint8Array([...new TextEncoder().encode(row(1) + "\n\n"), 0xff, 0x7b, 0x7d]);
    const bin = await fetch(`${f.http}/t`, { method: "POST", body: bytes });
    assertEquals([bin.status, (await bin.json()).line], [400, 3]);
    const media = await post(`${f.http}/t`, row(1), { "content-type": "text/csv" });
    assertEquals(media.status, 415);
    assertEquals(f.stream.endOffset, 1);
  } finally {
    await f.close();
  }
});

Deno.test("publish POST answers 404, 405 and 413", async () => {
  const f = await startFixture({ maxPublishBytes: 1000 });
  try {
    assertEquals((await post(`${f.http}/nope`, row(1))).status, 404);
    const ro = await post(`${f.http}/ro`, row(1));
    assertEquals([ro.status, ro.body.error], [405, "not_publishable"]);
    const big = await post(`${f.http}/t`, (row(1) + "\n").repeat(100));
    assertEquals([big.status, big.body.error, big.body.max_bytes], [413, "too_large", 1000]);
    // A body sent in chunks without a length is stopped at the limit too.
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 200; i++) c.enqueue(new TextEncoder().encode(row(i) + "\n"));
        c.close();
      },
    });
    const res = await fetch(`${f.http}/t`, { method: "POST", body: chunks });
    assertEquals(res.status, 413);
    await res.body?.cancel();
    assertEquals(f.stream.endOffset, 1);
  } finally {
    await f.close();
  }
});

Deno.test("publish POST with a producer answers a resend as a duplicate and an older seq as stale", async () => {
  const f = await startFixture();
  try {
    const h = (seq: string) => ({ "streamcast-producer": "p-1", "streamcast-seq": seq });
    assertEquals((await post(`${f.http}/t`, row(1), h("1"))).body, { first: 1, last: 1, count: 1 });
    assertEquals((await post(`${f.http}/t`, `${row(2)}\n${row(3)}`, h("2"))).body, {
      first: 2,
      last: 3,
      count: 2,
    });
    assertEquals(
      await post(`${f.http}/t`, `${row(2)}\n${row(3)}`, h("2")),
      { status: 200, body: { first: 2, last: 3, count: 2, duplicate: true } },
    );
    assertEquals(await post(`${f.http}/t`, row(9), h("1")), {
      status: 409,
      body: { error: "stale_seq", last_seq: 2 },
    });
    // A refused body commits nothing: its seq may be sent again.
    assertEquals((await post(`${f.http}/t`, `{"px":1}`, h("3"))).status, 400);
    assertEquals((await post(`${f.http}/t`, row(4), h("3"))).body, { first: 4, last: 4, count: 1 });
    assertEquals((await post(`${f.http}/t`, row(4), { "streamcast-producer": "p-1" })).status, 400);
    assertEquals((await post(`${f.http}/t`, row(4), h("0"))).status, 400);
    assertEquals(
      (await post(`${f.http}/t`, row(4), { "streamcast-producer": "a b", "streamcast-seq": "1" }))
        .status,
      400,
    );
    assertEquals(f.stream.endOffset, 5);
  } finally {
    await f.close();
  }
});

Deno.test("publish POST and the publish socket need a publish grant", async () => {
  const tokens = {
    tokens: [
      { name: "reader", token: "r".repeat(20), streams: ["*"] },
      { name: "writer", token: "w".repeat(20), publish: ["t"] },
    ],
  };
  const f = await startFixture({ tokens });
  try {
    const auth = (t: string) => ({ authorization: `Bearer ${t}` });
    assertEquals((await post(`${f.http}/t`, row(1))).status, 401);
    assertEquals((await post(`${f.http}/t`, row(1), auth("x".repeat(20)))).status, 401);
    assertEquals((await post(`${f.http}/t`, row(1), auth("r".repeat(20)))).status, 403);
    assertEquals((await post(`${f.http}/ro`, row(1), auth("w".repeat(20)))).status, 403);
    assertEquals((await post(`${f.http}/t`, row(1), auth("w".repeat(20)))).status, 200);
    // A publish-only token does not read.
    const head = await fetch(`${f.http}/t/head`, { headers: auth("w".repeat(20)) });
    await head.body?.cancel();
    assertEquals(head.status, 403);
    const up = await fetch(`${f.http}/t/publish`, {
      headers: {
        ...auth("r".repeat(20)),
        upgrade: "websocket",
        connection: "upgrade",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-version": "13",
      },
    });
    await up.body?.cancel();
    assertEquals(up.status, 403);
  } finally {
    await f.close();
  }
});

Deno.test("publish is refused on an ephemeral or unknown stream at start", async () => {
  const { serve, Stream } = await import("../../../mod.ts");
  const { settingsFrom } = await import("../../../cli/serve/config.ts");
  const { UsageError } = await import("../../../cli/_args.ts");
  const { SCHEMA } = await import("../../harness/publish_in_process.ts");
  const e = Stream.ephemeral("e", { schema: SCHEMA });
  let err: unknown = null;
  try {
    serve([e], { port: 0, onListen: () => {}, publish: ["e"] });
  } catch (x) {
    err = x;
  }
  assertEquals(err instanceof TypeError && /ephemeral/.test(err.message), true, String(err));
  err = null;
  try {
    serve([e], { port: 0, onListen: () => {}, publish: ["zz"] });
  } catch (x) {
    err = x;
  }
  assertEquals(err instanceof TypeError && /not served/.test(err.message), true, String(err));
  for (const flags of [{ publish: ["e"], ephemeral: ["e"] }, { publish: ["zz"] }]) {
    err = null;
    await settingsFrom({ stream: ["e=e.json"], ...flags }).catch((x) => (err = x));
    assertEquals(err instanceof UsageError, true, String(err));
  }
});
