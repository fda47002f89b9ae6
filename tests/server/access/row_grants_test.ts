// Row-level grants against a reference model, on a real `serve` process: random
// rows, a random grant filter in each holder's signed token and a random
// `where=` of its own; what each subscriber gets — replayed from offset 0 and
// live — is exactly the rows matching both, at their offsets. A fresh seed
// each run, printed (STREAMCAST_GRANT_SEED=N replays one). Then the routes
// that hand out every row refuse such a holder, and a publisher with a
// row-level grant may publish only rows inside it, nothing stored otherwise.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, rng, tempDir, until } from "../../harness/util.ts";
import { serveCli, type Served } from "../../harness/security.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { secretText, sign } from "../../harness/jwt.ts";

const SCHEMA = {
  type: "object",
  properties: { seq: { type: "integer" }, sym: { type: "string" }, px: { type: "integer" } },
  required: ["seq", "sym", "px"],
  additionalProperties: false,
};
const SYMS = ["AAA", "BBB", "CCC", "DDD"];

type Row = { seq: number; sym: string; px: number };
type Where = Record<string, unknown>;

// A random filter on sym or px (or both), and the model's test of it.
function randomFilter(r: () => number): { where: Where; test: (row: Row) => boolean } {
  const parts: [Where, (row: Row) => boolean][] = [];
  const kind = Math.floor(r() * 3);
  if (kind !== 1) {
    const syms = SYMS.filter(() => r() < 0.5);
    const pick = syms.length > 0 ? syms : [SYMS[Math.floor(r() * SYMS.length)]];
    parts.push([{ sym: pick }, (row) => pick.includes(row.sym)]);
  }
  if (kind !== 0) {
    const at = Math.floor(r() * 100);
    if (r() < 0.5) parts.push([{ px: { gte: at } }, (row) => row.px >= at]);
    else parts.push([{ px: { lt: at } }, (row) => row.px < at]);
  }
  return {
    where: Object.assign({}, ...parts.map(([w]) => w)),
    test: (row) => parts.every(([, t]) => t(row)),
  };
}

async function post(s: Served, token: string, rows: unknown[]) {
  const res = await fetch(`${s.url}/trades`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/x-ndjson" },
    body: rows.map((x) => JSON.stringify(x)).join("\n") + "\n",
  });
  return { status: res.status, body: await res.json() };
}

