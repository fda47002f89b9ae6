// where= end to end on a real server: refusals, the greeting, and filtered
// replay → live with the partition intact, for every frame mode.
import { assert, assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { ArrowFrameDecoder, batchRows } from "../../../arrow/subscription.ts";
import { compileFilter } from "../../../wire/filter.ts";
import { Subscriber, type SubscriberHost } from "../../../server/fanout/subscriber.ts";
import { SendBudget } from "../../../server/fanout/send_budget.ts";
import { rmrf, rng, tempDir, until } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { streamInside } from "../../../server/stream/stream.ts";

const SCHEMA = {
  type: "object",
  properties: {
    symbol: { type: "string" },
    price: { type: "number" },
    size: { type: "integer" },
    venue: { type: ["string", "null"] },
    buy: { type: "boolean" },
  },
  required: ["symbol", "price", "size", "venue", "buy"],
};
const SYMBOLS = ["BTC-USD", "ETH-USD", "SOL-USD", "BTC-EUR", "DOGE-USD"];

function row(i: number) {
  return {
    symbol: SYMBOLS[(i * 7) % SYMBOLS.length],
    price: 100 + (i % 97) / 4,
    size: i % 13,
    venue: i % 5 === 0 ? null : `v${i % 3}`,
    buy: i % 2 === 0,
  };
}

/** Filters of every kind: equality, membership, ranges, prefix, null, several columns. */
const FILTERS: Record<string, unknown>[] = [
  { symbol: "ETH-USD" },
  { symbol: ["BTC-USD", "SOL-USD"] },
  { size: { gte: 3, lt: 7 } },
  { price: { gt: 120 } },
  { symbol: { prefix: "BTC-" } },
  { venue: null },
  { buy: true, size: [0, 12] },
  { symbol: "XRP-USD" }, // never matches: offsets skip all the way to live
];

async function setup(ephemeral = false) {
  const root = await tempDir();
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root: ephemeral ? undefined : root,
    maxReplay: null,
    // Small segments sealed often: replay crosses segments and chunks.
    ...(ephemeral ? {} : {
      logOptions: { segmentBytes: 16 * 1024, sealEveryMs: 50, chunks: { fanIn: 4 } },
    }),
  });
  const server = serve([stream], { port: 0, onListen: () => {} });
  return {
    stream,
    ws: `ws://127.0.0.1:${server.addr.port}`,
    async stop() {
      await server.shutdown();
      await rmrf(root);
    },
  };
}

function whereParam(w: unknown): string {
  return `where=${encodeURIComponent(typeof w === "string" ? w : JSON.stringify(w))}`;
}

/** An arrow subscriber: decoded rows as `[offset,msg]` JSON lines. */
class ArrowSub {
  readonly ws: WebSocket;
  readonly lines: string[] = [];
  greeting: Record<string, unknown> | null = null;
  closed = false;
  readonly #decoder = new ArrowFrameDecoder();
  constructor(url: string) {
    this.ws = new WebSocket(url);
    this.ws.binaryType = "arraybuffer";
    this.ws.onclose = () => this.closed = true;
    this.ws.onerror = () => {};
    this.ws.onmessage = (e) => {
      if (typeof e.data === "string") {
        this.greeting = JSON.parse(e.data);
        return;
      }
      const batch = this.#decoder.push(e.data as ArrayBuffer);
      if (batch) { for (const r of batchRows(batch)) this.lines.push(JSON.stringify(r)); }
    };
  }
  static async open(url: string): Promise<ArrowSub> {
    const s = new ArrowSub(url);
    await until(() => s.greeting !== null || s.closed, 10_000, `greeting from ${url}`);
    return s;
  }
  offsets(): number[] {
    return this.lines.map((l) => JSON.parse(l)[0]);
  }
  async close(): Promise<void> {
    if (this.closed) return;
    this.ws.close();
    await until(() => this.closed, 5_000, "close");
  }
}

async function refusal(url: string): Promise<{ code: number; reason: Record<string, unknown> }> {
  const sub = await TestSub.open(url);
  await sub.done;
  assertEquals(sub.frames.length, 0, `a refusal sends no greeting (${url})`);
  return { code: sub.closed!.code, reason: JSON.parse(sub.closed!.reason || "{}") };
}

