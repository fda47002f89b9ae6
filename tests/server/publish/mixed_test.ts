// HTTP, WebSocket and stdin rows into one stream at once: every subscriber sees
// one contiguous, byte-identical sequence holding each row once.
import { assertEquals } from "../../harness/assert.ts";
import { publisher } from "../../../client/mod.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { endOffset, readAll, startPublishServer } from "../../harness/publish_child.ts";
import { until } from "../../harness/util.ts";

Deno.test("publish: HTTP, WebSocket and stdin into one stream at once: one contiguous, byte-identical sequence", async () => {
  const s = await startPublishServer(["--stdin", "t"], true);
  try {
    const live = await TestSub.open(`${s.ws}/t?offset=0&frames=batch`);
    const N = 1500;
    const row = (src: string, i: number) => JSON.stringify({ sym: `${src}${i}`, px: i });
    const stdin = (async () => {
      for (let i = 0; i < N; i += 50) {
        const chunk = Array.from({ length: 50 }, (_, j) => row("stdin", i + j)).join("\n") + "\n";
        await s.proc.write(chunk);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const http = (async () => {
      for (let i = 0; i < N; i += 50) {
        const body = Array.from({ length: 50 }, (_, j) => row("http", i + j)).join("\n");
        const res = await fetch(`${s.http}/t`, {
          method: "POST",
          body,
          headers: { "streamcast-producer": "h", "streamcast-seq": String(i + 1) },
        });
        assertEquals(res.status, 200, await res.text());
      }
    })();
    const ws = (async () => {
      const pub = await publisher(`${s.ws}/t`, { producer: "w" });
      const all = [];
      for (let i = 0; i < N; i += 25) {
        all.push(pub.sendMany(Array.from({ length: 25 }, (_, j) => JSON.parse(row("ws", i + j)))));
      }
      await Promise.all(all);
      await pub.close();
    })();
    await Promise.all([stdin, http, ws]);
    await until(async () => (await endOffset(s.http)) === 3 * N + 1, 20_000, "every row");
    await live.waitLines(3 * N);
    const replay = await readAll(s.ws, 3 * N);
    assertEquals(live.lines, replay.map((r) => r.line));
    assertEquals(replay.map((r) => r.offset), Array.from({ length: 3 * N }, (_, i) => i + 1));
    const syms = replay.map((r) => JSON.parse(r.line)[1].sym as string);
    assertEquals(new Set(syms).size, 3 * N);
    for (const src of ["stdin", "http", "ws"]) {
      // Each source's rows keep their order.
      const mine = syms.filter((x) => x.replace(/\d+$/, "") === src);
      assertEquals(mine, Array.from({ length: N }, (_, i) => `${src}${i}`));
    }
    await live.close();
  } finally {
    await s.stop();
  }
});
