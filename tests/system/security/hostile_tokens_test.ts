// Hostile signed tokens against a real `serve` process that checks HS256 (a
// secret file), EdDSA and RS256 (PEM public keys), with an issuer and a
// --max-token-bytes of 2048: forged signatures and claims, expired and
// not-yet-valid tokens, wrong keys and algorithms, `alg: none`, an `alg`
// that is not a string, oversized tokens (in UTF-8 bytes), garbage, and
// claims of the wrong type, over every carrier and on routes that read,
// publish and subscribe. Each must get the 401 naming its check
// (docs/SPEC.md 3.8.1) — never a 5xx, a greeting or a row — and the server
// must stay up, store nothing from them, and serve a good token after.
// Seeded (tests/harness/seeds.ts): a fresh seed every run plus the
// regression seeds; STREAMCAST_FUZZ_SEED=N replays seed N.
import { assert, assertEquals } from "../../harness/assert.ts";
import { caseName, caseRng, type FuzzCase, fuzzCases, seedBanner } from "../../harness/seeds.ts";
import { rawRequest, row, SCHEMA } from "../../harness/security.ts";
import { b64url, signClaims, type TestKey, testKey } from "../../harness/jwt.ts";
import { type JwtServe, serveWithJwt } from "../../harness/jwt_serve.ts";
import { TestSub } from "../../harness/subscriber.ts";

console.log(seedBanner("hostile tokens"));

const ISSUER = "https://issuer.test";
const MAX_TOKEN_BYTES = 2048;
const ROWS = 20;

type Why =
  | "oversized"
  | "malformed"
  | "alg_none"
  | "wrong_alg"
  | "bad_signature"
  | "no_exp"
  | "expired"
  | "not_yet_valid"
  | "wrong_issuer";

/** A token and what the server must make of it (null: accepted). */
interface Hostile {
  kind: string;
  token: string;
  why: Why | null;
}

/** The keys a case signs with: the server's, and strangers' it has never seen. */
interface Keys {
  secret: Uint8Array;
  ed: TestKey;
  rs: TestKey;
  es: TestKey; // ES256: no key of the server's is for it
  strangerEd: TestKey;
  strangerRs: TestKey;
  strangerSecret: Uint8Array;
}

const ALG_OF = (k: Uint8Array | TestKey): string => k instanceof Uint8Array ? "HS256" : k.alg;

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)];
}

function int(r: () => number, lo: number, hi: number): number {
  return lo + Math.floor(r() * (hi - lo + 1));
}

const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

function randomText(r: () => number, alphabet: string, n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += alphabet[Math.floor(r() * alphabet.length)];
  return s;
}

function nowS(): number {
  return Math.floor(Date.now() / 1000);
}

/** Claims a good token carries (read and publish on trades, the server's issuer). */
function goodClaims(r: () => number, i: number): Record<string, unknown> {
  return {
    sub: `fuzz-${i}`,
    iss: ISSUER,
    iat: nowS(),
    exp: nowS() + int(r, 60, 86_400),
    streamcast: { read: ["trades"], publish: ["trades"] },
  };
}

/** The token `payload` signed (padded with a `pad` claim) whose UTF-8 length is the largest ≤ max. */
async function paddedTo(
  key: Uint8Array | TestKey,
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  max: number,
): Promise<string> {
  // Base64 makes 4 characters of 3 bytes: start a few bytes short of the estimate.
  const bare = new TextEncoder().encode(await signClaims(key, header, { ...payload, pad: "" }));
  let best: string | null = null;
  for (let n = Math.max(0, Math.floor((max - bare.length) * 3 / 4) - 4); n < max; n++) {
    const t = await signClaims(key, header, { ...payload, pad: "p".repeat(n) });
    if (new TextEncoder().encode(t).length > max) break;
    best = t;
  }
  assert(best !== null, "no padding fits");
  return best;
}

