// The portable handler, driven with plain Request objects: no Deno.serve, no
// socket; the WebSocket upgrade is a fake that records what it is asked.
import { assert, assertEquals } from "../../harness/assert.ts";
import { Logger } from "../../../common/logger.ts";
import { HttpHandler } from "../../../server/http/handler.ts";
import type { WebSocketUpgrader } from "../../../server/http/context.ts";
import { checkServeOptions } from "../../../server/serve_options.ts";
import { Stream } from "../../../server/stream/stream.ts";
import { rmrf, tempDir } from "../../harness/util.ts";

const SCHEMA = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };

/** The server's end of a socket, as far as the subscribe module uses it. */
class FakeSocket {
  readyState: number = WebSocket.CONNECTING;
  bufferedAmount = 0;
  sent: unknown[] = [];
  closed: { code?: number; reason?: string } | null = null;
  onopen: ((e: Event) => void) | null = null;
  onclose: ((e: CloseEvent) => void) | null = null;
  onerror: ((e: Event) => void) | null = null;
  onmessage: ((e: MessageEvent) => void) | null = null;
  send(data: unknown): void {
    this.sent.push(data);
  }
  close(code?: number, reason?: string): void {
    this.closed = { code, reason };
    this.readyState = WebSocket.CLOSED;
  }
  /** The runtime's part: open, then (after the handler ran) the close event. */
  async open(): Promise<void> {
    this.readyState = WebSocket.OPEN;
    await this.onopen?.(new Event("open"));
  }
}

function fixture(
  streams: Stream[],
  o: { maxConnections?: number; openFilesBound?: number; maxUrlBytes?: number } = {},
) {
  const upgrades: { url: string; protocol?: string; idleTimeoutS: number; socket: FakeSocket }[] =
    [];
  const upgrader: WebSocketUpgrader = {
    upgrade(req, options) {
      const socket = new FakeSocket();
      upgrades.push({ url: req.url, ...options, socket });
      // A 101 cannot be made by hand; the runtime's own response stands for it.
      return {
        socket: socket as unknown as WebSocket,
        response: new Response(null, { status: 200, headers: { "x-upgraded": "1" } }),
      };
    },
  };
  const settings = checkServeOptions({
    logger: Logger.silent(),
    maxUrlBytes: o.maxUrlBytes ?? 8192,
    maxConnections: o.maxConnections ?? 100,
    openFilesBound: o.openFilesBound ?? null,
    pingIntervalS: 30,
  });
  const handler = new HttpHandler(new Map(streams.map((s) => [s.name, s])), settings, upgrader);
  const get = (path: string, headers: Record<string, string> = {}, method = "GET") =>
    handler.handle(new Request(`http://h${path}`, { method, headers }), "127.0.0.1:9");
  const ws = (path: string) =>
    get(path, { upgrade: "websocket", "sec-websocket-protocol": "streamcast" });
  return { handler, upgrades, get, ws };
}

