// since= on a real server on 127.0.0.1, with an injected clock so that append
// times are exact: before the first row, exact hits, between commits, after
// the last (live), after eviction and with nothing evicted, across segments
// and chunks; every refusal; GET /{name}/at.
import { assert, assertEquals } from "../../harness/assert.ts";
import { serve, Stream } from "../../../mod.ts";
import { join } from "node:path";
import { timesPath } from "../../../log/chunk/times.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";

const SCHEMA = {
  type: "object",
  properties: { i: { type: "integer" }, pad: { type: "string" } },
  required: ["i", "pad"],
};
const S = 1_000_000; // µs per second
const GROUPS = 40;
const PER = 3;

// Commit g (0-based) holds offsets g·PER+1 .. (g+1)·PER, appended at (g+1) s.
async function setup(opts: { chunks?: boolean; maxReplay?: number | null } = {}) {
  const root = await tempDir();
  let now = 0;
  const stream = await Stream.open("trades", {
    schema: SCHEMA,
    root,
    maxReplay: opts.maxReplay ?? null,
    logOptions: {
      clock: () => now,
      timers: false,
      sealEveryMs: 0,
      segmentBytes: 1024,
      beaconInterval: 1024,
      chunks: opts.chunks ? { fanIn: 1000 } : false,
    },
  });
  let i = 0;
  for (let g = 0; g < GROUPS; g++) {
    now = (g + 1) * 1000;
    await stream.sendMany(Array.from({ length: PER }, () => ({ i: ++i, pad: "x".repeat(40) })));
  }
  const server = serve([stream], { port: 0, onListen: () => {} });
  const port = server.addr.port;
  return {
    stream,
    root,
    ws: `ws://127.0.0.1:${port}`,
    http: `http://127.0.0.1:${port}`,
    setNow(ms: number) {
      now = ms;
    },
    async stop() {
      await server.shutdown();
      await rmrf(root);
    },
  };
}

function reason(sub: TestSub): Record<string, unknown> {
  return JSON.parse(sub.closed!.reason);
}

async function firstOffset(url: string): Promise<{ sub: TestSub; first: number }> {
  const sub = await TestSub.open(url);
  assert(sub.greeting, `greeting from ${url}: ${JSON.stringify(sub.closed)}`);
  await sub.waitLines(1);
  return { sub, first: sub.offsets()[0] };
}

Deno.test("since: before the first row, exact hits, between commits, across segments", async () => {
  const t = await setup();
  try {
    assert(t.stream.log!.segments().length > 5, "several segments");
    const end = GROUPS * PER + 1;
    for (
      const [since, want] of [
        [0, 1],
        [S - 1, 1],
        [S, 1],
        [S + 1, PER + 1],
        [17 * S, 16 * PER + 1],
        [17 * S + 500_000, 17 * PER + 1],
        [GROUPS * S, (GROUPS - 1) * PER + 1],
      ]
    ) {
      const { sub, first } = await firstOffset(`${t.ws}/trades?since=${since}`);
      assertEquals(first, want, `since=${since}`);
      assertEquals(sub.greeting!.since, since);
      assertEquals(sub.greeting!.replay, [want, end]);
      await sub.waitLines(end - want);
      assertEquals(sub.offsets().length, end - want, `every row from ${want}`);
      await sub.close();
    }
    // RFC 3339, with a fraction: the same start as its µs.
    const rfc = new Date(17 * 1000).toISOString().replace("Z", "000Z"); // 1970-01-01T00:00:17.000000Z
    const { sub, first } = await firstOffset(`${t.ws}/trades?since=${encodeURIComponent(rfc)}`);
    assertEquals([first, sub.greeting!.since], [16 * PER + 1, 17 * S]);
    await sub.close();
    // Without since, the greeting says null.
    const plain = await TestSub.open(`${t.ws}/trades?offset=1`);
    assertEquals(plain.greeting!.since, null);
    await plain.close();
  } finally {
    await t.stop();
  }
});

