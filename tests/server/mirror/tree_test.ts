// Mirrors for real: a primary, two mirrors of it and a mirror of a
// mirror, each a `cli.ts serve` process on 127.0.0.1. Subscribers on each
// receive byte-identical rows and frames; the chunks are the primary's,
// under the same names everywhere; a consumer moves primary → mirror →
// mirror of a mirror with its cursor, with no gap and no duplicate.
import { assert, assertEquals } from "../../harness/assert.ts";
import { connect, MemoryCursor } from "../../../mod.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { getJson, getText, runServe, type ServeProc, startServe } from "../../harness/serve.ts";
import { TestSub } from "../../harness/subscriber.ts";
import {
  assertMatch,
  chunkNames,
  head,
  readAll,
  rows,
  startMirror,
  startPrimary,
  untilChunked,
  untilEnd,
} from "../../harness/mirror_tree.ts";

Deno.test("mirrors: a tree of mirrors serves the primary's rows, frames and chunks", async () => {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  try {
    const p = await startPrimary(`${dir}/p`);
    procs.push(p);
    await p.write(rows(1, 2000));
    await untilEnd(p, 2001);
    await untilChunked(p, 2000);
    const [f1, f2] = await Promise.all([
      startMirror(`${dir}/f1`, p.ws),
      startMirror(`${dir}/f2`, p.ws),
    ]);
    procs.push(f1, f2);
    const ff = await startMirror(`${dir}/ff`, f1.ws);
    procs.push(ff);
    const all = [p, f1, f2, ff];
    await Promise.all(all.map((s) => untilEnd(s, 2001)));
    // History came as the primary's chunks.
    assertEquals(await chunkNames(f1), await chunkNames(p));
    assertEquals(await chunkNames(ff), await chunkNames(p));

    // Live subscribers on each (single frames: a frame is a row), then rows.
    const live = await Promise.all(all.map((s) => TestSub.open(`${s.ws}/trades?offset=2001`)));
    for (let k = 0; k < 6; k++) {
      await p.write(rows(2001 + k * 100, 2100 + k * 100));
      await new Promise((r) => setTimeout(r, 30));
    }
    await Promise.all(live.map((s) => s.waitLines(600)));
    for (const s of live) {
      assertEquals(s.lines.length, 600);
      assertEquals(s.frames.slice(1), live[0].frames.slice(1));
    }
    await Promise.all(live.map((s) => s.close()));

    // Replay from 1 on each: every line byte-identical to the primary's.
    const want = await readAll(p, 1, 2601);
    assertEquals(want.length, 2600);
    for (const s of [f1, f2, ff]) assertEquals(await readAll(s, 1, 2601), want);
    // Filters and time on a mirror, as on the primary.
    const where = `&where=${encodeURIComponent('{"sym":"ETH"}')}`;
    assertEquals(await readAll(ff, 1, 2599, where), await readAll(p, 1, 2599, where));

    // Sealed history: the primary's chunks (and their time indexes), the same names everywhere.
    await untilChunked(p, 2600);
    const names = await chunkNames(p);
    for (const s of [f1, f2, ff]) {
      await until(async () => (await chunkNames(s)).join() === names.join(), 20_000, "chunks");
      const bytes = await fetch(`${s.url}/trades/chunks/${names.at(-1)}`).then((r) => r.bytes());
      const orig = await fetch(`${p.url}/trades/chunks/${names.at(-1)}`).then((r) => r.bytes());
      assertEquals(bytes, orig);
    }
    const pm = await getJson(`${p.url}/trades/manifest`);
    const fm = await getJson(`${ff.url}/trades/manifest`);
    assertEquals(fm.chunks, pm.chunks);
    const t = await fetch(`${ff.url}/trades/chunks/${names[0]}.times`);
    assertEquals(t.status, 200);
    assertEquals(
      await t.bytes(),
      await fetch(`${p.url}/trades/chunks/${names[0]}.times`).then((r) => r.bytes()),
    );

    // /head: the primary's id, follows (no token), lag, state; metrics.
    const ph = await head(p);
    const h1 = await head(f1);
    const hf = await head(ff);
    assertEquals(h1.stream_id, ph.stream_id);
    assertEquals(hf.stream_id, ph.stream_id);
    assertEquals(h1.follows, `${p.ws}/trades`);
    assertEquals(hf.follows, `${f1.ws}/trades`);
    assertEquals(h1.state, "live");
    assertEquals(hf.lag_rows, 0);
    assertEquals(h1.schema, ph.schema);
    assertEquals(ph.follows, undefined);
    const metrics = await getText(`${ff.url}/_/metrics`);
    assertMatch(metrics, /streamcast_follow_state\{state="live",stream="trades"\} 1/);
    assertMatch(metrics, /streamcast_follow_rows_total\{stream="trades"\} \d+/);

    // A consumer moves primary → mirror → mirror of a mirror with its cursor.
    const cursor = new MemoryCursor();
    const got: number[] = [];
    const hops: [ServeProc, number][] = [[p, 900], [f2, 1700], [ff, 2600]];
    for (const [server, upTo] of hops) {
      const sub = await connect(`${server.ws}/trades`, { offset: 1, cursor, saveEveryRows: 1 });
      for await (const [offset] of sub) {
        got.push(offset!);
        if (offset === upTo) {
          await sub.commit(); // handled: the next hop starts after it
          break;
        }
      }
      await sub.close();
    }
    assertEquals(got, Array.from({ length: 2600 }, (_, k) => k + 1));

    // The lag rule's other half: an offset past the primary's end too is `ahead`.
    const ahead = await TestSub.open(`${ff.ws}/trades?offset=9999`);
    await ahead.done;
    assertEquals(ahead.closed?.code, 4416);
    assertMatch(ahead.closed!.reason, /"why":"ahead"/);
  } finally {
    for (const s of procs) await s.stop();
    await rmrf(dir);
  }
});