/** One hostile (or good) token, drawn from the case's generator. */
async function hostile(c: FuzzCase, keys: Keys): Promise<Hostile> {
  const r = caseRng(c, 0x70c3e);
  const signer = pick(r, [keys.secret, keys.ed, keys.rs]);
  const header: Record<string, unknown> = r() < 0.5
    ? { alg: ALG_OF(signer), typ: "JWT" }
    : { alg: ALG_OF(signer) };
  const claims = goodClaims(r, c.index);
  const kinds = [
    "good",
    "good_ed25519",
    "boundary",
    "forged_signature",
    "forged_claims",
    "expired",
    "not_yet_valid",
    "wrong_key",
    "wrong_alg",
    "alg_none",
    "alg_not_string",
    "oversized",
    "oversized_utf8",
    "garbage",
    "exp_type",
    "nbf_type",
    "claims_not_object",
    "grant_shape",
    "sub_shape",
    "wrong_issuer",
    "no_exp",
  ] as const;
  // Kinds added later draw from a generator of their own, so that the cases
  // kept in seeds.ts still make the tokens they were kept for.
  const later = caseRng(c, 0x1a7e5);
  const laterKinds = ["embedded_key", "hmac_with_public_key", "crit"] as const;
  const kind: typeof kinds[number] | typeof laterKinds[number] = later() < 0.15
    ? pick(later, laterKinds)
    : pick(r, kinds);
  const token = (why: Why | null, t: string): Hostile => ({ kind, token: t, why });
  switch (kind) {
    case "good":
      return token(null, await signClaims(signer, header, claims));
    case "good_ed25519":
      // JOSE's newer name for the same algorithm, checked by the same keys.
      return token(null, await signClaims(keys.ed, { ...header, alg: "Ed25519" }, claims));
    case "boundary":
      // Exactly at the limit (or one byte under, as base64 falls): still read.
      return token(null, await paddedTo(signer, header, claims, MAX_TOKEN_BYTES));
    case "forged_signature": {
      const good = await signClaims(signer, header, claims);
      const dot = good.lastIndexOf(".");
      // Not the last character: its low bits may be padding, which decoders ignore.
      const at = int(r, dot + 1, good.length - 2);
      const was = good[at];
      let now = was;
      while (now === was) now = pick(r, [...B64URL]);
      return token("bad_signature", good.slice(0, at) + now + good.slice(at + 1));
    }
    case "forged_claims": {
      // The claims changed under a good signature: more streams, admin, a later exp.
      const good = await signClaims(signer, header, claims);
      const [h, , s] = good.split(".");
      const forged = pick(r, [
        { ...claims, streamcast: { read: ["*"], publish: ["*"], admin: true } },
        { ...claims, exp: (claims.exp as number) + 1 },
        { ...claims, sub: "root" },
      ]);
      return token("bad_signature", `${h}.${b64url(JSON.stringify(forged))}.${s}`);
    }
    case "expired":
      return token(
        "expired",
        await signClaims(signer, header, { ...claims, exp: nowS() - int(r, 1, 10_000_000) }),
      );
    case "not_yet_valid":
      return token(
        "not_yet_valid",
        await signClaims(signer, header, { ...claims, nbf: nowS() + int(r, 30, 10_000_000) }),
      );
    case "wrong_key": {
      const stranger = pick(r, [keys.strangerSecret, keys.strangerEd, keys.strangerRs]);
      return token("bad_signature", await signClaims(stranger, { alg: ALG_OF(stranger) }, claims));
    }
    case "wrong_alg": {
      // ES256 (no key of the server's is for it), or a name no key is for.
      if (r() < 0.5) {
        return token("wrong_alg", await signClaims(keys.es, { alg: "ES256" }, claims));
      }
      const alg = pick(r, ["HS512", "RS384", "PS256", "ES512", "EdDSA448", "hs256", "", "é"]);
      return token("wrong_alg", await signClaims(signer, { alg }, claims));
    }
    case "alg_none": {
      const alg = pick(r, ["none", "None", "NONE", "nOnE"]);
      const good = await signClaims(signer, { alg }, claims);
      const sig = pick(r, ["", good.slice(good.lastIndexOf(".") + 1), "AAAA"]);
      return token("alg_none", good.slice(0, good.lastIndexOf(".") + 1) + sig);
    }
    case "alg_not_string": {
      const h = pick<Record<string, unknown>>(r, [
        { alg: 1 },
        { alg: null },
        { alg: true },
        { alg: ["HS256"] },
        { alg: { name: "HS256" } },
        { typ: "JWT" },
      ]);
      return token("malformed", await signClaims(signer, h, claims));
    }
    case "oversized": {
      // Over the limit before anything is parsed: a signed token, or any bytes with two dots.
      // (At most 6000 bytes, and a signed one's pad at most 4400, which base64 makes
      // ~5900: the query carrier must stay under the URL limit of 8192 bytes, or 414.)
      const n = int(r, MAX_TOKEN_BYTES + 1, 6000);
      if (r() < 0.5) {
        const pad = "p".repeat(Math.min(n, 4400));
        const t = await signClaims(signer, header, { ...claims, pad });
        return token("oversized", t);
      }
      return token("oversized", `${randomText(r, B64URL, n)}.${randomText(r, B64URL, 8)}.x`);
    }
    case "oversized_utf8": {
      // Under the limit in UTF-16 units, over it in UTF-8 bytes: "é" is two bytes.
      // (At most 1250: percent-encoded in the query, each is 6 of the URL's 8192 bytes.)
      const n = int(r, MAX_TOKEN_BYTES / 2 + 1, 1250);
      return token("oversized", `${"é".repeat(n)}.e.e`);
    }
    case "garbage": {
      const alphabet = B64URL + "+/=!*~$";
      const parts = [0, 1, 2].map(() => randomText(r, alphabet, int(r, 0, 300)));
      return token("malformed", parts.join("."));
    }
    case "exp_type": {
      const exp = pick(r, [String(nowS() + 600), true, null, {}, [nowS() + 600], "soon"]);
      return token("malformed", await signClaims(signer, header, { ...claims, exp }));
    }
    case "nbf_type": {
      const nbf = pick(r, [String(nowS() - 600), "0", "2000000000", true, {}, [0]]);
      return token("malformed", await signClaims(signer, header, { ...claims, nbf }));
    }
    case "claims_not_object": {
      const body = pick(r, ["[1,2]", '"claims"', "42", "null", '{"sub":"x"', "\u0000\u0001"]);
      return token("malformed", await signClaims(signer, header, new TextEncoder().encode(body)));
    }
    case "grant_shape": {
      const streamcast = pick<unknown>(r, [
        "trades",
        ["trades"],
        { read: "trades" },
        { read: [1] },
        { read: ["bad name!"] },
        { publish: { trades: true } },
        { where: [] },
        { where: { trades: "seq" } },
        { where: { trades: {} } },
        { where: { "bad name!": { seq: 1 } } },
        { admin: "yes" },
        { write: ["trades"] },
      ]);
      return token("malformed", await signClaims(signer, header, { ...claims, streamcast }));
    }
    case "sub_shape": {
      const sub = pick<unknown>(r, [42, "", "has space", "x".repeat(129), "é", null]);
      return token("malformed", await signClaims(signer, header, { ...claims, sub }));
    }
    case "wrong_issuer": {
      const { iss: _, ...without } = claims;
      const payload = r() < 0.3 ? without : { ...claims, iss: "https://evil.test" };
      return token("wrong_issuer", await signClaims(signer, header, payload));
    }
    case "embedded_key": {
      // A stranger's key, named in the header (jwk, jku, x5u) or by a kid: never the one checked.
      const stranger = pick(r, [keys.strangerEd, keys.strangerRs]);
      const h = pick<Record<string, unknown>>(r, [
        { jwk: stranger.jwk },
        { jku: "https://evil.test/jwks.json" },
        { x5u: "https://evil.test/cert.pem" },
        { kid: "../../../../dev/null" },
        { kid: 7 },
      ]);
      return token(
        "bad_signature",
        await signClaims(stranger, { alg: stranger.alg, ...h }, claims),
      );
    }
    case "hmac_with_public_key": {
      // HS256 keyed with the text of a public key the server holds: a public key is no secret.
      const pub = pick(r, [keys.ed, keys.rs]);
      const secret = new TextEncoder().encode(r() < 0.5 ? pub.pem : JSON.stringify(pub.jwk));
      return token("bad_signature", await signClaims(secret, { alg: "HS256" }, claims));
    }
    case "crit": {
      // Critical extensions the server does not know, or an unencoded payload.
      const h = pick<Record<string, unknown>>(r, [
        { crit: ["exp"], exp: 1 },
        { crit: ["x-unknown"], "x-unknown": true },
        { crit: ["b64"], b64: false },
        { crit: [] },
        { crit: "b64" },
      ]);
      return token("malformed", await signClaims(signer, { ...header, ...h }, claims));
    }
    case "no_exp": {
      const { exp: _, ...without } = claims;
      return token("no_exp", await signClaims(signer, header, without));
    }
  }
}

