/**
 * Mints a signed token for a server started with `--jwt-secret-file` (HS256)
 * or `--jwt-keys` (given the private key as PKCS#8 PEM), with npm `jose`.
 * The token is printed on stdout, so the script is a `--token-command`:
 *
 * ```sh
 * deno run -A examples/mint_token.ts --secret-file secret --sub alice --ttl 300 \
 *   --read trades --where '{"trades":{"symbol":["BTC-USD"]}}'
 * deno run -A cli.ts tail ws://127.0.0.1:8765/trades \
 *   --token-command 'deno run -A examples/mint_token.ts --secret-file secret --sub alice --read trades'
 * ```
 *
 * Flags: `--secret-file FILE` (HS256; a trailing newline is not the key's)
 * or `--key-file FILE --alg RS256|ES256|EdDSA [--kid KID]`; `--sub NAME`;
 * `--ttl SECONDS` [300]; `--read`, `--publish` (repeatable stream names or
 * `*`); `--where JSON` (`{"STREAM": FILTER}`); `--admin`; `--iss`, `--aud`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { mintToken } from "./mint_token.ts";
 * import { SignedTokens } from "../server/mod.ts";
 * const secret = new TextEncoder().encode("0123456789abcdef0123456789abcdef");
 * const token = await mintToken(secret, "HS256", {
 *   sub: "alice",
 *   ttlS: 300,
 *   streamcast: { read: ["trades"], where: { trades: { symbol: ["BTC-USD"] } } },
 * });
 * const check = await (await SignedTokens.from({ secret })).verify(token);
 * equal(check.ok && check.grant.name, "alice");
 * equal(check.ok && check.grant.mayRead("trades"), true);
 * equal(check.ok && check.grant.whereFor("trades") !== null, true);
 * ```
 *
 * @module
 */

import { type CryptoKey, importPKCS8, SignJWT } from "jose";
import { parseArgs } from "node:util";

/** What a minted token says. */
export interface MintOptions {
  /** The holder (`sub`). */
  sub: string;
  /** Seconds until it expires (`exp`). */
  ttlS: number;
  /** The grant (`streamcast` claim): `read`, `publish`, `where`, `admin`. */
  streamcast: Record<string, unknown>;
  /** `iss`, when the server checks one. */
  iss?: string;
  /** `aud`, when the server checks one. */
  aud?: string;
  /** `kid` in the header, for a JWKS with several keys. */
  kid?: string;
}

/** Signs a token with `key` (an HS256 secret, or a private key for `alg`). */
export async function mintToken(
  key: Uint8Array | CryptoKey,
  alg: "HS256" | "RS256" | "ES256" | "EdDSA",
  o: MintOptions,
): Promise<string> {
  const jwt = new SignJWT({ streamcast: o.streamcast })
    .setProtectedHeader({ alg, ...(o.kid ? { kid: o.kid } : {}) })
    .setSubject(o.sub)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + o.ttlS);
  if (o.iss) jwt.setIssuer(o.iss);
  if (o.aud) jwt.setAudience(o.aud);
  return await jwt.sign(key);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      "secret-file": { type: "string" },
      "key-file": { type: "string" },
      alg: { type: "string" },
      kid: { type: "string" },
      sub: { type: "string" },
      ttl: { type: "string", default: "300" },
      read: { type: "string", multiple: true },
      publish: { type: "string", multiple: true },
      where: { type: "string" },
      admin: { type: "boolean" },
      iss: { type: "string" },
      aud: { type: "string" },
    },
  });
  if (!values.sub) throw new TypeError("--sub NAME is required");
  const streamcast: Record<string, unknown> = {};
  if (values.read) streamcast.read = values.read;
  if (values.publish) streamcast.publish = values.publish;
  if (values.where) streamcast.where = JSON.parse(values.where);
  if (values.admin) streamcast.admin = true;
  const o: MintOptions = {
    sub: values.sub,
    ttlS: Number(values.ttl),
    streamcast,
    ...(values.iss ? { iss: values.iss } : {}),
    ...(values.aud ? { aud: values.aud } : {}),
    ...(values.kid ? { kid: values.kid } : {}),
  };
  let token: string;
  if (values["secret-file"]) {
    let secret = await Deno.readFile(values["secret-file"]);
    if (secret.at(-1) === 0x0a) secret = secret.subarray(0, secret.length - 1);
    token = await mintToken(secret, "HS256", o);
  } else if (values["key-file"] && values.alg) {
    const alg = values.alg as "RS256" | "ES256" | "EdDSA";
    const key = await importPKCS8(await Deno.readTextFile(values["key-file"]), alg);
    token = await mintToken(key, alg, o);
  } else {
    throw new TypeError("give --secret-file FILE, or --key-file FILE --alg ALG");
  }
  console.log(token);
}

if (import.meta.main) await main();
