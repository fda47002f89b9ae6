import { assert, assertEquals } from "../../harness/assert.ts";
import zlib from "node:zlib";
import { createHash } from "node:crypto";
import { serve, Stream } from "../../../mod.ts";
import { RawWs } from "../../harness/raw_ws.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, s: { type: "string" } },
  required: ["i", "s"],
};
const row = (i: number) => ({ i, s: `row ${i} ${"x".repeat(i % 50)}` });

async function setup(logOptions = {}) {
  const root = await tempDir();
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root,
    maxReplay: null,
    logOptions: { segmentBytes: 8 * 1024, timers: false, ...logOptions },
  });
  const server = serve([stream], { port: 0, onListen: () => {} });
  return {
    root,
    stream,
    server,
    http: server.url,
    ws: `ws://127.0.0.1:${server.addr.port}`,
    async stop() {
      await server.shutdown();
      await rmrf(root);
    },
  };
}

Deno.test("chunks over HTTP then a subscribe at through+1 equal one subscribe from offset 1", async () => {
  const t = await setup({ chunks: { fanIn: 4 } });
  try {
    for (let i = 1; i <= 3000; i += 100) {
      await t.stream.sendMany(Array.from({ length: 100 }, (_, k) => row(i + k)));
    }
    await t.stream.log!.chunks.settled();
    const manifest = await (await fetch(`${t.http}/t/manifest`)).json();
    assertEquals(manifest.stream_id, t.stream.streamId);
    assert(manifest.chunks.length > 0 && manifest.through > 1000, JSON.stringify(manifest));
    let fromChunks = "";
    for (const c of manifest.chunks) {
      const res = await fetch(`${t.http}/t/chunks/${c.sha256}`);
      assertEquals(res.status, 200);
      assertEquals(res.headers.get("etag"), `"${c.sha256}"`);
      assertEquals(res.headers.get("cache-control"), "public, max-age=31536000, immutable");
      const bytes = new Uint8Array(await res.arrayBuffer());
      assertEquals(createHash("sha256").update(bytes).digest("hex"), c.sha256);
      fromChunks += new TextDecoder().decode(zlib.zstdDecompressSync(bytes));
    }
    const rest = await TestSub.open(
      `${t.ws}/t?offset=${manifest.through + 1}&stream_id=${manifest.stream_id}`,
    );
    await rest.waitLines(3000 - manifest.through);
    const whole = await TestSub.open(`${t.ws}/t?offset=1`);
    await whole.waitLines(3000);
    const viaChunks = fromChunks + rest.lines.map((l) => l + "\n").join("");
    const direct = whole.lines.map((l) => l + "\n").join("");
    assertEquals(viaChunks.length, direct.length);
    assert(viaChunks === direct, "byte-for-byte equal");
    await rest.close();
    await whole.close();
  } finally {
    await t.stop();
  }
});

Deno.test("chunk downloads honour If-None-Match, Range and 404", async () => {
  const t = await setup({ chunks: { fanIn: 100 } });
  try {
    await t.stream.sendMany(Array.from({ length: 500 }, (_, k) => row(k)));
    await t.stream.log!.roll();
    await t.stream.log!.chunks.settled();
    const c = t.stream.log!.chunks.manifest!.chunks[0];
    const url = `${t.http}/t/chunks/${c.sha256}`;
    const whole = new Uint8Array(await (await fetch(url)).arrayBuffer());
    assertEquals(whole.length, c.bytes);
    const cached = await fetch(url, { headers: { "if-none-match": `"${c.sha256}"` } });
    assertEquals(cached.status, 304);
    await cached.body?.cancel();
    const part = await fetch(url, { headers: { range: "bytes=10-19" } });
    assertEquals(part.status, 206);
    assertEquals(part.headers.get("content-range"), `bytes 10-19/${c.bytes}`);
    assertEquals(new Uint8Array(await part.arrayBuffer()), whole.subarray(10, 20));
    const tail = await fetch(url, { headers: { range: "bytes=-5" } });
    assertEquals(new Uint8Array(await tail.arrayBuffer()), whole.subarray(c.bytes - 5));
    const bad = await fetch(url, { headers: { range: `bytes=${c.bytes + 10}-` } });
    assertEquals(bad.status, 416);
    await bad.body?.cancel();
    const missing = await fetch(`${t.http}/t/chunks/${"0".repeat(64)}`);
    assertEquals(missing.status, 404);
    await missing.body?.cancel();
    const malformed = await fetch(`${t.http}/t/chunks/xyz`);
    assertEquals(malformed.status, 404);
    await malformed.body?.cancel();
  } finally {
    await t.stop();
  }
});

