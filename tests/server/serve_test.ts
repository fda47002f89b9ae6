import { assert, assertEquals } from "../harness/assert.ts";
import { serve, Stream, type StreamOptions } from "../../mod.ts";
import { RawWs } from "../harness/raw_ws.ts";
import { rmrf, rng, tempDir, until } from "../harness/util.ts";
import { TestSub } from "../harness/subscriber.ts";

const SCHEMA = {
  type: "object",
  properties: {
    event_ts: { type: "integer" },
    symbol: { type: "string" },
    price: { type: "number" },
    amount: { type: "number" },
    side: { type: "integer", format: "int32" },
  },
  required: ["event_ts", "symbol", "price", "amount", "side"],
};

function row(i: number) {
  return {
    event_ts: 1790038800000000 + i,
    symbol: i % 2 ? "BTC-USD" : "ETH-USD",
    price: 100 + i / 8,
    amount: 0.5,
    side: i % 2,
  };
}

async function setup(
  opts: Partial<StreamOptions> = {},
  ephemeral = false,
) {
  const root = await tempDir();
  const stream = await Stream.open("trades", {
    schema: SCHEMA,
    root: ephemeral ? undefined : root,
    ...opts,
  });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const ws = `ws://127.0.0.1:${server.addr.port}`;
  return {
    root,
    stream,
    server,
    ws,
    async stop() {
      await server.shutdown();
      await rmrf(root);
    },
  };
}

Deno.test("serve greets with the stream's fields and sends [offset,msg] frames of the exact row", async () => {
  const t = await setup();
  try {
    for (let i = 1; i <= 3; i++) await t.stream.send(row(i));
    const sub = await TestSub.open(`${t.ws}/trades?offset=2`);
    const g = sub.greeting!;
    assertEquals(g.streamcast, 2);
    assertEquals(g.stream, "trades");
    assertEquals(g.stream_id, t.stream.streamId);
    assertEquals(g.end_offset, 4);
    assertEquals(g.replay, [2, 4]);
    assertEquals(g.log, { name: "trades", archive: null });
    assertEquals(g.durable, true);
    assertEquals(
      Object.keys((g.schema as { properties: object }).properties),
      Object.keys(SCHEMA.properties),
    );
    await sub.waitLines(2);
    await t.stream.send(row(4));
    await sub.waitLines(3);
    assertEquals(sub.frames.length, 4, "single frames: one per row");
    const [offset, msg] = JSON.parse(sub.lines[2]);
    assertEquals(offset, 4);
    assertEquals(msg, row(4));
    assertEquals(sub.lines[2], `[4,${JSON.stringify(row(4))}]`);
    // A live subscribe gets replay null and only what comes next.
    const live = await TestSub.open(`${t.ws}/trades`);
    assertEquals(live.greeting!.replay, null);
    await t.stream.send(row(5));
    await live.waitLines(1);
    assertEquals(live.offsets(), [5]);
    await sub.close();
    await live.close();
  } finally {
    await t.stop();
  }
});