Deno.test("mirrors: a followed stream takes no rows, and is declared once", async () => {
  const dir = await tempDir();
  try {
    const url = "ws://127.0.0.1:9/trades";
    const stdin = await runServe(["--root", dir, "--follow", `trades=${url}`, "--stdin", "trades"]);
    assertEquals(stdin.code, 2);
    assertMatch(
      stdin.stderr,
      /--stdin names stream "trades", which is followed from ws:\/\/127\.0\.0\.1:9\/trades: a mirror takes no rows/,
    );
    const publish = await runServe([
      "--root",
      dir,
      "--follow",
      `trades=${url}`,
      "--publish",
      "trades",
    ]);
    assertEquals(publish.code, 2);
    assertMatch(
      publish.stderr,
      /--publish names stream "trades", which is followed from ws:\/\/127\.0\.0\.1:9\/trades: a mirror takes no rows/,
    );
    await Deno.writeTextFile(`${dir}/s.json`, "{}");
    const both = await runServe([
      "--root",
      dir,
      "--follow",
      `trades=${url}`,
      "--stream",
      `trades=${dir}/s.json`,
    ]);
    assertEquals(both.code, 2);
    assertMatch(both.stderr, /both declared \(--stream\) and followed \(--follow\)/);
    const bad = await runServe(["--root", dir, "--follow", "trades=ws://h/trades?offset=1"]);
    assertEquals(bad.code, 2);
    assertMatch(bad.stderr, /takes no query but access_token, got offset/);
    // No primary there and no replica yet: a clear error once the wait is over.
    const away = await runServe([
      "--root",
      dir,
      "--port",
      "0",
      "--follow",
      `trades=${url}`,
      "--follow-start-wait",
      "0.5",
    ]);
    assertEquals(away.code, 1);
    assertMatch(away.stderr, /"trades": cannot follow ws:\/\/127\.0\.0\.1:9\/trades: no answer/);
    assert(!away.stderr.includes("listening on"));
  } finally {
    await rmrf(dir);
  }
});

Deno.test("mirrors: a guarded primary is read with the URL's access_token, never shown", async () => {
  const dir = await tempDir();
  const procs: ServeProc[] = [];
  try {
    const token = "f0110we7t0ken0f20chars";
    await Deno.writeTextFile(
      `${dir}/tokens.json`,
      JSON.stringify({ tokens: [{ name: "relay", token, streams: ["trades"] }] }),
    );
    const p = await startPrimary(`${dir}/p`, undefined, ["--tokens", `${dir}/tokens.json`]);
    procs.push(p);
    await p.write(rows(1, 300));
    // Without the token the mirror cannot start (no replica yet): refused at once.
    const denied = await runServe([
      "--root",
      `${dir}/f`,
      "--port",
      "0",
      "--follow",
      `trades=${p.ws}/trades`,
    ], 60_000);
    assertEquals(denied.code, 1);
    assertMatch(
      denied.stderr,
      /cannot follow ws:\S+: access refused \(answered 401[^\n]*give --follow-token/,
    );
    const g = await startServe([
      "--root",
      `${dir}/g`,
      "--port",
      "0",
      "--follow",
      `trades=${p.ws}/trades?access_token=${token}`,
      "--log-level",
      "debug",
      "--follow-poll",
      "0.2",
    ]);
    procs.push(g);
    await untilEnd(g, 301);
    const h = await head(g);
    assertEquals(h.follows, `${p.ws}/trades`);
    assertEquals((await readAll(g, 1, 301)).length, 300);
    assert(!g.stderr().includes(token), "the token is never printed");
    assert(!JSON.stringify(h).includes(token));
  } finally {
    for (const s of procs) await s.stop();
    await rmrf(dir);
  }
});
