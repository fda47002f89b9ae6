// Bearer tokens: checked before the upgrade and on every route but health,
// carried three ways, and never printed.
import { createHash } from "node:crypto";
import { join } from "node:path";
import { assert, assertEquals, assertThrows } from "../../harness/assert.ts";
import { Logger, serve, Stream, TokenTable } from "../../../mod.ts";
import { findToken } from "../../../server/auth.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { rawRequest, row, SCHEMA, serveCli } from "../../harness/security.ts";

const ALICE = "alice-0123456789abcdef0123456789"; // trades only
const OPS = "ops-0123456789abcdef0123456789abcd"; // every stream
const BOB = "bob-0123456789abcdef0123456789abcd"; // book only, listed by its SHA-256
const WRONG = "nobody-0123456789abcdef012345678";

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

const TOKENS = {
  tokens: [
    { name: "alice", token: ALICE, streams: ["trades"] },
    { name: "ops", token: OPS, streams: ["*"] },
    { name: "bob", sha256: sha256(BOB), streams: ["book"] },
  ],
};

const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

async function setup() {
  const root = await tempDir();
  const trades = await Stream.open("trades", { schema: SCHEMA, root });
  const book = await Stream.open("book", { schema: SCHEMA, root });
  for (let i = 1; i <= 10; i++) await trades.send(row(i));
  // Sealed into a chunk, so /manifest and /chunks have something to serve.
  await trades.log!.roll();
  await trades.log!.chunks.settled();
  await book.send(row(1));
  const server = serve([trades, book], {
    port: 0,
    onListen: () => {},
    tokens: TokenTable.parse(TOKENS),
    logger: Logger.silent(),
  });
  const port = server.addr.port;
  return {
    trades,
    server,
    port,
    http: server.url,
    ws: `ws://127.0.0.1:${port}`,
    async stop() {
      await server.shutdown();
      await rmrf(root);
    },
  };
}

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text };
}

Deno.test("auth refuses an upgrade without a valid token with 401 before upgrading", async () => {
  const t = await setup();
  try {
    const none = await rawRequest(t.port, "/trades?offset=1", { upgrade: true });
    assertEquals(none.status, 401);
    assertEquals(none.headers["www-authenticate"], 'Bearer realm="streamcast"');
    assertEquals(JSON.parse(none.body).error, "unauthorized");
    const wrong = await rawRequest(t.port, "/trades", {
      upgrade: true,
      headers: bearer(WRONG),
    });
    assertEquals(wrong.status, 401);
    assert(wrong.headers["www-authenticate"].includes('error="invalid_token"'));
    // Another scheme is no token.
    const basic = await rawRequest(t.port, "/trades", {
      upgrade: true,
      headers: { authorization: "Basic YWxpY2U6eA==" },
    });
    assertEquals(basic.status, 401);
    // A WebSocket sees the refusal as a failed connection: no greeting, no frame.
    const sub = await TestSub.open(`${t.ws}/trades?offset=1`);
    assertEquals(sub.greeting, null);
    assert(sub.closed !== null && sub.closed.code !== 1000);
    assertEquals(t.trades.subscribers, 0);
  } finally {
    await t.stop();
  }
});

Deno.test("auth answers 403 for a stream the token does not grant, existing or not", async () => {
  const t = await setup();
  try {
    const ws = await rawRequest(t.port, "/book", { upgrade: true, headers: bearer(ALICE) });
    assertEquals(ws.status, 403);
    assertEquals(JSON.parse(ws.body), { error: "forbidden", stream: "book" });
    assert(ws.headers["www-authenticate"].includes("insufficient_scope"));
    const paths = ["/book/head", "/book/manifest", `/book/chunks/${"a".repeat(64)}`];
    paths.push("/book/at?since=0"); // since= (§12): /at is checked as /head is
    for (const path of paths) {
      assertEquals((await get(`${t.http}${path}`, bearer(ALICE))).status, 403, path);
    }
    // A name that does not exist is 403 too: a 404 would tell which names exist.
    assertEquals((await get(`${t.http}/secret/head`, bearer(ALICE))).status, 403);
    assertEquals(
      (await rawRequest(t.port, "/secret", { upgrade: true, headers: bearer(ALICE) })).status,
      403,
    );
    // With a token for every stream it is the usual 404 / 4404.
    assertEquals((await get(`${t.http}/secret/head`, bearer(OPS))).status, 404);
    const sub = await TestSub.open(`${t.ws}/secret?access_token=${OPS}`);
    assertEquals((await sub.done).code, 4404);
  } finally {
    await t.stop();
  }
});

