// The client's side of compress=zstd-dict (docs/SPEC.md §2.6): asked for
// with compress: "zstd-dict" (and by default after zstd-stream), the
// dictionary named in the greeting fetched and used, the same rows as text
// frames; a dictionary that cannot be fetched or a frame that does not decode
// with it is a ProtocolError; a server that knows compress=zstd but neither
// zstd-stream nor zstd-dict is asked again for plain zstd.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { connect, ProtocolError } from "../../client/mod.ts";
import { serve, Stream } from "../../mod.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { zstdFrame } from "../../server/frames/compressed_frames.ts";
import { fakeServer, ZSTD_GREETING } from "./_fake_zstd_server.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, sym: { type: "string" } },
  required: ["i", "sym"],
};
const row = (i: number) => ({ i, sym: ["BTC-USD", "ETH-USD"][i % 2] });

Deno.test("client asks for compress=zstd-dict when told, fetches the dictionary and reads the same rows", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const url = `ws://127.0.0.1:${server.addr.port}/t`;
  try {
    await stream.sendMany(Array.from({ length: 500 }, (_, k) => row(k + 1)));
    const d = await connect<{ i: number }>(url, { offset: 1, compress: "zstd-dict" });
    assertEquals(d.greeting.compress, "zstd");
    assert(/^[0-9a-f]{32}$/.test(String(d.greeting.dictionary)), `${d.greeting.dictionary}`);
    const z = await connect<{ i: number }>(url, { offset: 1, compress: "zstd" });
    assertEquals(z.greeting.dictionary, undefined, "compress: zstd asks for no dictionary");
    for (let i = 501; i <= 510; i++) void stream.send(row(i));
    for (const sub of [d, z]) {
      let want = 1;
      for await (const [offset, msg] of sub) {
        assertEquals([offset, msg], [want, row(want)]);
        if (++want > 510) break;
      }
      await sub.close();
    }
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("client reports a dictionary it cannot fetch, or whose bytes are not its id, as a ProtocolError", async () => {
  const id = "0123456789abcdef0123456789abcdef";
  for (
    const [name, res, message] of [
      ["404", () => new Response("no", { status: 404 }), /answered 404/],
      ["wrong bytes", () => new Response("not the dictionary"), /SHA-256 is/],
    ] as const
  ) {
    const fake = fakeServer((ws) => {
      ws.send(JSON.stringify({ ...ZSTD_GREETING, dictionary: id }));
      ws.send(zstdFrame('[null,{"i":1}]'));
    }, res);
    try {
      const sub = await connect(fake.url, { compress: "zstd-dict" });
      const err = await assertRejects(async () => {
        for await (const _ of sub) { /* nothing arrives */ }
      }, ProtocolError);
      assert(message.test(err.message), `${name}: ${err.message}`);
      assert(err.message.includes(`dictionary ${id}`), err.message);
    } finally {
      await fake.stop();
    }
  }
});

Deno.test("client: a frame that does not decode with the dictionary is a ProtocolError; zstd-dict refused by value falls back to zstd", async () => {
  const dict = new TextEncoder().encode('[1,{"i":1,"sym":"BTC-USD"}]\n'.repeat(200));
  const sha = new Uint8Array(await crypto.subtle.digest("SHA-256", dict));
  const id = Array.from(sha, (b) => b.toString(16).padStart(2, "0")).join("").slice(0, 32);
  const good = zstdFrame('[null,{"i":1}]');
  const bad = zstdFrame('[null,{"i":2}]'.repeat(30));
  bad[bad.length - 6] ^= 0x40;
  const fake = fakeServer((ws) => {
    ws.send(JSON.stringify({ ...ZSTD_GREETING, dictionary: id }));
    ws.send(good); // a frame without references to the dictionary decodes with it too
    ws.send(bad);
  }, () => new Response(dict.slice()));
  try {
    const sub = await connect(fake.url, { compress: "zstd-dict" });
    const got: unknown[] = [];
    const err = await assertRejects(async () => {
      for await (const [, msg] of sub) got.push(msg);
    }, ProtocolError);
    assertEquals(got, [{ i: 1 }]);
    assert(/compressed frame 2 .* corrupt or truncated/.test(err.message), err.message);
  } finally {
    await fake.stop();
  }
  const urls: string[] = [];
  const older = fakeServer((ws, url) => {
    urls.push(url.search);
    const asked = url.searchParams.get("compress");
    if (asked !== "zstd") {
      const detail = `compress must be zstd, got ${asked}`;
      ws.close(4400, JSON.stringify({ error: "protocol", detail }));
      return;
    }
    ws.send(JSON.stringify(ZSTD_GREETING));
    ws.send(zstdFrame('[null,{"i":7}]'));
  }, () => new Response(null, { status: 404 }));
  try {
    const sub = await connect(older.url);
    for await (const [, msg] of sub) {
      assertEquals(msg, { i: 7 });
      break;
    }
    await sub.close();
    // By default: zstd-stream, refused by value, then zstd-dict, then zstd.
    assertEquals(urls, [
      "?frames=batch&compress=zstd-stream",
      "?frames=batch&compress=zstd-dict",
      "?frames=batch&compress=zstd",
    ]);
  } finally {
    await older.stop();
  }
});
