// Signed tokens that expire while their sockets are open, on a real `serve`
// process: a subscription is closed at `exp` with 4401 token_expired and the
// offset to resume at; `connect` and `publisher`, given their token as a
// function, reconnect on a fresh token and go on from where they were — every
// row once, in order, none lost. And a row-level holder catches up through
// the socket, past --max-replay, where others would read the chunks.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { row, SCHEMA, serveCli, type Served } from "../../harness/security.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { secretText, sign } from "../../harness/jwt.ts";
import { connect } from "../../../client/connect.ts";
import { publisher } from "../../../client/publisher.ts";

async function start(
  extra: string[] = [],
): Promise<{ s: Served; dir: string; secret: Uint8Array }> {
  const dir = await tempDir();
  const text = secretText();
  await Deno.writeTextFile(join(dir, "secret"), text);
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
    ...["--publish", "trades", "--jwt-secret-file", join(dir, "secret"), ...extra],
  ]);
  return { s, dir, secret: new TextEncoder().encode(text) };
}

Deno.test("expiry: a subscription closes at exp with 4401 token_expired; connect and publisher renew their tokens and lose nothing", async () => {
  const { s, dir, secret } = await start();
  try {
    const ws = s.url.replace("http", "ws");
    const full = await sign(secret, { sub: "ops", streamcast: { read: ["*"], publish: ["*"] } });
    // A raw subscriber on a token that expires in 1-2 s (exp is whole seconds): closed with the resume offset.
    const short = await sign(secret, { sub: "short", expIn: 2, streamcast: { read: ["trades"] } });
    const raw = await TestSub.open(`${ws}/trades?offset=0&access_token=${short}`);
    assertEquals(raw.closed, null);

    // A publisher and a subscriber whose token functions mint 2-second tokens.
    const minted = { pub: 0, sub: 0 };
    const pub = await publisher(`${ws}/trades`, {
      producer: "feed",
      token:
        () => (minted.pub++,
          sign(secret, { sub: "feed", expIn: 2, streamcast: { publish: ["trades"] } })),
    });
    const sub = await connect(`${ws}/trades`, {
      offset: 0,
      token: async () => {
        minted.sub++;
        return await sign(secret, { sub: "reader", expIn: 2, streamcast: { read: ["trades"] } });
      },
    });
    const got: number[] = [];
    const reading = (async () => {
      for await (const [offset, msg] of sub) {
        got.push(offset!);
        assertEquals((msg as { seq: number }).seq, offset);
        if (offset === 400) break;
      }
    })();
    // 400 rows over about 4 s: both sockets outlive at least one token.
    for (let i = 1; i <= 400; i += 10) {
      await Promise.all(Array.from({ length: 10 }, (_, k) => pub.send(row(i + k))));
      await new Promise((r) => setTimeout(r, 100));
    }
    await reading;
    await sub.close();
    await pub.close();
    assertEquals(got, Array.from({ length: 400 }, (_, i) => i + 1));
    assert(minted.sub >= 2, `connect minted ${minted.sub} token(s)`);
    assert(minted.pub >= 2, `publisher minted ${minted.pub} token(s)`);
    // Every row stored once: the resends after an expiry were answered, not stored again.
    const head = await fetch(`${s.url}/trades/head`, {
      headers: { authorization: `Bearer ${full}` },
    });
    assertEquals((await head.json()).end_offset, 401);

    await until(() => raw.closed !== null, 10_000, "the short token's close");
    assertEquals(raw.closed!.code, 4401);
    const reason = JSON.parse(raw.closed!.reason);
    assertEquals(reason.error, "token_expired");
    // The offset to resume at is the one after the last row it got.
    assertEquals(reason.resume, raw.offsets().length === 0 ? 1 : raw.offsets().at(-1)! + 1);
  } finally {
    await s.stop();
    await rmrf(dir);
  }
});

Deno.test("expiry: a row-level holder catches up through the socket past --max-replay", async () => {
  const { s, dir, secret } = await start(["--max-replay", "20", "--seal-every", "0.2"]);
  try {
    const ws = s.url.replace("http", "ws");
    const full = await sign(secret, { sub: "ops", streamcast: { read: ["*"], publish: ["*"] } });
    const post = await fetch(`${s.url}/trades`, {
      method: "POST",
      headers: { authorization: `Bearer ${full}`, "content-type": "application/x-ndjson" },
      body: Array.from({ length: 200 }, (_, i) => JSON.stringify(row(i + 1))).join("\n"),
    });
    assertEquals(post.status, 200, await post.text());
    // Sealed into chunks: a plain holder is then refused too_old and reads them over HTTP.
    await until(
      async () => {
        const res = await fetch(`${s.url}/trades/manifest`, {
          headers: { authorization: `Bearer ${full}` },
        });
        const m = res.ok ? await res.json() : (await res.body?.cancel(), null);
        return (m?.chunks?.length ?? 0) > 0;
      },
      10_000,
      "a sealed chunk",
    );
    const plain = await TestSub.open(`${ws}/trades?offset=1&access_token=${full}`);
    assertEquals(plain.closed?.code, 4416);

    const rowLevel = await sign(secret, {
      sub: "odd",
      streamcast: { read: ["trades"], where: { trades: { price: { lt: 112.5 } } } },
    });
    const manifest = await fetch(`${s.url}/trades/manifest`, {
      headers: { authorization: `Bearer ${rowLevel}` },
    });
    assertEquals(manifest.status, 403);
    await manifest.body?.cancel();
    const sub = await connect(`${ws}/trades`, { offset: 1, catchUp: true, token: rowLevel });
    const want = Array.from({ length: 200 }, (_, i) => row(i + 1)).filter((r) => r.price < 112.5);
    const got: number[] = [];
    for await (const [offset] of sub) {
      got.push(offset!);
      if (got.length === want.length) break;
    }
    await sub.close();
    assertEquals(got, want.map((r) => r.seq));
  } finally {
    await s.stop();
    await rmrf(dir);
  }
});
