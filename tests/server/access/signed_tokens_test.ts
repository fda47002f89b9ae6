// Signed tokens against a real `serve` process: HS256 (a secret file), ES256
// and EdDSA (PEM public keys), a JWKS with two keys told apart by `kid`, all
// beside a tokens file; then every refusal, each answered 401 naming which
// check failed, and a missing grant answered 403.
import { join } from "node:path";
import { assert, assertEquals } from "../../harness/assert.ts";
import { rmrf, tempDir } from "../../harness/util.ts";
import { rawRequest, SCHEMA, serveCli, serveCliExit, type Served } from "../../harness/security.ts";
import { secretText, sign, type TestKey, testKey, unsigned } from "../../harness/jwt.ts";

const STATIC = "static-0123456789abcdef0123456789"; // a tokens-file entry beside the JWTs
const DOTTED = "static.0123456789.abcdef0123456789"; // one with two dots: the file's still
const ISSUER = "https://issuer.test";
const AUDIENCE = "streamcast-test";
const READ = { streamcast: { read: ["trades"] } };

interface Setup {
  dir: string;
  served: Served;
  secret: Uint8Array;
  es: TestKey;
  ed: TestKey;
  rs: TestKey; // RS256: no key of this server's allows it
  stranger: TestKey; // no file has it
}

