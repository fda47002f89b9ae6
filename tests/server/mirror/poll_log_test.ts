// A mirror whose primary stops answering history (its /manifest fails while
// the live tail goes on) logs the failing poll at warn once per distinct
// failure — not every poll — and logs when the polls recover.
import { assert, assertEquals } from "../../harness/assert.ts";
import { freePort, rmrf, tempDir, until } from "../../harness/util.ts";
import type { ServeProc } from "../../harness/serve.ts";
import { type Proxy, startProxy } from "./_proxy.ts";
import { head, rows, startMirror, startPrimary, untilEnd } from "../../harness/mirror_tree.ts";

type Line = Record<string, unknown>;
const events = (f: ServeProc, event: string): Line[] =>
  f.stderr().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Line)
    .filter((l) => l.event === event);

Deno.test("mirrors: a failing history poll is logged at warn once per distinct failure, and its recovery", async () => {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  let proxy: Proxy | null = null;
  try {
    const p = await startPrimary(`${dir}/p`);
    procs.push(p);
    await p.write(rows(1, 100));
    await untilEnd(p, 101);
    proxy = startProxy(p.url, false);
    const f = await startMirror(`${dir}/f`, proxy.url.replace("http", "ws"), freePort());
    procs.push(f);
    await untilEnd(f, 101);
    await until(async () => (await head(f)).state === "live", 10_000, "live");
    assertEquals(events(f, "follow_history_failed"), []);

    const manifests = () => proxy!.paths.filter((x) => x.endsWith("/manifest")).length;
    let status = 500;
    proxy.answer = (path) => path.endsWith("/manifest") ? new Response("down", { status }) : null;
    const before = manifests();
    await until(() => events(f, "follow_history_failed").length === 1, 10_000, "the first warn");
    // Polls every 0.2 s: several more fail the same way, and are not logged again.
    await until(() => manifests() >= before + 6, 10_000, "six failing polls");
    const [first] = events(f, "follow_history_failed");
    assertEquals(first.level, "warn");
    assertEquals(first.stream, "trades");
    assert(/GET .*\/trades\/manifest answered 500/.test(String(first.error)), String(first.error));
    assertEquals(events(f, "follow_history_failed").length, 1);

    // A different failure is logged once more, naming the one before.
    status = 503;
    await until(() => events(f, "follow_history_failed").length === 2, 10_000, "the second warn");
    const n = manifests();
    await until(() => manifests() >= n + 4, 10_000, "four more failing polls");
    const all = events(f, "follow_history_failed");
    assertEquals(all.length, 2);
    assert(/answered 503/.test(String(all[1].error)), String(all[1].error));
    assert(/answered 500/.test(String(all[1].previous_error)));
    assert(Number(all[1].previous_failures) >= 6);

    // The live tail went on meanwhile; then the history answers again.
    await p.write(rows(101, 150));
    await untilEnd(f, 151);
    proxy.answer = null;
    await until(() => events(f, "follow_history_recovered").length === 1, 10_000, "recovered");
    const [rec] = events(f, "follow_history_recovered");
    assertEquals(rec.level, "info");
    assert(Number(rec.failures) >= 4, JSON.stringify(rec));
    assert(/answered 503/.test(String(rec.last_error)));
    const m = manifests();
    await until(() => manifests() >= m + 3, 10_000, "good polls");
    assertEquals(events(f, "follow_history_recovered").length, 1);
    assertEquals(events(f, "follow_history_failed").length, 2);
  } finally {
    for (const s of procs) await s.stop();
    await proxy?.close();
    await rmrf(dir);
  }
});