Deno.test("auth accepts a good token in the header, the subprotocol and the query", async () => {
  const t = await setup();
  try {
    // 1. Authorization: Bearer (Deno's WebSocket can set headers).
    const header = new WebSocket(
      `${t.ws}/trades?offset=1`,
      denoWsOptions({ headers: bearer(ALICE) }),
    );
    // 2. Subprotocols, as a browser would: the server answers "streamcast".
    const proto = new WebSocket(`${t.ws}/trades?offset=1`, ["streamcast", `bearer.${ALICE}`]);
    // 3. The access_token query parameter.
    const query = new WebSocket(`${t.ws}/trades?offset=1&access_token=${ALICE}`);
    // A token for every stream, by its SHA-256 entry too.
    const bob = new WebSocket(`${t.ws}/book?offset=1`, ["streamcast", `bearer.${BOB}`]);
    const results = await Promise.all(
      [header, proto, query, bob].map((ws) =>
        new Promise<{ protocol: string; frames: string[] }>((resolve, reject) => {
          const frames: string[] = [];
          ws.onmessage = (e) => {
            frames.push(e.data);
            if (frames.length === (ws === bob ? 2 : 11)) {
              resolve({ protocol: ws.protocol, frames });
              ws.close();
            }
          };
          ws.onclose = (e) => reject(new Error(`closed ${e.code} after ${frames.length} frames`));
          ws.onerror = () => {};
        })
      ),
    );
    const [h, p, q, b] = results;
    assertEquals(JSON.parse(h.frames[0]).stream, "trades");
    assertEquals(h.frames.slice(1), p.frames.slice(1));
    assertEquals(h.frames.slice(1), q.frames.slice(1));
    assertEquals(JSON.parse(h.frames[10])[0], 10);
    assertEquals(p.protocol, "streamcast", "the server answers streamcast, never the token");
    assertEquals(h.protocol, "");
    assertEquals(JSON.parse(b.frames[1]), [1, row(1)]);
    await until(() => t.trades.subscribers === 0, 5000, "subscribers gone");
  } finally {
    await t.stop();
  }
});

Deno.test("auth covers head, manifest and chunks, and /_/streams lists only what the token reads", async () => {
  const t = await setup();
  try {
    const head = await get(`${t.http}/trades/head`, bearer(ALICE));
    assertEquals(head.status, 200);
    assertEquals(JSON.parse(head.text).end_offset, 11);
    assertEquals((await get(`${t.http}/trades/head`)).status, 401);
    assertEquals((await get(`${t.http}/trades/at?since=0`)).status, 401);
    assertEquals(
      (await get(`${t.http}/trades/head`)).headers.get("www-authenticate"),
      'Bearer realm="streamcast"',
    );
    assertEquals((await get(`${t.http}/trades/head?access_token=${ALICE}`)).status, 200);
    const manifest = await get(`${t.http}/trades/manifest`, bearer(ALICE));
    assertEquals(manifest.status, 200);
    const sha = JSON.parse(manifest.text).chunks[0].sha256 as string;
    assertEquals((await get(`${t.http}/trades/manifest`)).status, 401);
    const chunk = await fetch(`${t.http}/trades/chunks/${sha}`, { headers: bearer(ALICE) });
    assertEquals(chunk.status, 200);
    assert((await chunk.arrayBuffer()).byteLength > 0);
    assertEquals((await get(`${t.http}/trades/chunks/${sha}`)).status, 401);
    assertEquals((await get(`${t.http}/trades/chunks/${sha}`, bearer(BOB))).status, 403);
    // /_/streams: filtered to the token's streams.
    const names = async (token: string) =>
      (JSON.parse((await get(`${t.http}/_/streams`, bearer(token))).text) as { stream: string }[])
        .map((h) => h.stream);
    assertEquals(await names(ALICE), ["trades"]);
    assertEquals(await names(BOB), ["book"]);
    assertEquals(await names(OPS), ["trades", "book"]);
    assertEquals((await get(`${t.http}/_/streams`)).status, 401);
    // /_/metrics needs "*"; /_/health is open; the viewer's scripts are open.
    assertEquals((await get(`${t.http}/_/metrics`, bearer(ALICE))).status, 403);
    assertEquals((await get(`${t.http}/_/metrics`)).status, 401);
    const metrics = await get(`${t.http}/_/metrics`, bearer(OPS));
    assertEquals(metrics.status, 200);
    assert(metrics.text.includes('streamcast_auth_denials_total{why="forbidden"}'), metrics.text);
    assertEquals((await get(`${t.http}/_/health`)).status, 200);
    assertEquals((await get(`${t.http}/_/client.js`)).status, 200);
    // The viewer page holds heads: it needs a token, and shows only what it reads.
    assertEquals((await get(`${t.http}/`)).status, 401);
    const page = await get(`${t.http}/?access_token=${ALICE}`);
    assertEquals(page.status, 200);
    assert(page.text.includes('"stream":"trades"') && !page.text.includes('"stream":"book"'));
    assertEquals((await get(`${t.http}/book?access_token=${ALICE}`)).status, 403);
  } finally {
    await t.stop();
  }
});

