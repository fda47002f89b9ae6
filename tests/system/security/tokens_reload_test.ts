// `serve --tokens FILE` reloads the file on SIGHUP: new tokens work, removed
// ones are refused for new requests while open subscriptions stay, and a bad
// file keeps the old tokens, says why (naming the file, never a token) and
// never stops the server.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir, until } from "../../harness/util.ts";
import { TestSub } from "../../harness/subscriber.ts";
import { rawRequest, row, SCHEMA, serveCli, type Served } from "../../harness/security.ts";

const ALICE = "alice-0123456789abcdef0123456789"; // trades; removed by the reload
const OPS = "ops-0123456789abcdef0123456789abcd"; // everything, then trades only
const BOB = "bob-0123456789abcdef0123456789abcd"; // added by the reload
const SHORT = "too-short-tok"; // a bad token in a bad file
const SECRETS = [ALICE, OPS, BOB, SHORT];

const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

/** Writes the tokens file the way the docs say: beside it, then renamed into place. */
async function writeTokens(path: string, content: unknown): Promise<void> {
  const tmp = `${path}.tmp`;
  await Deno.writeTextFile(tmp, typeof content === "string" ? content : JSON.stringify(content));
  await Deno.rename(tmp, path);
}

/** The status of an upgrade to `path` with `token` in the Authorization header. */
async function upgrade(port: number, path: string, token: string): Promise<number> {
  return (await rawRequest(port, path, { upgrade: true, headers: bearer(token) })).status;
}

async function status(url: string, token: string): Promise<number> {
  const res = await fetch(url, { headers: bearer(token) });
  await res.body?.cancel();
  return res.status;
}

/** Sends SIGHUP and waits for the `count`th line matching `pattern`. */
async function hup(s: Served, pattern: RegExp, count: number): Promise<void> {
  s.signal("SIGHUP");
  const global = new RegExp(pattern.source, "g");
  await until(
    () => (s.stderr().match(global)?.length ?? 0) >= count || !s.running(),
    10_000,
    `${pattern} #${count}`,
  ).catch((err) => {
    throw new Error(`${err.message}; stderr:\n${s.stderr()}`);
  });
  assert(s.running(), `serve exited after SIGHUP:\n${s.stderr()}`);
}

