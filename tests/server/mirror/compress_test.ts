// compress=zstd (docs/SPEC.md §2.6) on a mirror: the mirror's frames are binary
// zstd frames that decompress to the rows the primary serves, byte for byte,
// on replay and live — compression is a function of the committed frames, so
// a replica's commits are compressed the same way.
import { assert, assertEquals } from "../../harness/assert.ts";
import { zstdDecompressSync } from "node:zlib";
import { rmrf, tempDir } from "../../harness/util.ts";
import type { ServeProc } from "../../harness/serve.ts";
import { rows, startMirror, startPrimary, untilEnd } from "../../harness/mirror_tree.ts";

// Reads `n` rows from `url` (frames=batch&compress=zstd): the greeting and each decoded line.
async function zstdLines(url: string, n: number, during?: () => Promise<void>): Promise<{
  greeting: Record<string, unknown>;
  lines: string[];
}> {
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  const lines: string[] = [];
  let greeting: Record<string, unknown> | null = null;
  const done = Promise.withResolvers<void>();
  ws.onmessage = (e) => {
    if (greeting === null) {
      greeting = JSON.parse(e.data as string);
      return;
    }
    if (typeof e.data === "string") {
      done.reject(new Error(`a text data frame: ${e.data.slice(0, 80)}`));
      return;
    }
    const text = new TextDecoder().decode(zstdDecompressSync(new Uint8Array(e.data)));
    lines.push(...text.split("\n"));
    if (lines.length >= n) done.resolve();
  };
  ws.onclose = (e) => done.reject(new Error(`closed ${e.code} ${e.reason} after ${lines.length}`));
  await new Promise((r) => (ws.onopen = r));
  await during?.();
  const timer = setTimeout(
    () => done.reject(new Error(`only ${lines.length} of ${n} rows`)),
    30_000,
  );
  try {
    await done.promise;
  } finally {
    clearTimeout(timer);
    ws.onclose = null;
    ws.close();
  }
  return { greeting: greeting!, lines };
}

Deno.test("mirrors: compress=zstd frames on a mirror decode to the primary's rows", async () => {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  try {
    const p = await startPrimary(`${dir}/p`);
    procs.push(p);
    await p.write(rows(1, 1500));
    await untilEnd(p, 1501);
    const f = await startMirror(`${dir}/f`, p.ws);
    procs.push(f);
    await untilEnd(f, 1501);
    const q = "frames=batch&compress=zstd";
    const want = await zstdLines(`${p.ws}/trades?${q}&offset=1`, 1500);
    const got = await zstdLines(`${f.ws}/trades?${q}&offset=1`, 1500);
    assertEquals(got.greeting.compress, "zstd");
    assertEquals(got.greeting.stream_id, want.greeting.stream_id);
    assertEquals(got.lines.length, 1500);
    assertEquals(got.lines, want.lines);
    // Live: rows written to the primary reach the mirror's compressed subscriber.
    const live = await zstdLines(`${f.ws}/trades?${q}&offset=1501`, 300, async () => {
      for (let k = 0; k < 3; k++) await p.write(rows(1501 + k * 100, 1600 + k * 100));
    });
    assertEquals(live.lines.length, 300);
    assert(live.lines[0].startsWith("[1501,"), live.lines[0]);
    const primaryLive = await zstdLines(`${p.ws}/trades?${q}&offset=1501`, 300);
    assertEquals(live.lines, primaryLive.lines);
  } finally {
    for (const s of procs) await s.stop();
    await rmrf(dir);
  }
});