Deno.test("auth refuses a token in two places and a bearer subprotocol without streamcast", async () => {
  const t = await setup();
  try {
    const two = await rawRequest(t.port, `/trades?access_token=${ALICE}`, {
      upgrade: true,
      headers: bearer(ALICE),
    });
    assertEquals(two.status, 400);
    assert(JSON.parse(two.body).detail.includes("more than one place"));
    assert(!two.body.includes(ALICE), "the answer does not echo the token");
    const lone = await rawRequest(t.port, "/trades", {
      upgrade: true,
      headers: { "sec-websocket-protocol": `bearer.${ALICE}` },
    });
    assertEquals(lone.status, 400);
    assert(!lone.body.includes(ALICE));
  } finally {
    await t.stop();
  }
});

Deno.test("auth is off without tokens: a token given is ignored", async () => {
  const root = await tempDir();
  const trades = await Stream.open("trades", { schema: SCHEMA, root });
  const server = serve([trades], { port: 0, onListen: () => {} });
  try {
    assertEquals((await get(`${server.url}/trades/head`)).status, 200);
    assertEquals((await get(`${server.url}/trades/head`, bearer(WRONG))).status, 200);
    const sub = await TestSub.open(
      `ws://127.0.0.1:${server.addr.port}/trades?access_token=${WRONG}`,
    );
    assert(sub.greeting !== null);
    await sub.close();
  } finally {
    await server.shutdown();
    await rmrf(root);
  }
});

Deno.test("auth tokens file is checked, and errors never quote a token", () => {
  const bad: [unknown, string][] = [
    [[], "top level"],
    [{ tokens: [] }, "lists no token"],
    [{ tokens: [], extra: 1 }, 'unknown key "extra"'],
    [{ tokens: [{ token: "short", streams: ["*"] }] }, "tokens[0].token must be 16-512"],
    [{ tokens: [{ token: "has space 0123456789", streams: ["*"] }] }, "tokens[0].token"],
    [{ tokens: [{ token: ALICE, streams: [] }] }, "tokens[0].streams"],
    [{ tokens: [{ token: ALICE, streams: ["_bad"] }] }, "is not a stream name"],
    [{ tokens: [{ token: ALICE, sha256: sha256(ALICE), streams: ["*"] }] }, "both"],
    [{ tokens: [{ sha256: "XYZ", streams: ["*"] }] }, "sha256 must be 64"],
    [{ tokens: [{ streams: ["*"] }] }, 'needs "token" or "sha256"'],
    [{ tokens: [{ token: ALICE, streams: ["*"], role: "x" }] }, 'unknown key "tokens[0].role"'],
    [{
      tokens: [{ token: ALICE, streams: ["a"] }, { sha256: sha256(ALICE), streams: ["b"] }],
    }, "listed twice"],
    [{
      tokens: [{ name: "x", token: ALICE, streams: ["a"] }, {
        name: "x",
        token: OPS,
        streams: ["b"],
      }],
    }, "used twice"],
  ];
  for (const [json, want] of bad) {
    const err = assertThrows(() => TokenTable.parse(json), TypeError, want);
    assert(!err.message.includes(ALICE) && !err.message.includes(OPS), err.message);
  }
  const t = TokenTable.parse(TOKENS);
  assertEquals(t.names, ["alice", "ops", "bob"]);
  assertEquals(t.lookup(BOB)?.name, "bob");
  assertEquals(t.lookup(ALICE + "x"), null);
  assertEquals(t.lookup(""), null);
  // Where a request's token is found.
  const req = (url: string, headers: Record<string, string> = {}) => {
    const r = new Request(url, { headers });
    return findToken(r, new URL(r.url), true);
  };
  assertEquals(req("http://h/t", bearer("abc")), { ok: true, token: "abc", carrier: "header" });
  assertEquals(req("http://h/t", { authorization: "bearer   abc  " }), {
    ok: true,
    token: "abc",
    carrier: "header",
  });
  assertEquals(req("http://h/t", { "sec-websocket-protocol": "streamcast, bearer.xyz" }), {
    ok: true,
    token: "xyz",
    carrier: "subprotocol",
  });
  assertEquals(req("http://h/t?access_token=q"), { ok: true, token: "q", carrier: "query" });
  assertEquals(req("http://h/t"), { ok: true, token: null, carrier: null });
  assertEquals(req("http://h/t?access_token=a&access_token=b").ok, false);
  assertEquals(req("http://h/t", { "sec-websocket-protocol": "bearer.a, bearer.b" }).ok, false);
});

