// Catching-up subscribers blocked on a full socket: stalled ones are polled
// slowly, never spun on (a few quick re-checks, then the slow poll), they
// resume once their socket drains, and a reader that reads again gets every
// row.
import { assert, assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { RawWs } from "../../harness/raw_ws.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { streamInside } from "../../../server/stream/stream.ts";

/** A socket whose buffer is full until `full` is cleared; counts the polls. */
class FakeSocket {
  full = true;
  polls = 0;
  sent = 0;
  readyState: number = WebSocket.OPEN;
  get bufferedAmount(): number {
    this.polls++;
    return this.full ? 1 << 30 : 0;
  }
  send(_data: string | Uint8Array): void {
    this.sent++;
  }
  close(): void {
    this.readyState = WebSocket.CLOSED;
  }
}

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, pad: { type: "string" } },
  required: ["i", "pad"],
};
const PAD = "x".repeat(200);
const ROWS = 60_000; // about 13 MB of frames: more than the kernel's socket buffers take

Deno.test("stalled catching-up subscribers are polled slowly, not spun on, and resume once drained", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  try {
    await stream.sendMany(Array.from({ length: 100 }, (_, k) => ({ i: k + 1, pad: PAD })));
    const socks = Array.from({ length: 50 }, () => new FakeSocket());
    for (const s of socks) streamInside(stream).subscribe(s, 1, "batch");
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 300));
    const ms = performance.now() - t0;
    assertEquals(stream.subscriberStates().catching_up, 50);
    for (const s of socks) {
      assertEquals(s.sent, 0);
      // A few quick re-checks, then one poll per 5 ms; a spin would be thousands.
      assert(s.polls <= 10 + ms / 5 * 1.5, `${s.polls} polls in ${ms.toFixed(0)} ms`);
    }
    for (const s of socks) s.full = false;
    await until(() => socks.every((s) => s.sent > 0), 5000, "the subscribers to resume");
    await until(() => stream.subscriberStates().live === 50, 5000, "them to go live");
  } finally {
    stream.closeSubscribers();
    await stream.close();
    await rmrf(root);
  }
});

Deno.test("a catching-up subscriber blocked on its socket gets every row once it reads again", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", { schema: SCHEMA, root, maxReplay: null });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const socks: RawWs[] = [];
  try {
    for (let i = 0; i < ROWS; i += 5000) {
      await stream.sendMany(Array.from({ length: 5000 }, (_, k) => ({ i: i + k + 1, pad: PAD })));
    }
    for (let k = 0; k < 5; k++) {
      const ws = await RawWs.connect(server.addr.port, "/t?offset=1&frames=batch");
      JSON.parse((await ws.readText())!); // the greeting; then nothing is read
      socks.push(ws);
    }
    // Every one stops making progress once its socket is full.
    let last = -1;
    await until(
      async () => {
        await new Promise((r) => setTimeout(r, 200));
        const now = stream.stats.replayRows;
        const still = now === last;
        last = now;
        return still && stream.subscriberStates().catching_up === 5;
      },
      30_000,
      "the readers to block",
    );
    assert(stream.stats.replayRows < 5 * ROWS, "they are blocked before the end");
    // One reads again: it gets every row, in order.
    const reader = socks.shift()!;
    let next = 1;
    while (next <= ROWS) {
      const text = await reader.readText();
      assert(text !== null, `closed at ${next}`);
      for (const line of text.split("\n")) {
        assertEquals(JSON.parse(line)[0], next);
        next++;
      }
    }
    reader.close();
  } finally {
    for (const s of socks) s.close();
    await server.shutdown();
    await rmrf(root);
  }
});