Deno.test("where refuses every malformed filter with 4400 naming where, before any frame", async () => {
  const t = await setup();
  try {
    await t.stream.send(row(1));
    const cases: [string, string][] = [
      ["{symbol", "where: not JSON"],
      ['["BTC-USD"]', "where: must be a JSON object"],
      ["{}", "where: an empty filter"],
      ['{"sym":"x"}', "where: unknown column sym"],
      ['{"size":"3"}', "where: column size"],
      ['{"symbol":{"gte":1}}', "where: column symbol: gte applies to number"],
      ['{"size":{"prefix":"1"}}', "where: column size: prefix applies to string"],
      ['{"size":{"near":3}}', "where: column size: unknown operator near"],
      ['{"symbol":[]}', "where: column symbol: an empty list"],
      [
        JSON.stringify({ size: Array.from({ length: 1025 }, (_, i) => i) }),
        "where: more than 1024",
      ],
      [
        JSON.stringify({
          size: Array.from({ length: 600 }, (_, i) => i),
          price: Array.from({ length: 600 }, (_, i) => i),
        }),
        "where: more than 1024",
      ],
      ['{"venue":1}', "where: column venue"],
      ['{"buy":null}', "where: column buy"],
    ];
    for (const [where, detail] of cases) {
      const r = await refusal(`${t.ws}/t?offset=1&${whereParam(where)}`);
      assertEquals(r.code, 4400, where);
      assertEquals(r.reason.error, "protocol", where);
      assert(String(r.reason.detail).startsWith(detail), `${where}: ${r.reason.detail}`);
    }
    // 1024 values in all are accepted.
    const ok = await TestSub.open(
      `${t.ws}/t?offset=1&${whereParam({ size: Array.from({ length: 1024 }, (_, i) => i) })}`,
    );
    assert(ok.greeting !== null, "1024 values accepted");
    await ok.close();
    // The checks' order: path (4404) first, then the query (4400), then the offset (4416).
    assertEquals((await refusal(`${t.ws}/nope?${whereParam("{")}`)).code, 4404);
    assertEquals((await refusal(`${t.ws}/t?offset=99&${whereParam("{")}`)).code, 4400);
    assertEquals(
      (await refusal(`${t.ws}/t?offset=99&${whereParam({ size: 1 })}`)).reason.why,
      "ahead",
    );
    // The server keeps serving.
    const after = await TestSub.open(`${t.ws}/t?offset=1`);
    await after.waitLines(1);
    await after.close();
  } finally {
    await t.stop();
  }
});

Deno.test("where a nested column is refused (at the compileFilter level)", () => {
  const schema = { type: "object", properties: { o: { type: "object" } } };
  try {
    compileFilter({ o: 1 }, schema);
    throw new Error("accepted");
  } catch (err) {
    assert(String((err as Error).message).startsWith("where: column o is nested"));
  }
});

Deno.test("where greeting echoes the parsed filter, null without one; ephemeral streams filter", async () => {
  const t = await setup();
  const e = await setup(true);
  try {
    await t.stream.send(row(1));
    const w = { symbol: ["ETH-USD", "BTC-USD"], size: { gte: 1 } };
    const sub = await TestSub.open(`${t.ws}/t?offset=1&${whereParam(w)}`);
    assertEquals(sub.greeting!.where, w);
    assertEquals(sub.greeting!.replay, [1, 2]);
    await sub.close();
    const plain = await TestSub.open(`${t.ws}/t`);
    assertEquals(plain.greeting!.where, null);
    await plain.close();
    const eph = await TestSub.open(`${e.ws}/t?${whereParam({ size: 4 })}`);
    assertEquals(eph.greeting!.where, { size: 4 });
    for (let i = 1; i <= 40; i++) await e.stream.send(row(i));
    const want = Array.from({ length: 40 }, (_, k) => row(k + 1)).filter((r) => r.size === 4);
    await eph.waitLines(want.length);
    await new Promise((r) => setTimeout(r, 50));
    assertEquals(eph.lines.map((l) => JSON.parse(l)), want.map((r) => [null, r]));
    await eph.close();
  } finally {
    await t.stop();
    await e.stop();
  }
});