Deno.test("since: after the last row is live from end_offset", async () => {
  const t = await setup();
  try {
    const end = GROUPS * PER + 1;
    const sub = await TestSub.open(`${t.ws}/trades?since=${(GROUPS + 5) * S}`);
    assertEquals(sub.greeting!.replay, null);
    assertEquals(sub.greeting!.end_offset, end);
    t.setNow((GROUPS + 10) * 1000);
    await t.stream.send({ i: 0, pad: "" });
    await sub.waitLines(1);
    assertEquals(sub.offsets(), [end]);
    await sub.close();
  } finally {
    await t.stop();
  }
});

Deno.test("since: through chunks; evicted after retention, from the first row when nothing was", async () => {
  const t = await setup({ chunks: true });
  try {
    const log = t.stream.log!;
    await log.roll();
    await log.chunks.settled();
    const chunks = log.chunks.manifest!.chunks;
    assert(chunks.length >= 3, `${chunks.length} chunks`);
    // Nothing dropped yet: an old time is the first row.
    const { sub: all, first } = await firstOffset(`${t.ws}/trades?since=0`);
    assertEquals(first, 1);
    await all.close();
    // A chunk boundary time is exact.
    const c = chunks[2];
    const atChunk = await firstOffset(`${t.ws}/trades?since=${c.first_ts}`);
    assertEquals(atChunk.first, c.first);
    await atChunk.sub.close();
    // Inside a chunk, its time index makes the time exact too: at a commit and
    // between two (commit g holds g·PER+1.., appended at (g+1) s).
    assert(c.last_ts > c.first_ts, "the chunk holds several commits");
    const g = Math.round(c.first_ts / S); // the chunk's second commit, 0-based
    for (const since of [(g + 1) * S, (g + 1) * S - 1, c.last_ts]) {
      const want = (Math.ceil(since / S) - 1) * PER + 1;
      const inside = await firstOffset(`${t.ws}/trades?since=${since}`);
      assertEquals(inside.first, want, `since ${since}`);
      assert(inside.first > c.first);
      await inside.sub.close();
      const at = await (await fetch(`${t.http}/trades/at?since=${since}`)).json();
      assertEquals(at, { offset: want, ts: Math.ceil(since / S) * S });
    }
    // Retention drops the oldest chunks.
    log.chunks.setRetention({ retainBytes: chunks.slice(2).reduce((n, e) => n + e.bytes, 0) });
    await log.chunks.settled(true);
    const earliest = log.earliest!;
    assert(earliest > 1);
    const old = await TestSub.open(`${t.ws}/trades?since=0`);
    await until(() => old.closed !== null);
    assertEquals(old.closed!.code, 4416);
    assertEquals(reason(old), { error: "not_replayable", why: "evicted", since: 0, earliest });
    // A time after the earliest row's is served (a chunk's first time: exact).
    const last = log.chunks.manifest!.chunks.at(-1)!;
    const later = await firstOffset(`${t.ws}/trades?since=${last.first_ts}`);
    assertEquals(later.first, last.first);
    await later.sub.close();
    // Inside that chunk: exact as well, through its index.
    if (last.last_ts > last.first_ts) {
      const within = await firstOffset(`${t.ws}/trades?since=${last.first_ts + 1}`);
      assertEquals(within.first, Math.round(last.first_ts / S) * PER + 1);
      await within.sub.close();
    }
  } finally {
    await t.stop();
  }
});

