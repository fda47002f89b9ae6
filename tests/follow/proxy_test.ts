// Followers behind a lying proxy (in this test, on 127.0.0.1): a chunk that
// arrives damaged is refused and fetched again; and with the live relay held
// back, the lag rule — an offset past the follower's end but not past the
// primary's is accepted and served as the rows arrive; past both, `ahead`.
import { assert, assertEquals } from "../_assert.ts";
import { freePort, rmrf, tempDir, until } from "../_util.ts";
import { startS3, stopS3 } from "../_s3.ts";
import { getText, type ServeProc } from "../cli/_serve.ts";
import { TestSub } from "../server/_sub.ts";
import {
  assertMatch,
  chunkNames,
  head,
  readAll,
  rows,
  startFollower,
  startPrimary,
  untilChunked,
  untilEnd,
} from "./_cluster.ts";

interface Proxy {
  url: string;
  corrupted: Set<string>;
  /** Every HTTP path asked for. */
  paths: string[];
  hold(on: boolean): void;
  close(): Promise<void>;
}

// Forwards HTTP and WebSocket to `target` (`http://HOST:PORT`); the first copy
// of each chunk it passes has one byte flipped; `hold(true)` holds back the
// frames relayed to WebSocket clients until `hold(false)`.
function startProxy(target: string, corrupt = true): Proxy {
  const corrupted = new Set<string>();
  const paths: string[] = [];
  let held = false;
  const waiting: (() => void)[] = [];
  const ac = new AbortController();
  const sockets = new Set<WebSocket>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    async (req) => {
      const u = new URL(req.url);
      if (req.headers.get("upgrade") === "websocket") {
        const { socket, response } = Deno.upgradeWebSocket(req);
        const up = new WebSocket(`${target.replace("http", "ws")}${u.pathname}${u.search}`);
        sockets.add(socket).add(up);
        up.onmessage = (e) => {
          const send = () => socket.readyState === WebSocket.OPEN && socket.send(e.data);
          if (held) waiting.push(send);
          else send();
        };
        up.onclose = (e) => {
          const go = () => {
            if (socket.readyState !== WebSocket.OPEN) return;
            socket.close(e.code >= 3000 || e.code === 1000 ? e.code : 1001, e.reason);
          };
          if (held) waiting.push(go);
          else go();
        };
        up.onerror = () => {};
        socket.onclose = () => up.close();
        socket.onerror = () => {};
        return response;
      }
      const res = await fetch(`${target}${u.pathname}${u.search}`, { headers: req.headers });
      const sha = /\/chunks\/([0-9a-f]{64})$/.exec(u.pathname)?.[1];
      if (corrupt && sha && res.ok && !corrupted.has(sha)) {
        corrupted.add(sha);
        const bytes = await res.bytes();
        bytes[bytes.length >> 1] ^= 0x40;
        return new Response(bytes, { status: 200, headers: res.headers });
      }
      return new Response(res.body, { status: res.status, headers: res.headers });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    corrupted,
    paths,
    hold(on) {
      held = on;
      if (!on) { for (const f of waiting.splice(0)) f(); }
    },
    async close() {
      for (const s of sockets) s.close();
      ac.abort();
      await server.finished;
    },
  };
}

Deno.test("followers: a damaged chunk is refused and fetched again; the lag rule", async () => {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  let proxy: Proxy | null = null;
  try {
    const p = await startPrimary(`${dir}/p`);
    procs.push(p);
    await p.write(rows(1, 600));
    await untilChunked(p, 600);
    await p.write(rows(601, 1000));
    await untilChunked(p, 1000);
    proxy = startProxy(p.url);
    const f = await startFollower(`${dir}/f`, proxy.url.replace("http", "ws"), freePort());
    procs.push(f);
    await untilEnd(f, 1001);
    const names = await chunkNames(p);
    assertEquals(await chunkNames(f), names);
    assert(proxy.corrupted.size >= 1, "the proxy damaged a chunk");
    for (const sha of names) {
      const mine = await fetch(`${f.url}/trades/chunks/${sha}`).then((r) => r.bytes());
      const theirs = await fetch(`${p.url}/trades/chunks/${sha}`).then((r) => r.bytes());
      assertEquals(mine, theirs);
    }
    await f.waitStderr(/"event":"follow_chunk_refused"/);
    assertMatch(
      await getText(`${f.url}/_/metrics`),
      /streamcast_follow_chunks_refused_total\{stream="trades"\} [1-9]/,
    );
    assertEquals(await readAll(f, 1, 1001), await readAll(p, 1, 1001));
    // /head never shows a token; here there is none, and the proxy's URL is shown.
    assertEquals((await head(f)).follows, `${proxy.url.replace("http", "ws")}/trades`);

    // The relay held back: the follower lags the primary by 100 rows.
    proxy.hold(true);
    await p.write(rows(1001, 1100));
    await untilEnd(p, 1101);
    await until(async () => (await head(f)).lag_rows === 100, 10_000, "lag_rows 100");
    assertEquals((await head(f)).end_offset, 1001);
    const behind = await TestSub.open(`${f.ws}/trades?offset=1050&frames=batch`);
    assertEquals(behind.closed, null);
    assertEquals(behind.greeting?.end_offset, 1001);
    assertEquals(behind.greeting?.replay, null);
    const ahead = await TestSub.open(`${f.ws}/trades?offset=1102`);
    await ahead.done;
    assertEquals(ahead.closed?.code, 4416);
    assertMatch(ahead.closed!.reason, /"why":"ahead"/);
    proxy.hold(false);
    await behind.waitLines(51);
    assertEquals(behind.offsets(), Array.from({ length: 51 }, (_, k) => 1050 + k));
    assertEquals(behind.lines, (await readAll(p, 1050, 1101)).slice(0, 51));
    await behind.close();
  } finally {
    for (const s of procs) await s.stop();
    await proxy?.close();
    await rmrf(dir);
  }
});

Deno.test("followers: with --archive, sealed history comes from the primary's S3 archive", async () => {
  const s3 = await startS3();
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  let proxy: Proxy | null = null;
  try {
    const s3flags = [
      "--archive",
      "s3://archive/follow",
      "--s3-endpoint",
      s3.endpoint,
      "--s3-path-style",
    ];
    const p = await startPrimary(`${dir}/p`, freePort(), s3flags);
    procs.push(p);
    await p.write(rows(1, 800));
    await untilChunked(p, 800);
    await until(
      async () => {
        const lag = (await head(p)).archive_lag as { rows: number } | null;
        return lag !== null && lag.rows === 0;
      },
      30_000,
      "archived",
    );
    proxy = startProxy(p.url, false);
    const f = await startFollower(`${dir}/f`, proxy.url.replace("http", "ws"), freePort(), s3flags);
    procs.push(f);
    await untilEnd(f, 801);
    assertEquals(await chunkNames(f), await chunkNames(p));
    assertEquals(await readAll(f, 1, 801), await readAll(p, 1, 801));
    // Not one chunk asked of the primary: they came from the archive.
    assertEquals(proxy.paths.filter((x) => x.includes("/chunks/")), []);
    // A follower does not write to the archive it reads: its head names none.
    assertEquals((await head(f)).archive, null);
  } finally {
    for (const s of procs) await s.stop();
    await proxy?.close();
    await stopS3(s3);
    await rmrf(dir);
  }
});