type Route =
  | "head"
  | "latest"
  | "subscribe"
  | "publish"
  | "publish_socket"
  | "streams"
  | "manifest"
  | "admin";
type Carrier = "header" | "query" | "subprotocol";

/** What one request with `token` got. */
interface Answer {
  status: number;
  body: string;
  challenge: string | null;
}

async function request(s: JwtServe, route: Route, carrier: Carrier, token: string) {
  const headers: Record<string, string> = {};
  let q = "";
  if (carrier === "header") headers.authorization = `Bearer ${token}`;
  else if (carrier === "query") q = `access_token=${encodeURIComponent(token)}`;
  else headers["sec-websocket-protocol"] = `streamcast, bearer.${token}`;
  const path = (p: string, more = "") => {
    const query = [more, q].filter((x) => x !== "").join("&");
    return query === "" ? p : `${p}?${query}`;
  };
  let a;
  switch (route) {
    case "head":
      a = await rawRequest(s.port, path("/trades/head"), { headers });
      break;
    case "latest":
      a = await rawRequest(s.port, path("/trades/latest"), { headers });
      break;
    case "subscribe":
      a = await rawRequest(s.port, path("/trades", "offset=0"), { headers, upgrade: true });
      break;
    case "publish_socket":
      a = await rawRequest(s.port, path("/trades/publish"), { headers, upgrade: true });
      break;
    case "streams":
      a = await rawRequest(s.port, path("/_/streams"), { headers });
      break;
    case "manifest":
      a = await rawRequest(s.port, path("/trades/manifest"), { headers });
      break;
    case "admin":
      a = await rawRequest(s.port, path("/_/streams/made-by-a-token"), {
        method: "PUT",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ schema: SCHEMA }),
      });
      break;
    case "publish":
      a = await rawRequest(s.port, path("/trades"), {
        method: "POST",
        headers: { ...headers, "content-type": "application/x-ndjson" },
        body: JSON.stringify(row(10_000)) + "\n",
      });
      break;
  }
  return { status: a.status, body: a.body, challenge: a.headers["www-authenticate"] ?? null };
}

