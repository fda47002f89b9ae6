// Every limit: one past it gets the documented answer, and the server keeps
// serving everyone else.
import { join } from "node:path";
import { assert, assertEquals, assertRejects, assertThrows } from "../../harness/assert.ts";
import { Logger, serve, Stream } from "../../../mod.ts";
import { Gate } from "../../../server/fanout/replay_gate.ts";
import { RawWs } from "../../harness/raw_ws.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { rawRequest, row, SCHEMA, serveCli } from "../../harness/security.ts";
import { checkServeOptions } from "../../../server/serve_options.ts";
import { HttpHandler } from "../../../server/http/handler.ts";

async function setup(
  streamOptions: Partial<Parameters<typeof Stream.open>[1]> = {},
  serveOptions: Parameters<typeof serve>[1] = {},
) {
  const root = await tempDir();
  const trades = await Stream.open("trades", { schema: SCHEMA, root, ...streamOptions });
  const book = await Stream.open("book", { schema: SCHEMA, root, ...streamOptions });
  const server = serve([trades, book], {
    port: 0,
    onListen: () => {},
    logger: Logger.silent(),
    ...serveOptions,
  });
  return {
    trades,
    book,
    server,
    port: server.addr.port,
    ws: `ws://127.0.0.1:${server.addr.port}`,
    async stop() {
      await server.shutdown();
      await rmrf(root);
    },
  };
}

/** The server still serves: a subscriber gets a new row, and /head answers. */
async function stillServes(t: Awaited<ReturnType<typeof setup>>, stream = "book"): Promise<void> {
  const s = stream === "book" ? t.book : t.trades;
  const sub = await TestSub.open(`${t.ws}/${stream}`);
  assert(sub.greeting !== null, `refused: ${JSON.stringify(sub.closed)}`);
  const offset = await s.send(row(99));
  await sub.waitLines(1);
  assertEquals(JSON.parse(sub.lines[0])[0], offset);
  await sub.close();
  const head = await fetch(`${t.server.url}/${stream}/head`);
  assertEquals(head.status, 200);
  await head.body?.cancel();
}

Deno.test("limits: subscribers per stream + 1 is closed with 1013 and no greeting", async () => {
  const t = await setup({ maxSubscribers: 2 });
  try {
    const a = await TestSub.open(`${t.ws}/trades`);
    const b = await TestSub.open(`${t.ws}/trades`);
    const c = await TestSub.open(`${t.ws}/trades`);
    const closed = await c.done;
    assertEquals(closed.code, 1013);
    assertEquals(JSON.parse(closed.reason), {
      error: "overloaded",
      limit: "max_subscribers",
      max: 2,
    });
    assertEquals(c.frames.length, 0);
    assertEquals(t.trades.subscribers, 2);
    // Per stream: another stream still takes subscribers.
    await stillServes(t, "book");
    // A place freed is a place taken.
    await a.close();
    await until(() => t.trades.subscribers === 1, 5000, "a's place freed");
    const d = await TestSub.open(`${t.ws}/trades`);
    assert(d.greeting !== null);
    await t.trades.send(row(1));
    await b.waitLines(1);
    await d.waitLines(1);
    const metrics = await (await fetch(`${t.server.url}/_/metrics`)).text();
    assert(
      metrics.includes('streamcast_refusals_total{stream="trades",why="max_subscribers"} 1'),
      metrics,
    );
    await b.close();
    await d.close();
  } finally {
    await t.stop();
  }
});

Deno.test("limits: connections + 1 is answered 503 before the upgrade", async () => {
  const t = await setup({}, { maxConnections: 3 });
  try {
    const subs = [];
    for (let i = 0; i < 3; i++) subs.push(await TestSub.open(`${t.ws}/trades`));
    const over = await rawRequest(t.port, "/book", { upgrade: true });
    assertEquals(over.status, 503);
    assertEquals(over.headers["retry-after"], "1");
    assertEquals(JSON.parse(over.body), {
      error: "overloaded",
      limit: "max_connections",
      max: 3,
    });
    // HTTP routes are not WebSocket connections: they still answer.
    const head = await fetch(`${t.server.url}/book/head`);
    assertEquals(head.status, 200);
    await head.body?.cancel();
    await subs[0].close();
    await until(
      async () => {
        const r = await rawRequest(t.port, "/_/health");
        return r.status === 200 && (await TestSub.open(`${t.ws}/book`).then(async (s) => {
          const ok = s.greeting !== null;
          await s.close();
          return ok;
        }));
      },
      5000,
      "a freed connection",
    );
    for (const s of subs.slice(1)) await s.close();
  } finally {
    await t.stop();
  }
});