Deno.test("since: a time inside the earliest chunk held, without its time index, is served from that chunk, not evicted", async () => {
  const t = await setup({ chunks: true });
  try {
    const log = t.stream.log!;
    await log.roll();
    await log.chunks.settled();
    const chunks = log.chunks.manifest!.chunks;
    assert(chunks.length >= 3, `${chunks.length} chunks`);
    log.chunks.setRetention({ retainBytes: chunks.slice(1).reduce((n, e) => n + e.bytes, 0) });
    await log.chunks.settled(true);
    const first = log.chunks.manifest!.chunks[0];
    assertEquals(log.earliest, first.first);
    assert(first.first > 1, "rows were dropped");
    assert(first.last_ts > first.first_ts, "the earliest chunk holds several commits");
    // A chunk of an older log (or one adopted from an archive) has no time index.
    await Deno.remove(timesPath(join(t.root, "trades"), first.sha256));
    const since = first.first_ts + 1;
    // Chunk-grained: the whole chunk comes, an earlier start, never a later one.
    const { sub, first: got } = await firstOffset(`${t.ws}/trades?since=${since}`);
    assertEquals(got, first.first);
    assertEquals(sub.greeting!.since, since);
    await sub.close();
    const at = await (await fetch(`${t.http}/trades/at?since=${since}`)).json();
    assertEquals(at, { offset: first.first, ts: first.first_ts });
    // At the earliest row's own time, dropped rows may have reached it: evicted.
    const old = await TestSub.open(`${t.ws}/trades?since=${first.first_ts}`);
    await until(() => old.closed !== null);
    assertEquals(reason(old), {
      error: "not_replayable",
      why: "evicted",
      since: first.first_ts,
      earliest: first.first,
    });
  } finally {
    await t.stop();
  }
});

Deno.test("since: refusals — with offset 4400, ephemeral 4416 not_durable, other_stream, too_old", async () => {
  const t = await setup({ maxReplay: 10 });
  const eph = Stream.ephemeral("eph", { schema: SCHEMA });
  const server = serve([eph], { port: 0, onListen: () => {} });
  try {
    const both = await TestSub.open(`${t.ws}/trades?since=0&offset=1`);
    assertEquals(both.closed?.code, 4400);
    assertEquals(reason(both).error, "protocol");
    const bad = await TestSub.open(`${t.ws}/trades?since=yesterday`);
    assertEquals(bad.closed?.code, 4400);
    const e = await TestSub.open(`ws://127.0.0.1:${server.addr.port}/eph?since=0`);
    assertEquals([e.closed?.code, reason(e).why], [4416, "not_durable"]);
    const other = await TestSub.open(`${t.ws}/trades?since=0&stream_id=${"f".repeat(32)}`);
    assertEquals([other.closed?.code, reason(other).why], [4416, "other_stream"]);
    const old = await TestSub.open(`${t.ws}/trades?since=0`);
    assertEquals([old.closed?.code, reason(old).why], [4416, "too_old"]);
    // Near the end, within max_replay: accepted.
    const near = await firstOffset(`${t.ws}/trades?since=${GROUPS * S}`);
    assertEquals(near.first, (GROUPS - 1) * PER + 1);
    await near.sub.close();
  } finally {
    await server.shutdown();
    await t.stop();
  }
});

Deno.test("GET /{name}/at answers the first row at or after a time", async () => {
  const t = await setup();
  const eph = Stream.ephemeral("eph", { schema: SCHEMA });
  const server = serve([eph], { port: 0, onListen: () => {} });
  try {
    const at = async (q: string, base = t.http) => {
      const res = await fetch(`${base}${q}`);
      return { status: res.status, body: await res.json() };
    };
    assertEquals(await at("/trades/at?since=0"), { status: 200, body: { offset: 1, ts: S } });
    assertEquals(await at(`/trades/at?since=${5 * S}`), {
      status: 200,
      body: { offset: 4 * PER + 1, ts: 5 * S },
    });
    assertEquals(await at(`/trades/at?since=${5 * S + 1}`), {
      status: 200,
      body: { offset: 5 * PER + 1, ts: 6 * S },
    });
    assertEquals((await at("/trades/at?since=1970-01-01T00:00:05Z")).body.offset, 4 * PER + 1);
    assertEquals(await at(`/trades/at?since=${(GROUPS + 1) * S}`), {
      status: 200,
      body: { offset: GROUPS * PER + 1, ts: null },
    });
    for (const q of ["", "?since=", "?since=soon", "?since=99999999999999999999", "?x=1&since=0"]) {
      const r = await at(`/trades/at${q}`);
      assertEquals(r.status, 400, q);
      assertEquals(r.body.error, "bad_request", q);
    }
    assertEquals((await at("/nope/at?since=0")).status, 404);
    const e = await at("/eph/at?since=0", `http://127.0.0.1:${server.addr.port}`);
    assertEquals(e.status, 404);
  } finally {
    await server.shutdown();
    await t.stop();
  }
});