async function partitionRun(seed: number): Promise<void> {
  const rand = rng(seed);
  const t = await setup();
  try {
    let sent = 0;
    let stop = false;
    const publisher = (async () => {
      while (!stop) {
        const n = 1 + Math.floor(rand() * 30);
        const rows = Array.from({ length: n }, (_, k) => row(sent + k + 1));
        if (n % 3 === 0) await Promise.all(rows.map((r) => t.stream.send(r)));
        else await t.stream.sendMany(rows);
        sent += n;
        await new Promise((r) => setTimeout(r, 1));
      }
    })();
    await until(() => sent > 1500, 20_000, "first rows");
    // Replays start in chunks as well as in segments.
    await until(
      () =>
        (t.stream.log!.chunks.manifest?.chunks.length ?? 0) > 0 &&
        t.stream.log!.segments().length > 1,
      20_000,
      "sealed chunks and several segments",
    );
    // The reference: every frame, unfiltered, from the first offset.
    const ref = await TestSub.open(`${t.ws}/t?offset=1`);
    type Any = TestSub | ArrowSub;
    const subs: { sub: Any; start: number | null; where: Record<string, unknown> }[] = [];
    for (let i = 0; i < 24; i++) {
      const where = FILTERS[Math.floor(rand() * FILTERS.length)];
      const mode = ["single", "batch", "arrow"][i % 3]; // every mode, every run
      const live = rand() < 0.15;
      const start = live ? null : 1 + Math.floor(rand() * sent);
      const q = [live ? "" : `offset=${start}`, `frames=${mode}`, whereParam(where)]
        .filter((x) => x).join("&");
      const url = `${t.ws}/t?${q}`;
      const sub = mode === "arrow" ? await ArrowSub.open(url) : await TestSub.open(url);
      assertEquals(sub.greeting!.where, where);
      subs.push({ sub, start, where });
      await new Promise((r) => setTimeout(r, 10 + rand() * 20));
    }
    await new Promise((r) => setTimeout(r, 300));
    stop = true;
    await publisher;
    const end = t.stream.endOffset!;
    await ref.waitLines(end - 1);
    assertEquals(ref.lines.length, end - 1);
    for (const { sub, start, where } of subs) {
      const f = compileFilter(where, SCHEMA);
      const first = start ?? (sub.greeting!.end_offset as number);
      const want = ref.lines.slice(first - 1).filter((l) => f.test(JSON.parse(l)[1]));
      const ctx = `seed ${seed}, where ${JSON.stringify(where)} from ${first}`;
      await until(
        () => sub.lines.length >= want.length || sub.closed !== null && sub.closed !== false,
        20_000,
        ctx,
      );
      await new Promise((r) => setTimeout(r, 20));
      if (sub instanceof ArrowSub) {
        // Arrow rows decode to the rows of the unfiltered frames for those offsets.
        assertEquals(sub.lines, want.map((l) => JSON.stringify(JSON.parse(l))), ctx);
      } else {
        assertEquals(sub.lines.length, want.length, ctx);
        // Byte-identical to the unfiltered frames for those offsets, in order.
        for (let i = 0; i < want.length; i++) assertEquals(sub.lines[i], want[i], ctx);
      }
    }
    assertEquals(streamInside(t.stream).filters > 0, true);
    await Promise.all([ref.close(), ...subs.map((s) => s.sub.close())]);
    await until(
      () => streamInside(t.stream).filters === 0,
      5_000,
      "filters dropped with their last subscriber",
    );
  } finally {
    await t.stop();
  }
}

const FRESH = crypto.getRandomValues(new Uint32Array(1))[0];
for (const seed of [FRESH, 7, 20261201]) {
  Deno.test(`where partitions filtered replay and live exactly while rows are published (seed ${seed})`, async () => {
    if (seed === FRESH) console.log(`where partition: fresh seed ${seed}`);
    await partitionRun(seed);
  });
}