/** The answer a token accepted on `route` gets. */
function acceptedStatus(route: Route): number {
  // The good tokens read and publish trades, and are no admin's.
  return route === "subscribe" || route === "publish_socket" ? 101 : route === "admin" ? 403 : 200;
}

async function endOffset(s: JwtServe): Promise<number> {
  const res = await fetch(`${s.url}/trades/head`, {
    headers: { authorization: `Bearer ${await s.admin()}` },
  });
  assertEquals(res.status, 200);
  return (await res.json()).end_offset;
}

async function makeKeys(s: JwtServe): Promise<Keys> {
  const [es, strangerEd, strangerRs] = await Promise.all([
    testKey("ES256"),
    testKey("EdDSA"),
    testKey("RS256"),
  ]);
  return {
    secret: s.secret,
    ed: s.keys.get("EdDSA")!,
    rs: s.keys.get("RS256")!,
    es,
    strangerEd,
    strangerRs,
    strangerSecret: crypto.getRandomValues(new Uint8Array(32)),
  };
}

async function start(): Promise<JwtServe> {
  return await serveWithJwt({
    streams: [{ name: "trades", schema: SCHEMA, key: ["seq"], publish: true }],
    keyAlgs: ["EdDSA", "RS256"],
    issuer: ISSUER,
    args: ["--max-token-bytes", String(MAX_TOKEN_BYTES)],
  });
}

/** Publishes the rows the cases must leave alone; returns their offsets. */
async function seed(s: JwtServe): Promise<number[]> {
  const res = await fetch(`${s.url}/trades`, {
    method: "POST",
    headers: { authorization: `Bearer ${await s.admin()}` },
    body: Array.from({ length: ROWS }, (_, i) => JSON.stringify(row(i))).join("\n") + "\n",
  });
  const body = await res.json();
  assertEquals(res.status, 200, JSON.stringify(body));
  return Array.from({ length: ROWS }, (_, i) => body.first + i);
}

/** The server is up, stored nothing from the cases, and serves a good token every row. */
async function stillServes(s: JwtServe, offsets: number[]): Promise<void> {
  assert(s.served.running(), `serve exited:\n${s.served.stderr()}`);
  assertEquals(await endOffset(s), offsets.at(-1)! + 1);
  const good = await s.token({ streamcast: { read: ["trades"] } });
  const sub = await TestSub.open(`${s.ws}/trades?offset=0&access_token=${good}`);
  try {
    assertEquals(sub.closed, null, JSON.stringify(sub.closed));
    await sub.waitLines(offsets.length);
    assertEquals(sub.offsets(), offsets);
  } finally {
    await sub.close();
  }
  assert(!/uncaught|panicked/i.test(s.served.stderr()), s.served.stderr());
}