Deno.test("http handler answers head, streams, health, metrics and 404/405/414 without Deno.serve", async () => {
  const root = await tempDir();
  const trades = await Stream.open("trades", { schema: SCHEMA, root });
  const ticks = Stream.ephemeral("ticks", { schema: SCHEMA });
  try {
    await trades.send({ v: 1 });
    const t = fixture([trades, ticks], { maxUrlBytes: 100 });
    const head = await t.get("/trades/head");
    assertEquals(head.status, 200);
    const h = await head.json();
    assertEquals([h.stream, h.end_offset, h.durable], ["trades", 2, true]);
    const streams = await (await t.get("/_/streams")).json();
    assertEquals(streams.map((s: { stream: string }) => s.stream), ["trades", "ticks"]);
    const health = await t.get("/_/health");
    assertEquals([health.status, await health.json()], [200, { ok: true, streams: 2 }]);
    const manifest = await t.get("/ticks/manifest");
    assertEquals(manifest.status, 404);
    await manifest.body?.cancel();
    const missing = await t.get("/nope/head");
    assertEquals([missing.status, (await missing.json()).error], [404, "not_found"]);
    const post = await t.get("/trades/head", {}, "POST");
    assertEquals([post.status, post.headers.get("allow")], [405, "GET, HEAD"]);
    await post.body?.cancel();
    const long = await t.get("/" + "x".repeat(200));
    assertEquals(long.status, 414);
    await long.body?.cancel();
    const page = await t.get("/");
    assertEquals(page.headers.get("content-type"), "text/html; charset=utf-8");
    await page.body?.cancel();

    const metrics = await (await t.get("/_/metrics")).text();
    // The server's series and every stream's, in one registry's output.
    for (
      const line of [
        'streamcast_http_requests_total{route="head"} 1',
        'streamcast_rows_appended_total{stream="trades"} 1',
        'streamcast_rows_appended_total{stream="ticks"} 0',
        'streamcast_commit_seconds_count{stream="trades"} 1',
        'streamcast_end_offset{stream="trades"} 2',
        'streamcast_limit_refusals_total{limit="max_url_bytes"} 1',
      ]
    ) assert(metrics.includes(line + "\n"), `${line} in\n${metrics}`);
    assertEquals(metrics.match(/^# TYPE streamcast_rows_appended_total /gm)?.length, 1);
    t.handler.startShutdown();
    assertEquals((await t.get("/_/health")).status, 503);
  } finally {
    await trades.close();
    await ticks.close();
    await rmrf(root);
  }
});

Deno.test("http handler refuses a subscribe through the injected upgrade, in the documented order", async () => {
  const ticks = Stream.ephemeral("ticks", { schema: SCHEMA });
  try {
    const t = fixture([ticks], { maxConnections: 2 });
    // No such stream: upgraded, then closed with 4404 once open.
    const res = await t.ws("/nope");
    assertEquals(res.headers.get("x-upgraded"), "1");
    assertEquals(t.upgrades[0].protocol, "streamcast");
    assertEquals(t.upgrades[0].idleTimeoutS, 30);
    await t.upgrades[0].socket.open();
    assertEquals(t.upgrades[0].socket.closed?.code, 4404);
    assertEquals(JSON.parse(t.upgrades[0].socket.closed!.reason!), {
      error: "not_found",
      stream: "nope",
    });
    // An offset on an ephemeral stream: decided when the socket opens, 4416.
    await t.ws("/ticks?offset=1");
    await t.upgrades[1].socket.open();
    assertEquals(t.upgrades[1].socket.closed?.code, 4416);
    assertEquals(JSON.parse(t.upgrades[1].socket.closed!.reason!).why, "not_durable");
    assertEquals(t.upgrades[1].socket.sent.length, 0, "no greeting before a refusal");
    assertEquals(ticks.stats.refusals, { not_durable: 1 });
    // Both sockets still count until their close event: one more is 503, no upgrade.
    assertEquals(t.handler.sockets.size, 2);
    const full = await t.ws("/ticks");
    assertEquals([full.status, full.headers.get("retry-after")], [503, "1"]);
    await full.body?.cancel();
    assertEquals(t.upgrades.length, 2);
    for (const u of t.upgrades) u.socket.onclose?.(new CloseEvent("close", { code: 4404 }));
    assertEquals(t.handler.sockets.size, 0);
    // A typo in the query is refused with 4400 before the stream is asked.
    await t.ws("/ticks?ofset=1");
    await t.upgrades[2].socket.open();
    assertEquals(t.upgrades[2].socket.closed?.code, 4400);
    const metrics = await (await t.get("/_/metrics")).text();
    assert(metrics.includes('streamcast_protocol_refusals_total{code="4404"} 1'), metrics);
    assert(metrics.includes('streamcast_protocol_refusals_total{code="4400"} 1'), metrics);
    assert(metrics.includes('streamcast_limit_refusals_total{limit="max_connections"} 1'), metrics);
    assert(
      metrics.includes('streamcast_refusals_total{stream="ticks",why="not_durable"} 1'),
      metrics,
    );
    t.upgrades[2].socket.onclose?.(new CloseEvent("close", { code: 4400 }));
  } finally {
    await ticks.close();
  }
});

Deno.test("http handler refuses an upgrade past the open-files bound when it is below maxConnections", async () => {
  const ticks = Stream.ephemeral("ticks", { schema: SCHEMA });
  try {
    for (
      const [o, max, limit] of [
        [{ maxConnections: 5, openFilesBound: 2 }, 2, "open_files"],
        [{ maxConnections: 2, openFilesBound: 5 }, 2, "max_connections"],
      ] as const
    ) {
      const t = fixture([ticks], o);
      for (let i = 0; i < max; i++) await (await t.ws("/ticks")).body?.cancel();
      const full = await t.ws("/ticks");
      assertEquals(
        [full.status, full.headers.get("retry-after"), full.headers.get("connection")],
        [503, "1", "close"],
      );
      assertEquals(await full.json(), { error: "overloaded", limit, max });
      assertEquals(t.upgrades.length, max, "no upgrade past the bound");
      const metrics = await (await t.get("/_/metrics")).text();
      assert(metrics.includes(`streamcast_limit_refusals_total{limit="${limit}"} 1`), metrics);
      for (const u of t.upgrades) u.socket.onclose?.(new CloseEvent("close", { code: 1000 }));
      assertEquals(t.handler.sockets.size, 0);
      t.handler.release();
    }
  } finally {
    await ticks.close();
  }
});