Deno.test("where subscribers of one filter share one compiled instance, whatever the key order", async () => {
  const t = await setup();
  try {
    const a = await TestSub.open(`${t.ws}/t?${whereParam({ symbol: ["A", "B"], size: 1 })}`);
    const b = await TestSub.open(`${t.ws}/t?${whereParam({ size: 1, symbol: ["B", "A"] })}`);
    const c = await TestSub.open(`${t.ws}/t?${whereParam({ size: 2 })}`);
    assertEquals(streamInside(t.stream).filters, 2);
    await a.close();
    await until(() => t.stream.subscribers === 2);
    assertEquals(streamInside(t.stream).filters, 2);
    await b.close();
    await c.close();
    await until(() => streamInside(t.stream).filters === 0);
  } finally {
    await t.stop();
  }
});

Deno.test("where a filtered live subscriber's queue keeps its position: after the last frame sent, then the commit's end", () => {
  const sent: string[] = [];
  let buffered = 0;
  const socket = {
    readyState: WebSocket.OPEN,
    get bufferedAmount() {
      return buffered;
    },
    send(text: string) {
      sent.push(text);
      buffered += 4 << 20;
    },
    close() {},
  } as unknown as WebSocket;
  const host: SubscriberHost = {
    name: "t",
    durable: true,
    endOffset: () => 1,
    reader: () => {
      throw new Error("no catch-up here");
    },
    joinLive: () => {},
    leaveLive: () => {},
    gone: () => {},
    count: () => {},
    dropped: (why) => {
      throw new Error(`dropped ${why}`);
    },
    failed: (err) => {
      throw err;
    },
    arrowEncoder: () => {
      throw new Error("no arrow");
    },
  };
  const filter = compileFilter({ size: 1 }, SCHEMA);
  const sub = new Subscriber(socket, host, 1, {
    frames: "batch",
    maxBacklog: 100_000,
    stallTimeoutMs: 60_000,
    sendBudget: new SendBudget(),
    filter,
  });
  sub.start();
  const none = { joined: () => "", arrow: () => new Uint8Array() };
  // Nothing matched in a commit: only the position moves.
  sub.push([], 11, none);
  assertEquals(sub.next, 11);
  buffered = 8 << 20; // the socket is full: frames queue
  const frames = Array.from({ length: 5000 }, (_, k) => `[${12 + 2 * k},{"size":1}]`);
  sub.push(frames, 12 + 2 * 5000, none);
  sub.push([], 20_000, none);
  assertEquals(sub.next, 11);
  assertEquals(sub.backlog, 5000);
  buffered = 0;
  sub._poll(Date.now()); // one batch of 4096 frames, then the socket is full again
  assertEquals(sent.length, 1);
  assertEquals(sub.next, 12 + 2 * 4095 + 1, "after the last frame sent");
  buffered = 0;
  sub._poll(Date.now());
  assertEquals(sent.length, 2);
  assertEquals(sub.next, 20_000, "the end of the last commit queued");
  assertEquals(sent.join("\n").split("\n"), frames);
  sub.close();
});

Deno.test("where a filtered replay counts log rows for max_replay, and one that matches nothing reaches live", async () => {
  const root = await tempDir();
  const stream = await Stream.open("t", {
    schema: SCHEMA,
    root,
    maxReplay: 1000,
    logOptions: { segmentBytes: 64 * 1024 },
  });
  const server = serve([stream], { port: 0, onListen: () => {} });
  const ws = `ws://127.0.0.1:${server.addr.port}/t`;
  try {
    for (let i = 0; i < 20; i++) {
      await stream.sendMany(Array.from({ length: 1000 }, (_, k) => row(i * 1000 + k + 1)));
    }
    // 20,000 rows behind: too_old, however few match.
    const old = await refusal(`${ws}?offset=1&${whereParam({ symbol: "XRP-USD" })}`);
    assertEquals([old.code, old.reason.why], [4416, "too_old"]);
    // Within max_replay: 1000 rows that all fail the filter, then a live one that matches.
    const sub = await TestSub.open(`${ws}?offset=19001&${whereParam({ size: 99 })}`);
    assertEquals(sub.greeting!.replay, [19001, 20001]);
    await until(() => stream.subscriberStates().live === 1, 10_000, "live after matching nothing");
    await stream.send({ ...row(1), size: 99 });
    await sub.waitLines(1);
    assertEquals(sub.lines, [`[20001,${JSON.stringify({ ...row(1), size: 99 })}]`]);
    await sub.close();
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});
