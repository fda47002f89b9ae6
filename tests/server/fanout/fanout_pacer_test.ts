// Paced fan-out (server/fanout/fanout_pacer.ts): with a fan-out turn so small that
// every subscriber after the first of a commit waits for a later turn, every
// subscriber still gets every row once, in order — plain and filtered ones,
// over real sockets — while commits keep coming; stalled subscribers fall
// back to the log meanwhile and, once they read again, catch up with no gap
// and no duplicate. And the pacer itself: commit order across turns, the
// snapshot of who was live, the stream's next commit held back until the
// previous fan-out is handed out, and the bound on what waits.
import { assert, assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { RawWs } from "../../harness/raw_ws.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { FanoutPacer, MAX_PACED_ROWS } from "../../../server/fanout/fanout_pacer.ts";
import { MIN_SEND_BUFFER_BYTES } from "../../../server/limits.ts";
import { SendBudget } from "../../../server/fanout/send_budget.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, side: { type: "string" }, pad: { type: "string" } },
  required: ["i", "side", "pad"],
};
const PAD = "p".repeat(200);
const READERS = 8;
const STALLED = 2;
const COMMITS = 100;
const ROWS_PER_COMMIT = 600;
const side = (i: number) => (i % 3 === 0 ? "buy" : "sell");

async function readAll(ws: RawWs, first: number, end: number): Promise<void> {
  let next = first;
  while (next < end) {
    const text = await ws.readText();
    if (text === null) throw new Error(`stalled socket closed at ${next}, before ${end}`);
    for (const line of text.split("\n")) {
      assertEquals(JSON.parse(line)[0], next, "stalled then resumed: no gap, no duplicate");
      next++;
    }
  }
}

Deno.test("paced fan-out: every subscriber gets every row once and in order, in frames cut to the socket's share; stalled ones fall back and catch up", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root,
    maxReplay: null,
    maxBacklog: 1000,
    logOptions: { fsync: false },
  });
  // One byte a turn: each commit reaches one subscriber per turn of the event loop.
  const server = serve([stream], {
    port: 0,
    onListen: () => {},
    sendBufferBytes: MIN_SEND_BUFFER_BYTES,
    fanoutTurnBytes: 1,
  });
  const port = server.addr.port;
  const subs: TestSub[] = [];
  const stalled: RawWs[] = [];
  try {
    await stream.send({ i: 0, side: "buy", pad: PAD });
    const first = stream.endOffset!;
    for (let k = 0; k < READERS; k++) {
      subs.push(await TestSub.open(`ws://127.0.0.1:${port}/t?frames=batch`));
    }
    const buys = await TestSub.open(
      `ws://127.0.0.1:${port}/t?frames=batch&where=${encodeURIComponent('{"side":"buy"}')}`,
    );
    for (let k = 0; k < STALLED; k++) {
      const ws = await RawWs.connect(port, "/t?frames=batch");
      await ws.readText(); // the greeting; then nothing is read for a while
      stalled.push(ws);
    }
    await until(
      () => stream.subscriberStates().live === READERS + 1 + STALLED,
      5000,
      "all live",
    );
    // Commits in flight together, so fan-outs queue behind each other.
    let i = 1;
    const sends: Promise<unknown>[] = [];
    for (let c = 0; c < COMMITS; c++) {
      const rows = Array.from({ length: ROWS_PER_COMMIT }, () => {
        const n = i++;
        return { i: n, side: side(n), pad: PAD };
      });
      sends.push(stream.sendMany(rows));
      if (c % 4 === 3) await Promise.all(sends.splice(0));
    }
    await Promise.all(sends);
    const end = stream.endOffset!;
    const total = end - first;
    for (const s of subs) await s.waitLines(total);
    for (const s of subs) {
      const offsets = s.offsets();
      assertEquals(offsets.length, total, "every row, no duplicate");
      for (let k = 0; k < total; k++) assertEquals(offsets[k], first + k, "in order, no gap");
    }
    // 600-row commits (~140 KB) against shares of ~93 KiB (1 MiB over 11
    // sockets): cut to the share, no frame is over it.
    const share = Math.floor(MIN_SEND_BUFFER_BYTES / (READERS + 1 + STALLED));
    const biggest = Math.max(...subs.flatMap((s) => s.frames.slice(1).map((f) => f.length)));
    assert(biggest <= share, `a frame of ${biggest} > share ${share}`);
    const wanted: number[] = [];
    for (let o = first; o < end; o++) if (side(o - first + 1) === "buy") wanted.push(o);
    await buys.waitLines(wanted.length);
    assertEquals(buys.offsets(), wanted, "the filtered subscriber: its rows, in order, once");
    // The stalled ones went back to the log (their backlog overflowed); now they read.
    await Promise.all(stalled.map((ws) => readAll(ws, first, end)));
    assert(
      (stream.stats.drops.to_catch_up ?? 0) > 0,
      "the stalled subscribers fell back to the log",
    );
  } finally {
    for (const s of subs) await s.close();
    for (const ws of stalled) ws.close();
    await server.shutdown();
    await rmrf(root);
  }
});

