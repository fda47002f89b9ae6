// A mirror that adopts the primary's chunks past its own end (it reconnects
// after the primary sealed rows it never saw over its tail) hands those rows
// to its live subscribers too: they go back to the log and read them, with no
// gap. Found by tests/system/reliability/kill_loop_publish_test.ts (seeds 3926834337,
// 709428761: a mirror's live subscribers, filtered or not, missed every row
// of the chunks it adopted on reconnecting to a restarted primary).
import { assertEquals } from "../../harness/assert.ts";
import { freePort, rmrf, tempDir, until } from "../../harness/util.ts";
import { getJson, type ServeProc, startServe } from "../../harness/serve.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { readAll, rows, startPrimary, untilEnd } from "../../harness/mirror_tree.ts";

Deno.test("mirrors: rows adopted in chunks past the end reach the live subscribers, filtered or not", async () => {
  const dir = await tempDir();
  const procs = new Set<ServeProc>();
  const subs: TestSub[] = [];
  try {
    const pport = freePort();
    let p = await startPrimary(`${dir}/p`, pport);
    procs.add(p);
    await p.write(rows(1, 300));
    await untilEnd(p, 301);
    const f = await startServe([
      "--root",
      `${dir}/f`,
      "--port",
      String(freePort()),
      "--follow",
      `trades=${p.ws}/trades`,
      "--follow-poll",
      "0.2",
      "--follow-retry-max",
      "0.3",
      "--log-level",
      "warn",
    ]);
    procs.add(f);
    await untilEnd(f, 301);
    const all = await TestSub.open(`${f.ws}/trades?offset=1`);
    const eth = await TestSub.open(
      `${f.ws}/trades?offset=1&where=${encodeURIComponent('{"sym":"ETH"}')}`,
    );
    subs.push(all, eth);
    await all.waitLines(300);
    await eth.waitLines(100);
    // The mirror stands still while the primary is killed, restarted, fed and
    // sealed: once it runs again it finds the rows in the primary's chunks.
    f.proc.kill("SIGSTOP");
    try {
      await p.signal("SIGKILL");
      procs.delete(p);
      p = await startPrimary(`${dir}/p`, pport);
      procs.add(p);
      await p.write(rows(301, 800));
      await until(
        async () => ((await getJson(`${p.url}/trades/manifest`)).through as number) >= 800,
        10_000,
        "the primary sealed 301..800",
      );
    } finally {
      f.proc.kill("SIGCONT");
    }
    await untilEnd(f, 801);
    await p.write(rows(801, 900));
    await untilEnd(f, 901);
    await all.waitLines(900, 10_000);
    assertEquals(all.offsets(), Array.from({ length: 900 }, (_, i) => i + 1));
    await eth.waitLines(300, 10_000);
    assertEquals(eth.offsets(), Array.from({ length: 300 }, (_, i) => 3 * (i + 1)));
    assertEquals(all.lines, await readAll(p, 1, 901));
  } finally {
    for (const s of subs) await s.close();
    for (const s of procs) await s.stop();
    await rmrf(dir);
  }
});