Deno.test("hostile tokens: every forged, expired, wrong-key, oversized or malformed token gets the 401 naming its check, and the server serves on", async () => {
  const s = await start();
  try {
    const offsets = await seed(s);
    const keys = await makeKeys(s);
    const failures: string[] = [];
    let accepted = 0;
    for (const c of fuzzCases(240, "hostile_tokens")) {
      const t = await hostile(c, keys);
      const r = caseRng(c, 0xca77);
      // Publishing only with a token that may not publish: a row accepted here would move the end.
      // Routes added later draw from a generator of their own (see hostile()).
      const later = caseRng(c, 0x1a7e6);
      const route = later() < 0.3
        ? pick<Route>(later, ["publish_socket", "streams", "manifest", "admin"])
        : t.why === null
        ? pick<Route>(r, ["head", "latest", "subscribe"])
        : pick<Route>(r, ["head", "latest", "subscribe", "publish"]);
      const upgrade = route === "subscribe" || route === "publish_socket";
      const plain = /^[A-Za-z0-9._-]+$/.test(t.token);
      const carriers: Carrier[] = upgrade && plain
        ? ["header", "query", "subprotocol"]
        : t.kind === "oversized_utf8"
        ? ["query"] // a header carries Latin-1 only
        : ["header", "query"];
      const carrier = pick(r, carriers);
      const name = `${caseName(c)} (${t.kind}, ${route} by ${carrier})`;
      let a: Answer;
      try {
        a = await request(s, route, carrier, t.token);
      } catch (err) {
        failures.push(`${name}: ${(err as Error).message}`);
        continue;
      }
      if (t.why === null) {
        accepted++;
        if (a.status !== acceptedStatus(route)) {
          failures.push(`${name}: accepted token answered ${a.status} ${a.body.slice(0, 200)}`);
        }
        continue;
      }
      let why: unknown = null;
      try {
        why = JSON.parse(a.body).why;
      } catch {
        // not JSON: reported below
      }
      const challenge =
        `Bearer realm="streamcast", error="invalid_token", error_description="${t.why}"`;
      if (a.status !== 401 || why !== t.why || a.challenge !== challenge) {
        failures.push(
          `${name}: want 401 ${t.why}, got ${a.status} ${a.body.slice(0, 200)} ` +
            `(challenge ${a.challenge})`,
        );
      }
    }
    assert(accepted > 0, "no good token among the cases");
    assertEquals(failures, [], failures.join("\n"));
    await stillServes(s, offsets);
    // A signed token's signature never reaches the log.
    assert(!s.served.stderr().includes(b64url(keys.secret)));
  } finally {
    await s.stop();
  }
});

Deno.test("hostile tokens: the cases once accepted or misnamed", async () => {
  const s = await start();
  try {
    const offsets = await seed(s);
    const keys = await makeKeys(s);
    const claims = goodClaims(() => 0.5, 0);
    const cases: [string, string, Why | null][] = [
      // A string nbf was taken for a date not reached yet; it is not a date.
      [
        "nbf a string",
        await signClaims(keys.secret, { alg: "HS256" }, { ...claims, nbf: "0" }),
        "malformed",
      ],
      // An alg that is not a string was read as alg none.
      ["alg a number", await signClaims(keys.secret, { alg: 256 }, claims), "malformed"],
      ["alg missing", await signClaims(keys.secret, { typ: "JWT" }, claims), "malformed"],
      // JOSE's newer name for EdDSA with Ed25519 keys was refused wrong_alg.
      ["alg Ed25519", await signClaims(keys.ed, { alg: "Ed25519" }, claims), null],
      // The limit counted UTF-16 units: 1100 "é" are 2200 bytes.
      ["UTF-8 over the limit", `${"é".repeat(1100)}.e.e`, "oversized"],
      ["UTF-8 under the limit", `${"é".repeat(1000)}.e.e`, "malformed"],
    ];
    for (const [what, token, want] of cases) {
      const a = await request(s, "head", "query", token);
      if (want === null) assertEquals(a.status, 200, `${what}: ${a.body}`);
      else assertEquals([a.status, JSON.parse(a.body).why], [401, want], `${what}: ${a.body}`);
    }
    await stillServes(s, offsets);
  } finally {
    await s.stop();
  }
});