// A fake subscriber: what it got; it reports handing its socket the frames' length.
function member(budget: SendBudget, got: string[], name: string) {
  return {
    sendBudget: budget,
    push(frames: readonly string[]) {
      for (const f of frames) got.push(`${name}${f}`);
      return frames.join("").length;
    },
  };
}
const SHARED = { joined: () => "", arrow: () => new Uint8Array(0) };

Deno.test("fan-out pacer: commits in order across turns, to who was live at the commit", async () => {
  const budget = new SendBudget(MIN_SEND_BUFFER_BYTES, 10);
  const got: string[] = [];
  const [a, b, c, d] = ["a", "b", "c", "d"].map((n) => member(budget, got, n));
  const pacer = new FanoutPacer();
  const live = new Set([a, b, c]);
  pacer.fanOut(live, ["1".repeat(6)], 2, SHARED); // a, b this turn (12 bytes ≥ 10); c waits
  assertEquals(pacer.waiting, 1);
  live.add(d); // d joins after commit 1: it gets commit 2 only
  pacer.fanOut(live, ["2"], 3, SHARED); // waits behind commit 1, for everyone
  assertEquals(got, ["a111111", "b111111"]);
  assert(pacer.idle() !== null, "the next commit waits");
  await pacer.idle();
  assertEquals(pacer.idle(), null);
  assertEquals(pacer.waiting, 0);
  const by = (n: string) => got.filter((g) => g.startsWith(n)).map((g) => g.slice(1));
  assertEquals(by("a"), ["111111", "2"]);
  assertEquals(by("c"), ["111111", "2"]);
  assertEquals(by("d"), ["2"]);
  // Unpaced (0): one pass, nothing waits.
  const flat = new FanoutPacer();
  const all: string[] = [];
  const zero = new SendBudget(MIN_SEND_BUFFER_BYTES, 0);
  flat.fanOut(["x", "y", "z"].map((n) => member(zero, all, n)), ["1".repeat(100)], 2, SHARED);
  assertEquals(all.length, 3);
  assertEquals(flat.idle(), null);
});

Deno.test("fan-out pacer: past MAX_PACED_ROWS waiting, what waits is handed out at once", () => {
  const budget = new SendBudget(MIN_SEND_BUFFER_BYTES, 1);
  const got: string[] = [];
  const subs = ["a", "b"].map((n) => member(budget, got, n));
  const pacer = new FanoutPacer();
  const rows = Array.from({ length: 1024 }, () => "r");
  let commits = 0;
  while (pacer.waiting > 0 || commits === 0) {
    pacer.fanOut(subs, rows, null, SHARED);
    commits++;
    assert(commits * rows.length <= MAX_PACED_ROWS + 2 * rows.length, "bounded");
  }
  assertEquals(got.length, commits * rows.length * 2, "every commit to both, none lost");
  assertEquals(got.filter((g) => g[0] === "a").length, commits * rows.length);
});
