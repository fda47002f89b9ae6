// A keyed stream's mirror keeps its own index, from the rows it makes durable
// (the primary's chunks it adopts, the rows it tails): at the same end, its
// snapshot equals the primary's, over GET /latest and ?snapshot=1, after a
// restart of the mirror too. Real `cli.ts serve` processes on 127.0.0.1.
import { assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import type { ServeProc } from "../../harness/serve.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { startMirror, startPrimary, untilChunked, untilEnd } from "../../harness/mirror_tree.ts";

/** NDJSON rows `from..to` over 7 keys. */
function keyed(from: number, to: number): string {
  let out = "";
  for (let i = from; i <= to; i++) {
    out += JSON.stringify({ i, sym: `s${(i * 5) % 7}`, px: i }) + "\n";
  }
  return out;
}

async function latest(p: ServeProc): Promise<{ end: string | null; body: string }> {
  const res = await fetch(`${p.url}/trades/latest`);
  return { end: res.headers.get("streamcast-end"), body: await res.text() };
}

// The mirror's snapshot once its index reaches `end` (the index of rows
// adopted as chunks is read from the log after the log's end moves).
async function latestAt(p: ServeProc, end: number): Promise<{ end: string | null; body: string }> {
  let got = await latest(p);
  await until(async () => (got = await latest(p)).end === String(end), 20_000, `/latest at ${end}`);
  return got;
}

async function snapshotLines(p: ServeProc, n: number): Promise<string[]> {
  const sub = await TestSub.open(`${p.ws}/trades?snapshot=1&frames=batch`);
  try {
    await sub.waitLines(n);
    return sub.lines;
  } finally {
    await sub.close();
  }
}

Deno.test("key: a mirror's index equals its primary's at the same end (adopted chunks, tailed rows, a restart)", async () => {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  try {
    const key = ["--key", "trades=sym"];
    const p = await startPrimary(`${dir}/p`, undefined, key);
    procs.push(p);
    await p.write(keyed(1, 500));
    await untilEnd(p, 501);
    await untilChunked(p, 500);
    let m = await startMirror(`${dir}/m`, p.ws, undefined, key);
    procs.push(m);
    await untilEnd(m, 501);
    assertEquals(await latestAt(m, 501), await latest(p));
    // Rows the mirror tails.
    await p.write(keyed(501, 800));
    await untilEnd(p, 801);
    await untilEnd(m, 801);
    await latestAt(m, 801);
    const want = await latest(p);
    assertEquals(want.end, "801");
    assertEquals(want.body.split("\n").length - 1, 7);
    assertEquals(await latest(m), want);
    assertEquals(await snapshotLines(m, 7), await snapshotLines(p, 7));
    // A restart of the mirror: its index from its key file and its log.
    await m.stop();
    m = await startMirror(`${dir}/m`, p.ws, undefined, key);
    procs[1] = m;
    await untilEnd(m, 801);
    assertEquals(await latestAt(m, 801), want);
  } finally {
    await Promise.all(procs.map((s) => s.stop()));
    await rmrf(dir);
  }
});
