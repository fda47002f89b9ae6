// Mirrors behind a slow primary (a proxy on 127.0.0.1 pacing or holding its
// answers; real server processes): a large chunk at a modest bandwidth is
// fetched whole, however long it takes, as long as its bytes keep coming; and
// the periodic looks at the primary never queue up behind a slow one.
import { assert, assertEquals } from "../../harness/assert.ts";
import { freePort, rmrf, tempDir, until } from "../../harness/util.ts";
import { sleep } from "../../../common/backoff.ts";
import { getJson, type ServeProc } from "../../harness/serve.ts";
import { type Proxy, startProxy } from "./_proxy.ts";
import {
  chunkNames,
  head,
  readAll,
  rows,
  startMirror,
  startPrimary,
  untilChunked,
  untilEnd,
} from "../../harness/mirror_tree.ts";

type Line = Record<string, unknown>;
const events = (f: ServeProc, event: string): Line[] =>
  f.stderr().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Line)
    .filter((l) => l.event === event);

Deno.test("mirrors: a chunk that takes longer than --follow-timeout to arrive, but keeps arriving, is fetched", async () => {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  let proxy: Proxy | null = null;
  try {
    const p = await startPrimary(`${dir}/p`);
    procs.push(p);
    await p.write(rows(1, 4000));
    await untilChunked(p, 4000);
    const m = await getJson(`${p.url}/trades/manifest`);
    const largest = Math.max(...(m.chunks as { bytes: number }[]).map((c) => c.bytes));
    proxy = startProxy(p.url, false);
    // The largest chunk in 25 pieces, one every 100 ms: 2.5 s in all, five
    // times the mirror's 0.5 s timeout, with never more than 0.1 s of silence.
    const piece = Math.max(64, Math.ceil(largest / 25));
    proxy.pace = (path) => path.includes("/chunks/") ? { bytes: piece, everyMs: 100 } : null;
    const f = await startMirror(`${dir}/f`, proxy.url.replace("http", "ws"), freePort(), [
      "--follow-timeout",
      "0.5",
    ]);
    procs.push(f);
    await untilEnd(f, 4001, 60_000);
    // Never given up on: no request failed, no round was retried.
    assertEquals(events(f, "follow_disconnected"), []);
    assertEquals(events(f, "follow_history_failed"), []);
    assertEquals(await chunkNames(f), await chunkNames(p));
    assertEquals(await readAll(f, 1, 4001), await readAll(p, 1, 4001));
    await until(async () => (await head(f)).state === "live", 10_000, "live");
  } finally {
    for (const s of procs) await s.stop();
    await proxy?.close();
    await rmrf(dir);
  }
});

Deno.test("mirrors: looks at a slow primary do not pile up; one in flight at most", async () => {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  let proxy: Proxy | null = null;
  const gate = Promise.withResolvers<void>();
  try {
    const p = await startPrimary(`${dir}/p`);
    procs.push(p);
    await p.write(rows(1, 100));
    await untilEnd(p, 101);
    proxy = startProxy(p.url, false);
    const f = await startMirror(`${dir}/f`, proxy.url.replace("http", "ws"), freePort(), [
      "--follow-timeout",
      "60",
    ]);
    procs.push(f);
    await untilEnd(f, 101);
    await until(async () => (await head(f)).state === "live", 10_000, "live");

    // The primary stops answering its manifest (a slow sync) while the mirror
    // looks every 0.2 s: 3 s of it would queue some fifteen looks behind it.
    const manifests = () => proxy!.paths.filter((x) => x.endsWith("/manifest")).length;
    let headDown = false;
    proxy.answer = (path) => {
      if (path.endsWith("/manifest")) {
        return gate.promise.then(async () => {
          const res = await fetch(`${p.url}${path}`);
          return new Response(res.body, { status: res.status, headers: res.headers });
        });
      }
      return headDown && path.endsWith("/head") ? new Response("down", { status: 503 }) : null;
    };
    const asked = manifests();
    await until(() => manifests() > asked, 10_000, "a look waiting on the manifest");
    await sleep(3000);
    // Then the tail is cut and the primary refuses reconnects before any manifest
    // read: no new look starts, and a reconnect round reads no manifest.
    headDown = true;
    proxy.refuseUpgrades = true;
    proxy.dropSockets();
    await until(async () => (await head(f)).state === "reconnecting", 10_000, "reconnecting");
    const before = manifests();
    gate.resolve();
    // Whatever looks were queued would read the manifest now, one after another.
    await sleep(2000);
    const after = manifests() - before;
    assert(after <= 1, `${after} manifest reads after the slow one: looks piled up`);

    // The primary back: the mirror reconnects and goes on.
    proxy.answer = null;
    proxy.refuseUpgrades = false;
    await p.write(rows(101, 150));
    await untilEnd(f, 151);
    assertEquals(await readAll(f, 1, 151), await readAll(p, 1, 151));
  } finally {
    gate.resolve();
    for (const s of procs) await s.stop();
    await proxy?.close();
    await rmrf(dir);
  }
});