async function setup(): Promise<Setup> {
  const dir = await tempDir();
  const secretFile = join(dir, "secret");
  const text = secretText();
  await Deno.writeTextFile(secretFile, text + "\n"); // the trailing newline is not the key's
  const [es, ed, rs, stranger] = await Promise.all([
    testKey("ES256"),
    testKey("EdDSA"),
    testKey("RS256"),
    testKey("ES256"),
  ]);
  const pemFile = join(dir, "keys.pem");
  await Deno.writeTextFile(pemFile, es.pem + "\n" + ed.pem);
  await Deno.writeTextFile(join(dir, "schema.json"), JSON.stringify(SCHEMA));
  await Deno.writeTextFile(
    join(dir, "tokens.json"),
    JSON.stringify({
      tokens: [
        { name: "static", token: STATIC, streams: ["trades"] },
        { name: "dotted", token: DOTTED, streams: ["trades"] },
      ],
    }),
  );
  const served = await serveCli([
    ...["--root", join(dir, "data"), "--port", "0"],
    ...["--stream", `trades=${join(dir, "schema.json")}`],
    ...["--stream", `book=${join(dir, "schema.json")}`],
    ...["--tokens", join(dir, "tokens.json"), "--jwt-keys", pemFile],
    ...["--jwt-secret-file", secretFile, "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE],
    ...["--max-token-bytes", "2048"],
  ]);
  return {
    dir,
    served,
    secret: new TextEncoder().encode(text),
    es,
    ed,
    rs,
    stranger,
  };
}

async function head(s: Served, token: string, stream = "trades") {
  const res = await fetch(`${s.url}/${stream}/head`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const body = await res.json();
  return { status: res.status, body, challenge: res.headers.get("www-authenticate") };
}

const ok = { iss: ISSUER, aud: AUDIENCE };

Deno.test("signed tokens: HS256, ES256 and EdDSA read beside a tokens file; every bad one is 401 naming why", async () => {
  const t = await setup();
  try {
    const s = t.served;
    for (const key of [t.secret, t.es, t.ed]) {
      const jwt = await sign(key, { ...ok, ...READ });
      assertEquals((await head(s, jwt)).status, 200, `alg of ${JSON.stringify(key)}`);
      // The grant is the claim's: another stream is 403.
      assertEquals((await head(s, jwt, "book")).status, 403);
    }
    assertEquals((await head(s, STATIC)).status, 200);
    assertEquals((await head(s, DOTTED)).status, 200);
    // Each carrier: the subprotocol and the query too.
    const jwt = await sign(t.es, { ...ok, ...READ });
    const up = await rawRequest(s.port, "/trades", {
      upgrade: true,
      headers: { "sec-websocket-protocol": `streamcast, bearer.${jwt}` },
    });
    assertEquals(up.status, 101);
    assertEquals((await rawRequest(s.port, `/trades/head?access_token=${jwt}`)).status, 200);

    const refusals: [string, string][] = [
      ["expired", await sign(t.es, { ...ok, ...READ, expIn: -5 })],
      ["not_yet_valid", await sign(t.es, { ...ok, ...READ, nbfIn: 300 })],
      ["bad_signature", await sign(t.stranger, { ...ok, ...READ })],
      ["wrong_alg", await sign(t.rs, { ...ok, ...READ })], // no RS256 key on this server
      ["alg_none", unsigned({ sub: "x", exp: 4e9, iss: ISSUER, aud: AUDIENCE, ...READ })],
      ["wrong_issuer", await sign(t.es, { iss: "https://other.test", aud: AUDIENCE, ...READ })],
      ["wrong_audience", await sign(t.es, { iss: ISSUER, aud: "other", ...READ })],
      ["no_exp", await sign(t.es, { ...ok, ...READ, expIn: null })],
      ["oversized", await sign(t.es, { ...ok, streamcast: { read: ["x".repeat(2100)] } })],
      ["malformed", "eyJhbGciOi.eyJzdWIi.c2ln"],
      ["malformed", await sign(t.es, { ...ok, streamcast: { read: "trades" } })],
    ];
    for (const [why, token] of refusals) {
      const r = await head(s, token);
      assertEquals([r.status, r.body.why], [401, why], `${why}: ${JSON.stringify(r.body)}`);
      assertEquals(
        r.challenge,
        `Bearer realm="streamcast", error="invalid_token", error_description="${why}"`,
      );
      // A refused upgrade is refused before it, the same way.
      assertEquals(
        (await rawRequest(s.port, "/trades", {
          upgrade: true,
          headers: { authorization: `Bearer ${token}` },
        })).status,
        401,
      );
    }
    // A signed token's bytes never reach the log.
    for (const [, token] of refusals) assert(!s.stderr().includes(token.split(".")[2] || token));
  } finally {
    await t.served.stop();
    await rmrf(t.dir);
  }
});

Deno.test("signed tokens: a JWKS with two keys picks the key by kid", async () => {
  const dir = await tempDir();
  const [a, b, other] = await Promise.all([
    testKey("RS256", "a"),
    testKey("EdDSA", "b"),
    testKey("RS256", "c"),
  ]);
  await Deno.writeTextFile(join(dir, "jwks.json"), JSON.stringify({ keys: [a.jwk, b.jwk] }));
  await Deno.writeTextFile(join(dir, "schema.json"), JSON.stringify(SCHEMA));
  const s = await serveCli([
    ...["--root", join(dir, "data"), "--port", "0"],
    ...["--stream", `trades=${join(dir, "schema.json")}`, "--jwt-keys", join(dir, "jwks.json")],
  ]);
  try {
    assertEquals((await head(s, await sign(a, READ, "a"))).status, 200);
    assertEquals((await head(s, await sign(b, READ, "b"))).status, 200);
    // No kid: every key of the token's alg is tried.
    assertEquals((await head(s, await sign(a, READ))).status, 200);
    // Signed by a, named b: b is EdDSA, so no key of RS256 has kid b.
    assertEquals((await head(s, await sign(a, READ, "b"))).body.why, "bad_signature");
    // A key not in the set, under a kid the set has.
    assertEquals((await head(s, await sign(other, READ, "a"))).body.why, "bad_signature");
    // A valid token without a grant for the stream.
    const none = await sign(a, { streamcast: { read: ["book"] } }, "a");
    assertEquals((await head(s, none)).status, 403);
    // No streamcast claim: valid, grants nothing.
    assertEquals((await head(s, await sign(a, {}, "a"))).status, 403);
  } finally {
    await s.stop();
    await rmrf(dir);
  }
});

Deno.test("signed tokens: SIGHUP reloads the keys; a bad key file keeps the keys in force", async () => {
  const dir = await tempDir();
  const [a, b] = await Promise.all([testKey("ES256", "a"), testKey("EdDSA", "b")]);
  const jwks = join(dir, "jwks.json");
  const write = async (content: string) => {
    await Deno.writeTextFile(`${jwks}.tmp`, content);
    await Deno.rename(`${jwks}.tmp`, jwks);
  };
  await write(JSON.stringify({ keys: [a.jwk] }));
  await Deno.writeTextFile(join(dir, "schema.json"), JSON.stringify(SCHEMA));
  const s = await serveCli([
    ...["--root", join(dir, "data"), "--port", "0"],
    ...["--stream", `trades=${join(dir, "schema.json")}`, "--jwt-keys", jwks],
  ]);
  try {
    const byA = await sign(a, READ, "a");
    const byB = await sign(b, READ, "b");
    assertEquals((await head(s, byA)).status, 200);
    assertEquals((await head(s, byB)).body.why, "wrong_alg");

    await write(JSON.stringify({ keys: [b.jwk] }));
    s.signal("SIGHUP");
    await s.waitStderr(/reloaded .*jwks\.json: 1 key/);
    assertEquals((await head(s, byB)).status, 200);
    assertEquals((await head(s, byA)).body.why, "wrong_alg");

    await write("{ not json");
    s.signal("SIGHUP");
    await s.waitStderr(/SIGHUP: .*jwks\.json.*the keys loaded before stay in force/);
    assert(s.running(), "serve kept running");
    assertEquals((await head(s, byB)).status, 200);
  } finally {
    await s.stop();
    await rmrf(dir);
  }
});

Deno.test("signed tokens: bad key files and flags stop the start with one line naming what is wrong", async () => {
  const dir = await tempDir();
  try {
    await Deno.writeTextFile(join(dir, "schema.json"), JSON.stringify(SCHEMA));
    const base = [
      "--root",
      join(dir, "data"),
      "--port",
      "0",
      "--stream",
      `trades=${join(dir, "schema.json")}`,
    ];
    const short = join(dir, "short");
    await Deno.writeTextFile(short, "only-twenty-bytes-xx\n");
    const priv = join(dir, "private.json");
    const k = await testKey("ES256");
    await Deno.writeTextFile(priv, JSON.stringify({ keys: [{ ...k.jwk, d: "AAAA" }] }));
    const notKeys = join(dir, "not.pem");
    await Deno.writeTextFile(notKeys, "hello\n");
    const cases: [string[], RegExp][] = [
      [["--jwt-issuer", "x"], /--jwt-issuer needs --jwt-keys or --jwt-secret-file/],
      [
        ["--jwt-secret-file", short],
        /--jwt-secret-file .*short: an HS256 secret needs at least 32 bytes, got 20/,
      ],
      [["--jwt-keys", priv], /--jwt-keys .*private\.json: keys\[0\] is a private key/],
      [["--jwt-keys", notKeys], /--jwt-keys .*not\.pem: no "-----BEGIN PUBLIC KEY-----" block/],
      [["--jwt-keys", join(dir, "missing.json")], /cannot read .*missing\.json/],
      [["--jwt-secret-file", short, "--max-token-bytes", "10"], /--max-token-bytes/],
    ];
    for (const [args, want] of cases) {
      const { code, stderr } = await serveCliExit([...base, ...args]);
      assertEquals(code, 2, `${args.join(" ")}: ${stderr}`);
      assert(want.test(stderr), `${args.join(" ")}: ${stderr}`);
      assertEquals(stderr.trim().split("\n").length, 1, stderr);
    }
  } finally {
    await rmrf(dir);
  }
});