Deno.test("limits: a URL over max_url_bytes is answered 414, upgrade or not", async () => {
  const t = await setup({}, { maxUrlBytes: 1024 });
  try {
    const long = "x".repeat(2000);
    const http = await rawRequest(t.port, `/trades/head?pad=${long}`);
    assertEquals(http.status, 414);
    assertEquals(JSON.parse(http.body), { error: "uri_too_long", max_bytes: 1024 });
    const ws = await rawRequest(t.port, `/trades?offset=1&${long}=1`, { upgrade: true });
    assertEquals(ws.status, 414);
    // A stream name past 64 characters is no stream: 4404, the name clipped to fit the reason.
    const name = "n".repeat(500);
    const sub = await TestSub.open(`${t.ws}/${name}`);
    const closed = await sub.done;
    assertEquals(closed.code, 4404);
    assert(new TextEncoder().encode(closed.reason).length <= 123);
    assertThrows(() => Stream.ephemeral("s".repeat(65), { schema: SCHEMA }), RangeError, "1-64");
    await stillServes(t);
  } finally {
    await t.stop();
  }
});

Deno.test("limits: client frames: text, binary and big ones close 1008; invalid UTF-8 and over 64 MiB drop", async () => {
  const t = await setup();
  try {
    const closeCode = async (send: (raw: RawWs) => Promise<void>): Promise<number | null> => {
      const raw = await RawWs.connect(t.port, "/trades");
      try {
        assert((await raw.readText()) !== null, "greeting");
        await send(raw);
        while (true) {
          const f = await raw.readFrame().catch(() => null);
          if (!f) return null; // dropped without a close frame
          if (f.opcode === 8) return (f.data[0] << 8) | f.data[1];
        }
      } finally {
        raw.close();
      }
    };
    const enc = new TextEncoder();
    assertEquals(await closeCode((r) => r.send(1, enc.encode("hello"))), 1008);
    assertEquals(await closeCode((r) => r.send(2, new Uint8Array([1, 2, 3]))), 1008);
    assertEquals(await closeCode((r) => r.send(1, enc.encode("x".repeat(1 << 20)))), 1008);
    // The runtime's own checks end the connection without a close frame.
    assertEquals(await closeCode((r) => r.send(1, new Uint8Array([0xff, 0xfe, 0x80]))), null);
    assertEquals(
      await closeCode(async (r) => {
        // Only the header of a 70 MiB frame: the runtime refuses it on its length.
        const head = new Uint8Array(14);
        head[0] = 0x82;
        head[1] = 0x80 | 127;
        new DataView(head.buffer).setUint32(6, 70 << 20);
        await r.conn.write(head);
      }),
      null,
    );
    await until(() => t.trades.subscribers === 0, 5000, "the talkers gone");
    await stillServes(t, "trades");
  } finally {
    await t.stop();
  }
});

Deno.test("limits: replay readers take turns: three catch up through one permit, none refused", async () => {
  const t = await setup({ maxReplay: null }, { maxReplayReaders: 1 });
  try {
    const rows = 20_000;
    for (let i = 0; i < rows; i += 1000) {
      await t.trades.sendMany(Array.from({ length: 1000 }, (_, k) => row(i + k)));
    }
    const subs = await Promise.all(
      [1, 5000, 10_000].map((from) => TestSub.open(`${t.ws}/trades?offset=${from}&frames=batch`)),
    );
    for (const [i, from] of [1, 5000, 10_000].entries()) {
      await subs[i].waitLines(rows + 1 - from);
      const offsets = subs[i].offsets();
      assertEquals(offsets.length, rows + 1 - from);
      assertEquals(offsets[0], from);
      assertEquals(offsets[offsets.length - 1], rows);
    }
    const metrics = await (await fetch(`${t.server.url}/_/metrics`)).text();
    assert(metrics.includes('streamcast_replay_reads{state="active"} 0'), metrics);
    for (const s of subs) await s.close();
    // Every catch-up read goes through the serving handler's gate: with its
    // one permit held, a subscriber is greeted but waits, and is served once
    // the permit is back.
    const handler = new HttpHandler(
      new Map([[t.trades.name, t.trades]]),
      checkServeOptions({ maxReplayReaders: 1, logger: Logger.silent() }),
      {
        upgrade: (req, o) =>
          Deno.upgradeWebSocket(req, {
            idleTimeout: o.idleTimeoutS,
            ...(o.protocol !== undefined ? { protocol: o.protocol } : {}),
          }),
      },
    );
    const http = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (req, info) => handler.handle(req, `127.0.0.1:${info.remoteAddr.port}`),
    );
    try {
      const gate = handler.serving.gate!;
      await gate.acquire();
      const waiter = await TestSub.open(
        `ws://127.0.0.1:${http.addr.port}/trades?offset=1&frames=batch`,
      );
      assert(waiter.greeting !== null);
      await until(() => gate.waiting === 1, 5000, "the catch-up read to wait");
      await new Promise((r) => setTimeout(r, 100));
      assertEquals(waiter.lines.length, 0);
      gate.release();
      await waiter.waitLines(rows);
      assertEquals(waiter.offsets().length, rows);
      await waiter.close();
    } finally {
      handler.closeSockets();
      await http.shutdown();
      handler.release();
    }
  } finally {
    await t.stop();
  }
});