Deno.test("auth never prints a token: serve --tokens with debug logs, every carrier, bad tokens", async () => {
  const dir = await tempDir("streamcast-auth-");
  const schema = join(dir, "schema.json");
  const tokens = join(dir, "tokens.json");
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  await Deno.writeTextFile(tokens, JSON.stringify(TOKENS));
  const secrets = [ALICE, OPS, BOB, WRONG];
  try {
    for (const format of ["json", "text"]) {
      const s = await serveCli(
        [
          ...["--root", join(dir, format), "--port", "0", "--tokens", tokens],
          ...["--stream", `trades=${schema}`, "--stream", `book=${schema}`, "--stdin", "trades"],
          ...["--log-level", "debug", "--log-format", format],
        ],
        { stdin: true },
      );
      try {
        await s.write(JSON.stringify(row(1)) + "\n" + `{"seq":"x"}\n`);
        await s.waitStderr(/ingest_reject/);
        const ws = s.url.replace("http", "ws");
        const subs = [
          new TestSub(`${ws}/trades?offset=1&access_token=${ALICE}`),
          new TestSub(`${ws}/trades?offset=1&access_token=${WRONG}`),
          new TestSub(`${ws}/book?offset=1&access_token=${ALICE}`),
          new TestSub(`${ws}/trades?ofset=1&access_token=${OPS}`),
          new TestSub(`${ws}/nope?access_token=${OPS}`),
        ];
        const proto = new WebSocket(`${ws}/trades?offset=1`, ["streamcast", `bearer.${OPS}`]);
        const hdr = new WebSocket(`${ws}/trades?offset=1`, denoWsOptions({ headers: bearer(BOB) }));
        for (const w of [proto, hdr]) w.onerror = () => {};
        await until(() => subs.every((x) => x.greeting !== null || x.closed !== null), 10_000);
        await get(`${s.url}/trades/head?access_token=${WRONG}`);
        await get(`${s.url}/book/head`, bearer(ALICE));
        const metrics = await get(`${s.url}/_/metrics`, bearer(OPS));
        assertEquals(metrics.status, 200);
        for (const secret of secrets) {
          assert(!metrics.text.includes(secret), "metrics hold a token");
        }
        await s.waitStderr(/subscribe/);
        for (const x of subs) await x.close();
        for (const w of [proto, hdr]) w.close();
        assertEquals(await s.interrupt(), 0);
        const err = s.stderr();
        // The events are there, naming the holder...
        assert(/alice/.test(err) && /denied/.test(err) && /refused/.test(err), err);
        // ...and no token, in any carrier, good or bad, even at debug.
        for (const secret of secrets) {
          assert(!err.includes(secret), `stderr (${format}) holds a token:\n${err}`);
          assert(!err.includes(secret.slice(0, 16)), `stderr (${format}) holds part of a token`);
        }
      } finally {
        await s.stop();
      }
    }
  } finally {
    await rmrf(dir);
  }
});

/**
 * Deno's WebSocket takes an options object (headers, protocols, client); the
 * DOM typings some test files load know only `string | string[]`.
 */
function denoWsOptions(o: Record<string, unknown>): string[] {
  return o as unknown as string[];
}

Deno.test("auth: tail and head take --token (or STREAMCAST_TOKEN)", async () => {
  const t = await setup();
  const cli = new URL("../../../cli.ts", import.meta.url).pathname;
  const run = async (args: string[], env: Record<string, string> = {}) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", cli, ...args],
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    return {
      code: out.code,
      out: new TextDecoder().decode(out.stdout),
      err: new TextDecoder().decode(out.stderr),
    };
  };
  try {
    const refused = await run(["head", `${t.ws}/trades`]);
    assertEquals(refused.code, 1);
    const head = await run(["head", `${t.ws}/trades`, "--token", ALICE]);
    assertEquals(head.code, 0, head.err);
    assertEquals(JSON.parse(head.out).end_offset, 11);
    const viaEnv = await run(["head", `${t.ws}/trades`], { STREAMCAST_TOKEN: ALICE });
    assertEquals(viaEnv.code, 0, viaEnv.err);
    assert(!viaEnv.err.includes(ALICE) && !head.err.includes(ALICE), "the token is never printed");
    const tail = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", cli, "tail", `${t.ws}/trades`, "--offset", "1", "--token", ALICE],
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const reader = tail.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    const deadline = Date.now() + 15_000;
    while (text.split("\n").length <= 10 && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    tail.kill("SIGINT");
    reader.releaseLock();
    await tail.stdout.cancel().catch(() => {});
    assertEquals((await tail.status).code, 0);
    assertEquals(text.split("\n").filter(Boolean).map((l) => JSON.parse(l)[0]), [
      1,
      2,
      3,
      4,
      5,
      6,
      7,
      8,
      9,
      10,
    ]);
  } finally {
    await t.stop();
  }
});
