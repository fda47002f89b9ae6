// connect(url, {since}): a Date, µs or RFC 3339 text starts at the first row at
// or after that time (an injected clock makes the times exact); a reconnect
// resumes at the offset after the last row, not at the time again; a saved
// cursor wins over since; a wrong type is a TypeError naming since.
import { assertEquals, assertRejects } from "../harness/assert.ts";
import { connect, MemoryCursor, type Subscription } from "../../client/mod.ts";
import { until } from "../harness/util.ts";
import { fixture, type TradeRow } from "../harness/client_server.ts";

const S = 1_000_000;

async function read<T>(sub: Subscription<T>, n: number): Promise<number[]> {
  const out: number[] = [];
  while (out.length < n) {
    const r = await sub.next();
    if (r.done) throw new Error(`ended after ${out.length} rows`);
    out.push(r.value[0]!);
  }
  return out;
}

// Rows 10g+1 .. 10g+10 committed at (g+1) s, g = 0..4.
async function timed(opts: { maxReplay?: number } = {}) {
  let now = 0;
  const f = await fixture({ logOptions: { clock: () => now, timers: false }, ...opts });
  for (let g = 0; g < 5; g++) {
    now = (g + 1) * 1000;
    await f.send(10 * g + 1, 10 * g + 10);
  }
  return {
    f,
    setNow: (ms: number) => {
      now = ms;
    },
  };
}

Deno.test("connect since: a Date, µs or RFC 3339 text starts at the first row at or after it", async () => {
  const { f } = await timed();
  try {
    for (
      const [since, first] of [
        [0, 1],
        [3 * S, 21],
        [3 * S + 1, 31],
        [new Date(2000), 11],
        ["1970-01-01T00:00:04Z", 31],
        ["1970-01-01T00:00:04.000001Z", 41],
      ] as const
    ) {
      const sub = await connect<TradeRow>(f.url, { since });
      assertEquals(await read(sub, 1), [first], `since ${String(since)}`);
      assertEquals(typeof sub.greeting.since, "number");
      await sub.close();
    }
    // After the last row: live.
    const live = await connect(f.url, { since: 60 * S });
    assertEquals(live.greeting.replay, null);
    assertEquals(live.greeting.since, 60 * S);
    await f.send(51, 51);
    assertEquals(await read(live, 1), [51]);
    await live.close();
  } finally {
    await f.stop();
  }
});

Deno.test("connect since: a reconnect resumes at the offset after the last row; a saved cursor wins", async () => {
  const { f, setNow } = await timed();
  try {
    const sub = await connect(f.url, { since: 4 * S, reconnect: true, backoff: { minMs: 20 } });
    assertEquals(await read(sub, 5), [31, 32, 33, 34, 35]);
    await f.restart();
    setNow(10_000);
    // The time since=4 s would start at 31 again; the reconnect goes on at 36.
    const pending = read(sub, 16);
    await until(() => f.stream.subscribers > 0, 10_000, "the reconnect");
    await f.send(51, 51);
    assertEquals(await pending, [...Array.from({ length: 15 }, (_, k) => 36 + k), 51]);
    await sub.close();
    // A saved cursor wins over since.
    const cursor = new MemoryCursor({ offset: 7, streamId: f.stream.streamId! });
    const again = await connect(f.url, { since: 4 * S, cursor });
    assertEquals(await read(again, 1), [7]);
    await again.close();
  } finally {
    await f.stop();
  }
});

Deno.test("connect since with catchUp: a too_old refusal is read from the chunks from the time's offset", async () => {
  const { f } = await timed({ maxReplay: 5 });
  try {
    await f.stream.log!.roll();
    await f.stream.log!.chunks.settled();
    // One chunk holds every row: its time index resolves the time to its exact
    // row (11, committed at 2 s), more rows than max_replay: refused too_old,
    // read from the chunk.
    const at = await (await fetch(`http://127.0.0.1:${f.port}/trades/at?since=${2 * S}`)).json();
    assertEquals(at, { offset: 11, ts: 2 * S });
    const sub = await connect(f.url, { since: 2 * S, catchUp: true });
    const got = await read(sub, 50 - at.offset + 1);
    assertEquals(got, Array.from({ length: 50 - at.offset + 1 }, (_, k) => at.offset + k));
    await sub.close();
  } finally {
    await f.stop();
  }
});

Deno.test("connect since: a wrong type is a TypeError naming since; with offset too; a bad time a RangeError", async () => {
  const url = "ws://127.0.0.1:1/t";
  for (const since of [true, null, {}, [1], 5n]) {
    await assertRejects(
      () => connect(url, { since: since as unknown as number }),
      TypeError,
      "since must be",
    );
  }
  await assertRejects(() => connect(url, { since: 1, offset: 1 }), TypeError, "offset or since");
  for (const since of [-1, 1.5, "soon", new Date(NaN)]) {
    await assertRejects(() => connect(url, { since }), RangeError, "since");
  }
});
