// Mirrors behind a lying proxy (in this test, on 127.0.0.1): a chunk that
// arrives damaged is refused and fetched again; and with the live relay held
// back, the lag rule — an offset past the mirror's end but not past the
// primary's is accepted and served as the rows arrive; past both, `ahead`.
import { assert, assertEquals } from "../../harness/assert.ts";
import { freePort, rmrf, tempDir, until } from "../../harness/util.ts";
import { startS3, stopS3 } from "../../harness/s3.ts";
import { getText, type ServeProc } from "../../harness/serve.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { type Proxy, startProxy } from "./_proxy.ts";
import {
  assertMatch,
  chunkNames,
  head,
  readAll,
  rows,
  startMirror,
  startPrimary,
  untilChunked,
  untilEnd,
} from "../../harness/mirror_tree.ts";

Deno.test("mirrors: a damaged chunk is refused and fetched again; the lag rule", async () => {
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
    const f = await startMirror(`${dir}/f`, proxy.url.replace("http", "ws"), freePort());
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

    // The relay held back: the mirror lags the primary by 100 rows.
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

Deno.test("mirrors: with --archive, sealed history comes from the primary's S3 archive", async () => {
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
    const f = await startMirror(`${dir}/f`, proxy.url.replace("http", "ws"), freePort(), s3flags);
    procs.push(f);
    await untilEnd(f, 801);
    assertEquals(await chunkNames(f), await chunkNames(p));
    assertEquals(await readAll(f, 1, 801), await readAll(p, 1, 801));
    // Not one chunk asked of the primary: they came from the archive.
    assert(proxy.paths.length > 0, "the proxy saw the mirror's HTTP requests");
    assertEquals(proxy.paths.filter((x) => x.includes("/chunks/")), []);
    // A mirror does not write to the archive it reads: its head names none.
    assertEquals((await head(f)).archive, null);
  } finally {
    for (const s of procs) await s.stop();
    await proxy?.close();
    await stopS3(s3);
    await rmrf(dir);
  }
});