Deno.test("tokens reload on SIGHUP; a bad file keeps the old tokens and the server", async () => {
  const dir = await tempDir();
  const schema = join(dir, "schema.json");
  const tokens = join(dir, "tokens.json");
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  await writeTokens(tokens, {
    tokens: [
      { name: "alice", token: ALICE, streams: ["trades"] },
      { name: "ops", token: OPS, streams: ["*"] },
    ],
  });
  const s = await serveCli(
    [
      ...["--root", join(dir, "data"), "--port", "0", "--tokens", tokens],
      ...["--stream", `trades=${schema}`, "--stream", `book=${schema}`, "--stdin", "trades"],
    ],
    { stdin: true },
  );
  let sub: TestSub | null = null;
  try {
    const { port, url } = s;
    const ws = url.replace("http", "ws");
    await s.write([1, 2, 3].map((i) => JSON.stringify(row(i))).join("\n") + "\n");

    // Before: the file as started.
    assertEquals(await upgrade(port, "/trades", ALICE), 101);
    assertEquals(await upgrade(port, "/book", ALICE), 403);
    assertEquals(await upgrade(port, "/book", OPS), 101);
    assertEquals(await upgrade(port, "/trades", BOB), 401);
    assertEquals(await status(`${url}/_/metrics`, OPS), 200);
    // A subscription opened with the token about to be removed.
    sub = await TestSub.open(`${ws}/trades?offset=1&access_token=${ALICE}`);
    await sub.waitLines(3);

    // Reload: alice removed, bob added, ops narrowed to trades.
    await writeTokens(tokens, {
      tokens: [
        { name: "bob", token: BOB, streams: ["trades", "book"] },
        { name: "ops", token: OPS, streams: ["trades"] },
      ],
    });
    await hup(s, /reloaded \S*tokens\.json: 2 tokens/, 1);
    assertEquals(await upgrade(port, "/trades", ALICE), 401);
    assertEquals(await status(`${url}/trades/head`, ALICE), 401);
    assertEquals(await upgrade(port, "/trades", BOB), 101);
    assertEquals(await upgrade(port, "/book", BOB), 101);
    assertEquals(await upgrade(port, "/book", OPS), 403);
    assertEquals(await status(`${url}/_/metrics`, OPS), 403);
    // The subscription opened with alice's token stays, and gets new rows.
    await s.write([4, 5].map((i) => JSON.stringify(row(i))).join("\n") + "\n");
    await sub.waitLines(5);
    assertEquals(sub.offsets(), [1, 2, 3, 4, 5]);
    assertEquals(sub.closed, null);

    // Bad files: each keeps the tokens in force, says why, and the server serves on.
    const bad: [string | Record<string, unknown> | null, RegExp][] = [
      [
        '{"tokens": [',
        /SIGHUP: tokens file \S*tokens\.json is not JSON; the tokens loaded before stay in force/,
      ],
      [
        { tokens: [{ name: "short", token: SHORT, streams: ["*"] }] },
        /SIGHUP: tokens file \S*tokens\.json: tokens\[0\]\.token must be 16-512 characters/,
      ],
      [{ tokens: [] }, /SIGHUP: tokens file \S*tokens\.json: "tokens" lists no token/],
      [null, /SIGHUP: cannot read tokens file \S*tokens\.json: no such file/],
    ];
    for (const [content, said] of bad) {
      if (content === null) await Deno.remove(tokens);
      else await writeTokens(tokens, content);
      await hup(s, said, 1);
      assertEquals(await upgrade(port, "/trades", BOB), 101, `after ${said}`);
      assertEquals(await upgrade(port, "/book", OPS), 403, `after ${said}`);
      assertEquals(await upgrade(port, "/trades", ALICE), 401, `after ${said}`);
      assertEquals(await status(`${url}/_/health`, BOB), 200);
    }
    assertEquals(s.stderr().match(/tokens loaded before stay in force/g)?.length, bad.length);

    // A good file again is taken, after the bad ones.
    await writeTokens(tokens, { tokens: [{ name: "alice", token: ALICE, streams: ["*"] }] });
    await hup(s, /reloaded \S*tokens\.json: 1 token\b/, 1);
    assertEquals(await upgrade(port, "/book", ALICE), 101);
    assertEquals(await upgrade(port, "/trades", BOB), 401);

    for (const secret of SECRETS) assert(!s.stderr().includes(secret), "stderr holds a token");
    await sub.close();
    sub = null;
    assertEquals(await s.interrupt(), 0);
  } finally {
    await sub?.close();
    await s.stop();
    await rmrf(dir);
  }
});

Deno.test("tokens reload logs JSON events with --log-format json", async () => {
  const dir = await tempDir();
  const schema = join(dir, "schema.json");
  const tokens = join(dir, "tokens.json");
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  await writeTokens(tokens, { tokens: [{ name: "ops", token: OPS, streams: ["*"] }] });
  const s = await serveCli([
    ...["--root", join(dir, "data"), "--port", "0", "--tokens", tokens],
    ...["--stream", `trades=${schema}`, "--log-format", "json"],
  ]);
  try {
    await writeTokens(tokens, { tokens: [{ name: "bob", token: BOB, streams: ["trades"] }] });
    await hup(s, /"event":"tokens_reloaded"/, 1);
    await writeTokens(tokens, "[]");
    await hup(s, /"event":"tokens_reload_failed"/, 1);
    const events = s.stderr().split("\n").filter((l) => l.startsWith("{")).map((l) =>
      JSON.parse(l)
    );
    const ok = events.find((e) => e.event === "tokens_reloaded");
    assertEquals([ok.level, ok.file, ok.tokens], ["info", tokens, 1]);
    const failed = events.find((e) => e.event === "tokens_reload_failed");
    assertEquals([failed.level, failed.file], ["error", tokens]);
    assert(/must be an object/.test(failed.error), failed.error);
    assertEquals(await upgrade(s.port, "/trades", BOB), 101);
    assertEquals(await upgrade(s.port, "/trades", OPS), 401);
    for (const secret of SECRETS) assert(!s.stderr().includes(secret), "stderr holds a token");
    assertEquals(await s.interrupt(), 0);
  } finally {
    await s.stop();
    await rmrf(dir);
  }
});
