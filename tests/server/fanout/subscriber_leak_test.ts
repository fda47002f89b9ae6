// Subscribers that join and leave, every way they can, leave nothing behind:
// after each round the server's per-subscriber structures (the stream's sets,
// the filter groups, the drain poller, the send buffer's sockets, the
// connection count, the metrics' series) are back at their baseline. Real
// sockets on a real server: live and catching-up subscribers, filtered ones,
// stalled ones dropped with 4429, polite closes and dropped connections.
import { assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { RawWs } from "../../harness/raw_ws.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { _subscriberCounts } from "../../../server/fanout/subscriber.ts";
import { streamInside } from "../../../server/stream/stream.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, pad: { type: "string" } },
  required: ["i", "pad"],
};
const PAD = "y".repeat(200);

const where = (w: unknown) => `where=${encodeURIComponent(JSON.stringify(w))}`;

// The lines of /metrics that are series (not HELP/TYPE), without their values.
function seriesOf(text: string): string[] {
  return text.split("\n").filter((l) => l && !l.startsWith("#")).map((l) =>
    l.slice(0, l.lastIndexOf(" "))
  ).sort();
}

function gauge(text: string, name: string): number {
  const m = new RegExp(`^${name} (\\d+)$`, "m").exec(text);
  if (!m) throw new Error(`no ${name} in /metrics`);
  return Number(m[1]);
}

Deno.test("subscribers joining and leaving every way leave the server's per-subscriber structures at their baseline", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root,
    maxReplay: null,
    stallTimeoutMs: 300,
    logOptions: { fsync: false },
  });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const port = server.addr.port;
  const base = `ws://127.0.0.1:${port}/t`;
  const metrics = async () => await (await fetch(`http://127.0.0.1:${port}/_/metrics`)).text();
  let i = 0;
  const publish = (n: number) =>
    stream.sendMany(Array.from({ length: n }, () => ({ i: ++i, pad: PAD })));
  try {
    await publish(20_000);
    assertEquals(_subscriberCounts(), { open: 0, polled: 0 });
    let seriesAfterFirst: string[] | null = null;
    for (let round = 0; round < 3; round++) {
      const polite: TestSub[] = [];
      for (
        const q of ["", "?frames=batch", "?offset=1&frames=batch", `?${where({ i: { gte: 5 } })}`]
      ) {
        polite.push(await TestSub.open(base + q));
      }
      polite.push(await TestSub.open(`${base}?offset=1&frames=batch&${where({ i: { lt: 10 } })}`));
      // Stalled from the start of the log: they fill up, and are dropped with 4429.
      const stalled: RawWs[] = [];
      for (let k = 0; k < 4; k++) {
        const ws = await RawWs.connect(port, `/t?offset=1&frames=${k % 2 ? "batch" : "single"}`);
        await ws.readText(); // the greeting, then nothing
        stalled.push(ws);
      }
      // Read a little, then drop the connection without a close.
      const droppers: RawWs[] = [];
      for (let k = 0; k < 4; k++) {
        const ws = await RawWs.connect(port, `/t?offset=${1 + k * 1000}&frames=batch`);
        await ws.readText();
        await ws.readText();
        droppers.push(ws);
      }
      for (let k = 0; k < 10; k++) await publish(500);
      for (const ws of droppers) ws.close();
      await until(() => polite.every((s) => s.lines.length > 0), 10_000, "every polite one reads");
      for (const s of polite) await s.close();
      // The stalled ones go once the stall timeout passes (or their kernel
      // buffers never filled: then they are closed here, abruptly).
      await until(
        () => stream.subscribers <= stalled.length,
        10_000,
        "everyone but the stalled gone",
      );
      await new Promise((r) => setTimeout(r, 600));
      for (const ws of stalled) ws.close();
      await until(() => stream.subscribers === 0, 10_000, "every subscriber gone");
      await until(
        () => _subscriberCounts().open === 0 && _subscriberCounts().polled === 0,
        5000,
        `nothing left in the shared structures: ${JSON.stringify(_subscriberCounts())}`,
      );
      assertEquals(stream.subscriberStates(), { catching_up: 0, live: 0, closed: 0 });
      assertEquals(streamInside(stream).filters, 0, "no filter group left");
      await until(
        async () => gauge(await metrics(), "streamcast_connections") === 0,
        5000,
        "no connection counted",
      );
      const text = await metrics();
      assertEquals(gauge(text, "streamcast_send_buffered_bytes"), 0);
      const series = seriesOf(text);
      if (seriesAfterFirst === null) seriesAfterFirst = series;
      else assertEquals(series, seriesAfterFirst, "no series added per round");
    }
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});