Deno.test("serve partitions replay and live exactly for 50 subscribers joining during a publish", async () => {
  const t = await setup({ maxReplay: null });
  const rand = rng(3);
  try {
    let sent = 0;
    let stop = false;
    const publisher = (async () => {
      while (!stop) {
        const n = 1 + Math.floor(rand() * 20);
        const rows = Array.from({ length: n }, (_, k) => row(sent + k + 1));
        if (n % 3 === 0) await t.stream.sendMany(rows);
        else await Promise.all(rows.map((r) => t.stream.send(r)));
        sent += n;
        await new Promise((r) => setTimeout(r, 1));
      }
    })();
    await until(() => sent > 500, 10_000, "first rows");
    const subs: { sub: TestSub; start: number | null }[] = [];
    for (let i = 0; i < 50; i++) {
      const kind = rand();
      const frames = rand() < 0.5 ? "&frames=batch" : "";
      if (kind < 0.2) {
        subs.push({ sub: await TestSub.open(`${t.ws}/trades?${frames.slice(1)}`), start: null });
      } else {
        const start = 1 + Math.floor(rand() * sent);
        subs.push({ sub: await TestSub.open(`${t.ws}/trades?offset=${start}${frames}`), start });
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise((r) => setTimeout(r, 200));
    stop = true;
    await publisher;
    const end = t.stream.endOffset!;
    const byOffset = new Map<number, string>();
    for (const { sub, start } of subs) {
      const first = start ?? (sub.greeting!.end_offset as number);
      await sub.waitLines(end - first);
      const offsets = sub.offsets();
      assertEquals(offsets.length, end - first, `subscriber from ${first}`);
      for (let i = 0; i < offsets.length; i++) assertEquals(offsets[i], first + i);
      // Replayed and live frames for one offset are the same bytes.
      for (const line of sub.lines) {
        const o = JSON.parse(line)[0];
        const seen = byOffset.get(o);
        if (seen === undefined) byOffset.set(o, line);
        else assertEquals(line, seen);
      }
    }
    await Promise.all(subs.map((s) => s.sub.close()));
  } finally {
    await t.stop();
  }
});

Deno.test("serve refuses bad subscribes with the documented close codes", async () => {
  const t = await setup({ maxReplay: 5 });
  const eph = await Stream.open("ticks", { schema: SCHEMA });
  const server2 = serve([eph], { port: 0, onListen: () => {} });
  try {
    for (let i = 1; i <= 10; i++) await t.stream.send(row(i));
    // Sealed into chunks: a client refused too_old can read them over HTTP.
    await t.stream.log!.roll();
    await t.stream.log!.chunks.settled();
    const cases: [string, number, Record<string, unknown>][] = [
      [`${t.ws}/trades?offset=12`, 4416, {
        error: "not_replayable",
        why: "ahead",
        offset: 12,
        end_offset: 11,
      }],
      [`${t.ws}/trades?offset=2`, 4416, { error: "not_replayable", why: "too_old" }],
      [`${t.ws}/trades?offset=10&stream_id=${"0".repeat(32)}`, 4416, {
        error: "not_replayable",
        why: "other_stream",
      }],
      [`${t.ws}/nope`, 4404, { error: "not_found", stream: "nope" }],
      [`${t.ws}/trades?ofset=3`, 4400, { error: "protocol", detail: "unknown parameter ofset" }],
      [`${t.ws}/trades?offset=-1`, 4400, { error: "protocol" }],
      [`${t.ws}/trades?offset=1&offset=2`, 4400, { error: "protocol" }],
      [`${t.ws}/trades/x`, 4400, { error: "protocol" }],
      [`ws://127.0.0.1:${server2.addr.port}/ticks?offset=1`, 4416, {
        error: "not_replayable",
        why: "not_durable",
      }],
    ];
    for (const [url, code, want] of cases) {
      const sub = await TestSub.open(url);
      const closed = await sub.done;
      assertEquals(closed.code, code, url);
      assertEquals(sub.frames.length, 0, `a refusal sends no greeting (${url})`);
      const reason = JSON.parse(closed.reason);
      for (const [k, v] of Object.entries(want)) assertEquals(reason[k], v, `${url}: ${k}`);
      assert(new TextEncoder().encode(closed.reason).length <= 123);
    }
    // too_old carries the numbers.
    const old = await TestSub.open(`${t.ws}/trades?offset=2`);
    const r = JSON.parse((await old.done).reason);
    assertEquals([r.rows, r.max_replay], [9, 5]);
    // offset == end_offset is accepted (live from the next row).
    const atEnd = await TestSub.open(`${t.ws}/trades?offset=11`);
    assertEquals(atEnd.greeting!.replay, null);
    await atEnd.close();
    // A client data frame closes with 1008.
    const talker = await TestSub.open(`${t.ws}/trades`);
    talker.ws.send("hello");
    assertEquals((await talker.done).code, 1008);
    // The server still serves.
    const ok = await TestSub.open(`${t.ws}/trades?offset=8`);
    await ok.waitLines(3);
    assertEquals(ok.offsets(), [8, 9, 10]);
    await ok.close();
  } finally {
    await server2.shutdown();
    await t.stop();
  }
});

Deno.test("serve sends a stalled durable subscriber back to the log and it gets every row", async () => {
  const t = await setup({ maxBacklog: 1000, maxReplay: null });
  try {
    const raw = await RawWs.connect(t.server.addr.port, "/trades?frames=batch");
    const greeting = JSON.parse((await raw.readText())!);
    const start = greeting.end_offset as number;
    const total = 100_000;
    const rssBefore = Deno.memoryUsage().rss;
    for (let i = 0; i < total; i += 500) {
      await t.stream.sendMany(Array.from({ length: 500 }, (_, k) => row(i + k)));
    }
    const rssAfter = Deno.memoryUsage().rss;
    // The reader has not read a byte since the greeting: it must not have
    // been dropped, and its queue must not have held all 100k frames.
    assertEquals(t.stream.subscribers, 1);
    assert((t.stream.stats.drops.to_catch_up ?? 0) >= 1, "went back to catching up");
    assert(rssAfter - rssBefore < 200 << 20, `rss grew ${(rssAfter - rssBefore) >> 20} MiB`);
    // Now read everything.
    let next = start;
    while (next < start + total) {
      const text = await raw.readText();
      assert(text !== null, `closed at ${next}`);
      for (const line of text.split("\n")) {
        assertEquals(JSON.parse(line)[0], next);
        next++;
      }
    }
    raw.close();
    await until(() => t.stream.subscribers === 0, 5000, "subscriber gone");
  } finally {
    await t.stop();
  }
});

Deno.test("serve closes a stalled ephemeral subscriber with 4429", async () => {
  const t = await setup({ maxBacklog: 100 }, true);
  try {
    const raw = await RawWs.connect(t.server.addr.port, "/trades");
    const greeting = JSON.parse((await raw.readText())!);
    assertEquals(greeting.durable, false);
    for (let i = 0; i < 100_000; i += 1000) {
      await t.stream.sendMany(Array.from({ length: 1000 }, (_, k) => row(i + k)));
      await new Promise((r) => setTimeout(r, 0));
    }
    await until(() => t.stream.subscribers === 0, 10_000, "the slow subscriber to be dropped");
    // Read up to the close frame.
    let close: Uint8Array | null = null;
    while (true) {
      const f = await raw.readMessage();
      if (!f) break;
      if (f.opcode === 8) {
        close = f.data;
        break;
      }
      if (f.opcode === 1) assertEquals(JSON.parse(new TextDecoder().decode(f.data))[0], null);
    }
    assert(close, "a close frame");
    assertEquals((close[0] << 8) | close[1], 4429);
    assertEquals(JSON.parse(new TextDecoder().decode(close.subarray(2))), {
      error: "too_slow",
      resume: null,
    });
    raw.close();
  } finally {
    await t.stop();
  }
});

Deno.test("serve answers head, streams, health and metrics", async () => {
  const t = await setup();
  try {
    await t.stream.send(row(1));
    const http = t.server.url;
    const head = await (await fetch(`${http}/trades/head`)).json();
    assertEquals(head.stream, "trades");
    assertEquals(head.end_offset, 2);
    assertEquals(head.earliest, 1);
    assertEquals(head.subscribers, 0);
    assertEquals(head.archive, null);
    const missing = await fetch(`${http}/nope/head`);
    assertEquals(missing.status, 404);
    assertEquals((await missing.json()).error, "not_found");
    assertEquals((await (await fetch(`${http}/_/streams`)).json()).length, 1);
    assertEquals((await fetch(`${http}/_/health`)).status, 200);
    await (await fetch(`${http}/_/health`)).body?.cancel();
    const metrics = await (await fetch(`${http}/_/metrics`)).text();
    assert(metrics.includes('streamcast_rows_appended_total{stream="trades"} 1'), metrics);
    assert(metrics.includes('streamcast_commit_seconds_count{stream="trades"} 1'), metrics);
    const rss = Number(
      /streamcast_process_memory_bytes\{kind="resident"\} (\d+)/.exec(metrics)?.[1],
    );
    assert(rss > 10 * 2 ** 20 && rss < 64 * 2 ** 30, `resident memory ${rss}`);
    assert(/streamcast_process_memory_bytes\{kind="heap_used"\} \d+/.test(metrics), metrics);
    // The background thread's own heap (the chunk worker's), reported as it starts and every 5 s.
    const backgroundHeap = async () =>
      Number(
        /streamcast_process_memory_bytes\{kind="background_heap_used"\} (\d+)/.exec(
          await (await fetch(`${http}/_/metrics`)).text(),
        )?.[1] ?? 0,
      );
    await until(
      async () => await backgroundHeap() > 0,
      30_000,
      "the background thread's heap in /_/metrics",
    );
    // glibc malloc's own account (this process has FFI; the in-process server reads it).
    if (Deno.build.os === "linux") {
      const bytes = (kind: string) =>
        Number(new RegExp(`memory_bytes\\{kind="malloc_${kind}"\\} (\\d+)`).exec(metrics)?.[1]);
      assert(bytes("in_use") > 0 && bytes("in_use") + bytes("free") <= bytes("arenas"), metrics);
      assert(bytes("mmapped") >= 0, metrics);
    }
    const page = await fetch(`${http}/`);
    assertEquals(page.headers.get("content-type"), "text/html; charset=utf-8");
    await page.body?.cancel();
  } finally {
    await t.stop();
  }
});

Deno.test("serve shutdown closes subscribers with 1001 after the log is flushed", async () => {
  const t = await setup();
  try {
    const sub = await TestSub.open(`${t.ws}/trades`);
    const sends = Array.from({ length: 100 }, (_, i) => t.stream.send(row(i)));
    await Promise.all(sends);
    await sub.waitLines(100);
    await t.server.shutdown();
    const closed = await sub.done;
    assertEquals(closed.code, 1001);
    assertEquals(sub.lines.length, 100);
  } finally {
    await rmrf(t.root);
  }
});

Deno.test("stream refuses a row its schema refuses and stores nothing", async () => {
  const t = await setup();
  try {
    let err: unknown = null;
    await t.stream.send({ ...row(1), price: "x" }).catch((e) => (err = e));
    assert(err instanceof TypeError && err.name === "RowError", String(err));
    err = null;
    await t.stream.sendMany([row(1), { ...row(2), extra: 1 }]).catch((e) => (err = e));
    assert(err instanceof Error && err.message.includes("row 1"), String(err));
    assertEquals(t.stream.endOffset, 1);
    assertEquals(await t.stream.send(row(3)), 1);
  } finally {
    await t.stop();
  }
});

Deno.test("serve pings idle sockets and drops a peer that does not answer", async () => {
  const root = await tempDir();
  const stream = await Stream.open("trades", { schema: SCHEMA, root });
  const server = serve([stream], { port: 0, onListen: () => {}, pingIntervalS: 1 });
  try {
    // Deno's WebSocket answers pings: it stays connected.
    const polite = await TestSub.open(`ws://127.0.0.1:${server.addr.port}/trades`);
    // A raw peer that never answers.
    const raw = await RawWs.connect(server.addr.port, "/trades");
    await raw.readText(); // greeting
    const started = Date.now();
    let sawPing = false;
    while (true) {
      const f = await raw.readFrame();
      if (!f || f.opcode === 8) break;
      if (f.opcode === 9) sawPing = true;
    }
    const took = Date.now() - started;
    assert(sawPing, "the server pinged the idle peer");
    assert(took < 10_000, `dropped after ${took} ms`);
    raw.close();
    assertEquals(polite.closed, null, "the answering peer is still connected");
    await stream.send(row(1));
    await polite.waitLines(1);
    await polite.close();
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("serve replays an unsealed tail longer than max_replay: no chunk could serve it", async () => {
  const t = await setup({ maxReplay: 5 });
  try {
    for (let i = 1; i <= 10; i++) await t.stream.send(row(i));
    const sub = await TestSub.open(`${t.ws}/trades?offset=2`);
    assertEquals(sub.greeting!.replay, [2, 11]);
    await sub.waitLines(9);
    assertEquals(sub.offsets(), [2, 3, 4, 5, 6, 7, 8, 9, 10]);
    await sub.close();
  } finally {
    await t.stop();
  }
});
