// The client's side of compress=zstd-stream (docs/SPEC.md §2.6.1): asked
// for by default, decoded in order with the same rows as text frames and
// fewer bytes; plain zstd frames from a server without libzstd decoded too; a
// message that does not decode, or a text message, is a ProtocolError after
// the rows before it; an explicit compress: "zstd-stream" keeps a refusal.
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { connect, ProtocolError } from "../../client/mod.ts";
import { serve, Stream } from "../../mod.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { zstdFrame } from "../../server/frames/compressed_frames.ts";
import { ZstdStream } from "../../server/frames/zstd_stream.ts";
import { fakeServer, ZSTD_GREETING } from "./_fake_zstd_server.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, sym: { type: "string" }, px: { type: "number" } },
  required: ["i", "sym", "px"],
};
const row = (i: number) => ({ i, sym: ["BTC-USD", "ETH-USD"][i % 2], px: 100 + (i % 17) / 4 });
const STREAM_GREETING = { ...ZSTD_GREETING, compress: "zstd-stream" };

Deno.test("client reads compress=zstd-stream by default: the same rows as text, replayed and live, in fewer bytes", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const url = `ws://127.0.0.1:${server.addr.port}/t`;
  try {
    await stream.sendMany(Array.from({ length: 300 }, (_, k) => row(k + 1)));
    const subs = [
      await connect<{ i: number }>(url, { offset: 1 }),
      await connect<{ i: number }>(url, { offset: 1 }),
      await connect<{ i: number }>(url, { offset: 1, compress: false }),
    ];
    assertEquals(subs.map((s) => s.greeting.compress), ["zstd-stream", "zstd-stream", undefined]);
    const last = 600;
    const live = (async () => {
      for (let i = 301; i <= last; i++) await stream.send(row(i)); // one row a commit
    })();
    for (const sub of subs) {
      let want = 1;
      for await (const [offset, msg] of sub) {
        assertEquals([offset, msg], [want, row(want)]);
        if (++want > last) break;
      }
    }
    await live;
    const [a, b, text] = subs.map((s) => s.wireBytes);
    assertEquals(a, b, "two subscribers of one group get the same bytes");
    assert(a < text / 2, `zstd-stream ${a} bytes against ${text} as text`);
    await Promise.all(subs.map((s) => s.close()));
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("client decodes plain zstd frames sent for compress=zstd-stream (a server without libzstd)", async () => {
  const fake = fakeServer((ws, url) => {
    assertEquals(url.searchParams.get("compress"), "zstd-stream");
    ws.send(JSON.stringify(ZSTD_GREETING));
    ws.send(zstdFrame('[null,{"i":1}]\n[null,{"i":2}]'));
  });
  try {
    const sub = await connect(fake.url);
    const got: unknown[] = [];
    for await (const [, msg] of sub) {
      got.push(msg);
      if (got.length === 2) break;
    }
    assertEquals(got, [{ i: 1 }, { i: 2 }]);
    await sub.close();
  } finally {
    await fake.stop();
  }
});

Deno.test("client reports a zstd-stream message that does not decode, or a text message, as a ProtocolError after the good ones", async () => {
  const z = ZstdStream.create()!;
  const messages = ['[null,{"i":1}]', '[null,{"i":2}]', '[null,{"i":3}]'].map((t) =>
    z.compressCommit(t)
  );
  z.close();
  const truncated = messages[2].slice(0, messages[2].length - 1);
  const orphan = ZstdStream.create()!;
  orphan.compressCommit('[null,{"i":0}]');
  const continuation = orphan.compressCommit('[null,{"i":9}]');
  orphan.close();
  for (
    const [name, bad, pattern] of [
      ["truncated", truncated, /compressed message 3 \(\d+ bytes\) does not decode: /],
      ["text", '[null,{"i":3}]', /compressed message 3 is a text frame/],
    ] as const
  ) {
    const fake = fakeServer((ws) => {
      ws.send(JSON.stringify(STREAM_GREETING));
      ws.send(messages[0]);
      ws.send(messages[1]);
      ws.send(bad);
    });
    try {
      const sub = await connect(fake.url);
      const got: unknown[] = [];
      const err = await assertRejects(async () => {
        for await (const [, msg] of sub) got.push(msg);
      }, ProtocolError);
      assertEquals(got, [{ i: 1 }, { i: 2 }], name);
      assert(pattern.test(err.message), `${name}: ${err.message}`);
    } finally {
      await fake.stop();
    }
  }
  // A continuation with no frame open (the server never sends one).
  const fake = fakeServer((ws) => {
    ws.send(JSON.stringify(STREAM_GREETING));
    ws.send(continuation);
  });
  try {
    const sub = await connect(fake.url);
    const err = await assertRejects(async () => {
      for await (const _ of sub) { /* nothing decodes */ }
    }, ProtocolError);
    assert(/continues a zstd frame, but none is open/.test(err.message), err.message);
  } finally {
    await fake.stop();
  }
});

Deno.test("client: an explicit compress: zstd-stream keeps a server's refusal", async () => {
  const urls: string[] = [];
  const fake = fakeServer((ws, url) => {
    urls.push(url.search);
    const detail = `compress must be zstd, got ${url.searchParams.get("compress")}`;
    ws.close(4400, JSON.stringify({ error: "protocol", detail }));
  });
  try {
    await assertRejects(
      () => connect(fake.url, { compress: "zstd-stream" }),
      ProtocolError,
      "got zstd-stream",
    );
    assertEquals(urls, ["?frames=batch&compress=zstd-stream"]);
  } finally {
    await fake.stop();
  }
});