Deno.test("limits: Gate hands permits out first come, first served", async () => {
  const gate = new Gate(2);
  const order: number[] = [];
  await gate.acquire();
  await gate.acquire();
  const waiting = [1, 2, 3].map((n) => gate.acquire().then(() => order.push(n)));
  assertEquals([gate.active, gate.waiting], [2, 3]);
  gate.release();
  await waiting[0];
  gate.release();
  gate.release();
  await Promise.all(waiting);
  assertEquals(order, [1, 2, 3]);
  assertEquals(gate.active, 2);
  gate.release();
  gate.release();
  assertEquals(gate.active, 0);
  assertThrows(() => gate.release(), RangeError);
  assertThrows(() => new Gate(0), RangeError);
  assertEquals(await gate.run(() => Promise.resolve(7)), 7);
  await assertRejects(() => gate.run(() => Promise.reject(new Error("x"))), Error, "x");
  assertEquals(gate.active, 0);
});

Deno.test("limits: options are checked: zero or negative limits are refused", async () => {
  const root = await tempDir();
  try {
    await assertRejects(
      () => Stream.open("t", { schema: SCHEMA, root, maxSubscribers: 0 }),
      RangeError,
      "maxSubscribers",
    );
    const s = Stream.ephemeral("t", { schema: SCHEMA });
    for (
      const bad of [{ maxConnections: 0 }, { maxReplayReaders: -1 }, { maxUrlBytes: 10 }, {
        maxConnections: 1.5,
      }]
    ) {
      assertThrows(() => serve([s], { port: 0, onListen: () => {}, ...bad }), RangeError);
    }
  } finally {
    await rmrf(root);
  }
});

Deno.test("limits: serve --max-row-bytes rejects a bigger row and keeps ingesting; slow headers do not block others", async () => {
  const dir = await tempDir("streamcast-limits-");
  const schema = join(dir, "schema.json");
  await Deno.writeTextFile(
    schema,
    JSON.stringify({
      type: "object",
      properties: { seq: { type: "integer" }, note: { type: "string" } },
      required: ["seq", "note"],
    }),
  );
  const held: Deno.TcpConn[] = [];
  try {
    const s = await serveCli(
      [
        ...["--root", join(dir, "data"), "--port", "0", "--stream", `trades=${schema}`],
        ...["--stdin", "trades", "--max-row-bytes", "200", "--max-subscribers", "1"],
        ...["--max-connections", "100", "--max-url-bytes", "1000", "--stall-timeout", "5"],
        ...["--max-replay-readers", "2"],
      ],
      { stdin: true },
    );
    try {
      // Connections that send half a request and stall (slow-loris): Deno.serve
      // has no header timeout, but they must not stop the others.
      for (let i = 0; i < 50; i++) {
        const c = await Deno.connect({ hostname: "127.0.0.1", port: s.port });
        await c.write(new TextEncoder().encode("GET /trades/head HTTP/1.1\r\nHost: x\r\n"));
        held.push(c);
      }
      const small = (i: number) => JSON.stringify({ seq: i, note: "ok" });
      const big = JSON.stringify({ seq: 2, note: "x".repeat(500) });
      await s.write([small(1), big, small(3)].join("\n") + "\n");
      await s.closeStdin();
      await s.waitStderr(/end of stdin for stream "trades" \(2 rows accepted, 1 rejected\)/);
      assert(
        /stdin line 2 for stream "trades": row too big: payload is \d+ bytes; the limit is 200/
          .test(s.stderr()),
        s.stderr(),
      );
      const ws = s.url.replace("http", "ws");
      const first = await TestSub.open(`${ws}/trades?offset=1`);
      await first.waitLines(2);
      assertEquals(first.offsets(), [1, 2]);
      const second = await TestSub.open(`${ws}/trades`);
      assertEquals((await second.done).code, 1013);
      assertEquals((await rawRequest(s.port, `/trades/head?${"p".repeat(1200)}`)).status, 414);
      await first.close();
      assertEquals(await s.interrupt(), 0);
    } finally {
      await s.stop();
    }
  } finally {
    for (const c of held) {
      try {
        c.close();
      } catch {
        // closed by the server's shutdown
      }
    }
    await rmrf(dir);
  }
});