Deno.test("retention moves earliest up: below it is evicted, nothing left is empty", async () => {
  const t = await setup({ chunks: { fanIn: 100, retainBytes: 2000 } });
  try {
    for (let i = 1; i <= 1000; i += 100) {
      await t.stream.sendMany(Array.from({ length: 100 }, (_, k) => row(i + k)));
      await t.stream.log!.roll();
    }
    await t.stream.log!.chunks.settled(true);
    const head = await (await fetch(`${t.http}/t/head`)).json();
    assert(head.earliest > 1, `earliest ${head.earliest}`);
    const refused = await TestSub.open(`${t.ws}/t?offset=1`);
    const closed = await refused.done;
    assertEquals(closed.code, 4416);
    const reason = JSON.parse(closed.reason);
    assertEquals([reason.why, reason.offset, reason.earliest], ["evicted", 1, head.earliest]);
    const ok = await TestSub.open(`${t.ws}/t?offset=earliest`);
    await ok.waitLines(1001 - head.earliest);
    assertEquals(ok.offsets()[0], head.earliest);
    await ok.close();
  } finally {
    await t.stop();
  }
  const e = await setup({ chunks: { fanIn: 100, retainBytes: 0 } });
  try {
    await e.stream.sendMany(Array.from({ length: 10 }, (_, k) => row(k)));
    await e.stream.log!.roll();
    await e.stream.log!.chunks.settled(true);
    assertEquals(e.stream.log!.earliest, null);
    const refused = await TestSub.open(`${e.ws}/t?offset=3`);
    const reason = JSON.parse((await refused.done).reason);
    assertEquals(reason.why, "empty");
  } finally {
    await e.stop();
  }
});

Deno.test("a subscriber overtaken by retention while catching up is closed with 4429", async () => {
  const t = await setup({ chunks: { fanIn: 1000 }, segmentBytes: 256 * 1024 });
  try {
    // 20 MB: far more than the socket buffers hold.
    const big = (i: number) => ({ i, s: "y".repeat(1000) });
    for (let i = 1; i <= 20_000; i += 500) {
      await t.stream.sendMany(Array.from({ length: 500 }, (_, k) => big(i + k)));
    }
    await t.stream.log!.chunks.settled();
    // A subscriber from offset 1 that reads its greeting and then stalls.
    const raw = await RawWs.connect(t.server.addr.port, "/t?offset=1&frames=batch");
    await raw.readText();
    await new Promise((r) => setTimeout(r, 200));
    // Retention drops everything sealed.
    t.stream.log!.chunks.setRetention({ retainBytes: 0 });
    await t.stream.log!.chunks.settled(true);
    let last = 0;
    let close: Uint8Array | null = null;
    while (true) {
      const f = await raw.readMessage();
      if (!f) break;
      if (f.opcode === 8) {
        close = f.data;
        break;
      }
      for (const line of new TextDecoder().decode(f.data).split("\n")) {
        const o = JSON.parse(line)[0];
        assertEquals(o, last + 1);
        last = o;
      }
    }
    raw.close();
    assert(close, "closed");
    assertEquals((close[0] << 8) | close[1], 4429);
    const reason = JSON.parse(new TextDecoder().decode(close.subarray(2)));
    assertEquals(reason.error, "too_slow");
    assertEquals(reason.resume, last + 1);
  } finally {
    await t.stop();
  }
});
