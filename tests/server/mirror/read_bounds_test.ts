// What a mirror reads from a lying primary is bounded (a proxy on
// 127.0.0.1 answering for it; real server processes): a manifest past
// --follow-max-manifest-bytes fails the request once that many bytes came; a
// chunk's time index past what the entry's rows can take is refused as a
// damaged copy and fetched again; once the primary tells the truth again the
// mirror catches up.
import { assert, assertEquals } from "../../harness/assert.ts";
import { freePort, rmrf, tempDir, until } from "../../harness/util.ts";
import { getJson, type ServeProc } from "../../harness/serve.ts";
import { maxTimesBytes } from "../../../log/chunk/times.ts";
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

Deno.test("mirrors: a lying primary's manifest and time index are read only up to their bounds", async () => {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  let proxy: Proxy | null = null;
  try {
    const p = await startPrimary(`${dir}/p`);
    procs.push(p);
    await p.write(rows(1, 500));
    await untilChunked(p, 500);
    const manifest = await (await fetch(`${p.url}/trades/manifest`)).text();
    assert(manifest.length < 16_384, `${manifest.length} bytes of manifest`);
    const chunk = (await getJson(`${p.url}/trades/manifest`)).chunks as {
      sha256: string;
      rows: number;
    }[];

    // A manifest padded past the bound with whitespace: valid JSON, but more
    // bytes than the mirror reads.
    proxy = startProxy(p.url, false);
    proxy.answer = (path) =>
      path.endsWith("/manifest")
        ? new Response(manifest + " ".repeat(1 << 20), {
          headers: { "content-type": "application/json" },
        })
        : null;
    const f = await startMirror(`${dir}/f`, proxy.url.replace("http", "ws"), freePort(), [
      "--follow-max-manifest-bytes",
      "16384",
    ]);
    procs.push(f);
    await until(
      () =>
        events(f, "follow_disconnected").some((e) =>
          /manifest \(--follow-max-manifest-bytes\) is over 16384 bytes/.test(String(e.error))
        ),
      20_000,
      "the manifest refused for its size",
    );
    assertEquals((await head(f)).end_offset, 1, "nothing adopted from the padded manifest");

    // The manifest true, but a time index longer than its chunk's rows allow.
    proxy.answer = (path) => path.endsWith(".times") ? new Response(new Uint8Array(1 << 20)) : null;
    const bound = maxTimesBytes(chunk[0].rows);
    await until(
      () =>
        events(f, "follow_chunk_refused").some((e) =>
          String(e.detail).includes(
            `the time index is over ${bound} bytes, more than ${chunk[0].rows} rows can take`,
          )
        ),
      20_000,
      "the time index refused for its size",
    );
    assertEquals((await head(f)).end_offset, 1, "no chunk adopted with a refused index");

    // The primary honest again: the mirror catches up.
    proxy.answer = null;
    await untilEnd(f, 501);
    assertEquals(await chunkNames(f), await chunkNames(p));
    assertEquals(await readAll(f, 1, 501), await readAll(p, 1, 501));
    const sha = chunk[0].sha256;
    assertEquals(
      await fetch(`${f.url}/trades/chunks/${sha}.times`).then((r) => r.bytes()),
      await fetch(`${p.url}/trades/chunks/${sha}.times`).then((r) => r.bytes()),
    );
  } finally {
    for (const s of procs) await s.stop();
    await proxy?.close();
    await rmrf(dir);
  }
});