async function endOffset(s: Served, token: string): Promise<number> {
  const res = await fetch(`${s.url}/trades/head`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return (await res.json()).end_offset;
}

Deno.test("row-level grants: each holder gets exactly the rows matching its grant and its where=, replayed and live", async () => {
  const seed = Number(
    Deno.env.get("STREAMCAST_GRANT_SEED") ?? crypto.getRandomValues(new Uint32Array(1))[0],
  );
  console.log(`row-level grants seed ${seed} (STREAMCAST_GRANT_SEED=${seed} replays it)`);
  const r = rng(seed);
  const dir = await tempDir();
  const secretFile = join(dir, "secret");
  const text = secretText();
  await Deno.writeTextFile(secretFile, text);
  const secret = new TextEncoder().encode(text);
  await Deno.writeTextFile(join(dir, "schema.json"), JSON.stringify(SCHEMA));
  const s = await serveCli([
    ...[
      "--root",
      join(dir, "data"),
      "--port",
      "0",
      "--stream",
      `trades=${join(dir, "schema.json")}`,
    ],
    ...["--publish", "trades", "--jwt-secret-file", secretFile],
  ]);
  const subs: TestSub[] = [];
  try {
    const feeder = await sign(secret, {
      sub: "feeder",
      streamcast: { read: ["*"], publish: ["*"] },
    });
    const model: { offset: number; row: Row }[] = [];
    let seq = 0;
    const publish = async (n: number) => {
      const rows: Row[] = Array.from({ length: n }, () => ({
        seq: ++seq,
        sym: SYMS[Math.floor(r() * SYMS.length)],
        px: Math.floor(r() * 100),
      }));
      const a = await post(s, feeder, rows);
      assertEquals(a.status, 200, JSON.stringify(a.body));
      rows.forEach((row, i) => model.push({ offset: a.body.first + i, row }));
    };
    await publish(150);
    const holders = await Promise.all(Array.from({ length: 4 }, async (_, i) => {
      const grant = randomFilter(r);
      const own = r() < 0.75 ? randomFilter(r) : null;
      const token = await sign(secret, {
        sub: `holder-${i}`,
        streamcast: { read: ["trades"], where: { trades: grant.where } },
      });
      const where = own ? `&where=${encodeURIComponent(JSON.stringify(own.where))}` : "";
      const ws = s.url.replace("http", "ws");
      const q = `access_token=${token}${where}&frames=batch`;
      const replay = await TestSub.open(`${ws}/trades?offset=0&${q}`);
      const live = await TestSub.open(`${ws}/trades?${q}`);
      subs.push(replay, live);
      assertEquals(replay.closed, null, `holder ${i}: ${JSON.stringify(replay.closed)}`);
      // The greeting echoes the subscriber's own where=, not the grant's.
      assertEquals(replay.greeting!.where ?? null, own?.where ?? null);
      return {
        i,
        grant: grant.where,
        own: own?.where ?? null,
        test: (row: Row) => grant.test(row) && (own?.test(row) ?? true),
        replay,
        live,
        liveFrom: await endOffset(s, feeder),
      };
    }));
    await publish(150);
    for (const h of holders) {
      const want = model.filter((m) => h.test(m.row));
      const wantLive = want.filter((m) => m.offset >= h.liveFrom);
      const show = (m: { offset: number; row: Row }[]) =>
        m.map((x) => JSON.stringify([x.offset, x.row]));
      const what = `holder ${h.i} grant ${JSON.stringify(h.grant)} where ${JSON.stringify(h.own)}`;
      await h.replay.waitLines(want.length);
      await h.live.waitLines(wantLive.length);
      assertEquals(h.replay.lines, show(want), `${what}: replay`);
      assertEquals(h.live.lines, show(wantLive), `${what}: live`);
    }
  } finally {
    await Promise.all(subs.map((x) => x.close()));
    await s.stop();
    await rmrf(dir);
  }
});

Deno.test("row-level grants: manifest and chunks refuse the holder, /at hides the row's time; a publisher outside its grant stores nothing", async () => {
  const dir = await tempDir();
  const secretFile = join(dir, "secret");
  const text = secretText();
  await Deno.writeTextFile(secretFile, text);
  const secret = new TextEncoder().encode(text);
  await Deno.writeTextFile(join(dir, "schema.json"), JSON.stringify(SCHEMA));
  const s = await serveCli([
    ...[
      "--root",
      join(dir, "data"),
      "--port",
      "0",
      "--stream",
      `trades=${join(dir, "schema.json")}`,
    ],
    ...["--publish", "trades", "--jwt-secret-file", secretFile],
  ]);
  try {
    const all = await sign(secret, { sub: "all", streamcast: { read: ["*"], publish: ["*"] } });
    const rowLevel = await sign(secret, {
      sub: "aaa-desk",
      streamcast: { read: ["trades"], publish: ["trades"], where: { trades: { sym: "AAA" } } },
    });
    for (
      const path of [
        "/trades/manifest",
        `/trades/chunks/${"0".repeat(64)}`,
        `/trades/dictionaries/${"0".repeat(16)}`,
      ]
    ) {
      const res = await fetch(`${s.url}${path}`, {
        headers: { authorization: `Bearer ${rowLevel}` },
      });
      assertEquals([res.status, await res.json()], [403, {
        error: "forbidden",
        detail: "row-level grant: read through the socket",
      }]);
    }
    // The same routes for a holder without a row-level grant: not refused.
    const plain = await fetch(`${s.url}/trades/manifest`, {
      headers: { authorization: `Bearer ${all}` },
    });
    await plain.body?.cancel();
    assert(plain.status !== 403, `manifest for a plain grant: ${plain.status}`);

    assertEquals((await post(s, rowLevel, [{ seq: 1, sym: "AAA", px: 1 }])).status, 200);
    const before = await endOffset(s, all);
    // /at: the offset for both; the row's append time only for the holder of every row.
    const at = async (token: string) => {
      const res = await fetch(`${s.url}/trades/at?since=0`, {
        headers: { authorization: `Bearer ${token}` },
      });
      return [res.status, await res.json()];
    };
    const [plainStatus, plainAt] = await at(all);
    assertEquals(plainStatus, 200);
    assertEquals(plainAt.offset, before - 1, "the one row's offset");
    assert(typeof plainAt.ts === "number" && plainAt.ts > 0, JSON.stringify(plainAt));
    assertEquals(await at(rowLevel), [200, { offset: before - 1, ts: null }]);
    const refused = await post(s, rowLevel, [
      { seq: 2, sym: "AAA", px: 2 },
      { seq: 3, sym: "BBB", px: 3 },
    ]);
    assertEquals(refused.status, 403);
    assertEquals(refused.body.error, "forbidden");
    assertEquals(refused.body.line, 2);
    assertEquals(await endOffset(s, all), before);

    // The publish socket: the frame with a row outside is refused by index, nothing stored.
    const ws = new WebSocket(`${s.url.replace("http", "ws")}/trades/publish?producer=p1`, [
      "streamcast",
      `bearer.${rowLevel}`,
    ]);
    const got: Record<string, unknown>[] = [];
    ws.onmessage = (e) => got.push(JSON.parse(e.data));
    await until(() => got.length === 1, 10_000, "the publish greeting");
    ws.send(
      JSON.stringify({
        seq: 1,
        rows: [{ seq: 4, sym: "CCC", px: 4 }, { seq: 5, sym: "AAA", px: 5 }],
      }),
    );
    ws.send(JSON.stringify({ seq: 2, rows: [{ seq: 6, sym: "AAA", px: 6 }] }));
    await until(() => got.length === 3, 10_000, "two answers");
    assertEquals(got[1].error, "forbidden");
    assertEquals(got[1].index, 0);
    assertEquals([got[2].first, got[2].last], [before, before]);
    const closed = new Promise((resolve) => (ws.onclose = resolve));
    ws.close();
    await closed;
    assertEquals(await endOffset(s, all), before + 1);
    // compress=zstd-dict: a plain holder gets the stream's dictionary once there are rows
    // enough; a row-level holder does not (it is trained on every row): plain zstd frames.
    const many = Array.from({ length: 300 }, (_, i) => ({ seq: 10 + i, sym: "BBB", px: i % 100 }));
    assertEquals((await post(s, all, many)).status, 200);
    const dict = async (token: string) => {
      const sub = await TestSub.open(
        `${
          s.url.replace("http", "ws")
        }/trades?frames=batch&compress=zstd-dict&access_token=${token}`,
      );
      await sub.close();
      return [sub.greeting?.compress, typeof sub.greeting?.dictionary];
    };
    assertEquals(await dict(all), ["zstd", "string"]);
    assertEquals(await dict(rowLevel), ["zstd", "undefined"]);
  } finally {
    await s.stop();
    await rmrf(dir);
  }
});

Deno.test("row-level grants: a keyed stream's snapshot and /latest hold only the keys whose latest row the grant allows", async () => {
  const dir = await tempDir();
  const secretFile = join(dir, "secret");
  const text = secretText();
  await Deno.writeTextFile(secretFile, text);
  const secret = new TextEncoder().encode(text);
  await Deno.writeTextFile(join(dir, "schema.json"), JSON.stringify(SCHEMA));
  const s = await serveCli([
    ...["--root", join(dir, "data"), "--port", "0"],
    ...["--stream", `trades=${join(dir, "schema.json")}`, "--key", "trades=sym"],
    ...["--publish", "trades", "--jwt-secret-file", secretFile],
  ]);
  try {
    const all = await sign(secret, { sub: "all", streamcast: { read: ["*"], publish: ["*"] } });
    const cheap = await sign(secret, {
      sub: "cheap",
      streamcast: { read: ["trades"], where: { trades: { px: { lt: 50 } } } },
    });
    // Latest rows: AAA 10 (at 3), BBB 90 (at 4), CCC 20 (at 5); AAA's older row was 60.
    assertEquals(
      (await post(s, all, [
        { seq: 1, sym: "AAA", px: 60 },
        { seq: 2, sym: "BBB", px: 5 },
        { seq: 3, sym: "AAA", px: 10 },
        { seq: 4, sym: "BBB", px: 90 },
        { seq: 5, sym: "CCC", px: 20 },
      ])).status,
      200,
    );
    const latest = async (query: string) => {
      const res = await fetch(`${s.url}/trades/latest${query}`, {
        headers: { authorization: `Bearer ${cheap}` },
      });
      return [res.status, await res.text()];
    };
    assertEquals(await latest(""), [
      200,
      `[3,{"seq":3,"sym":"AAA","px":10}]\n[5,{"seq":5,"sym":"CCC","px":20}]\n`,
    ]);
    assertEquals(await latest(`?where=${encodeURIComponent('{"sym":"CCC"}')}`), [
      200,
      `[5,{"seq":5,"sym":"CCC","px":20}]\n`,
    ]);
    assertEquals(await latest("?key=BBB"), [404, `{"error":"no_such_key"}\n`]);
    assertEquals((await latest("?key=AAA"))[0], 200);
    const sub = await TestSub.open(
      `${s.url.replace("http", "ws")}/trades?snapshot=1&access_token=${cheap}`,
    );
    try {
      await sub.waitLines(2);
      assertEquals(sub.lines, [
        `[3,{"seq":3,"sym":"AAA","px":10}]`,
        `[5,{"seq":5,"sym":"CCC","px":20}]`,
      ]);
      // Live after the snapshot: only rows inside the grant.
      await post(s, all, [{ seq: 6, sym: "BBB", px: 70 }, { seq: 7, sym: "BBB", px: 7 }]);
      await sub.waitLines(3);
      assertEquals(sub.lines[2], `[7,{"seq":7,"sym":"BBB","px":7}]`);
    } finally {
      await sub.close();
    }
  } finally {
    await s.stop();
    await rmrf(dir);
  }
});
