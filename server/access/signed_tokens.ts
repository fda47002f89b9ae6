/**
 * Signed tokens (JWTs, RFC 7519): the keys that check them and the check.
 *
 * Keys come from `--jwt-keys FILE` — a JWKS (`{"keys": [...]}`: RSA keys for
 * RS256, P-256 keys for ES256, Ed25519 keys for EdDSA, which a token's
 * header may also call `Ed25519`; a key's `alg` and `kid` are honoured) or
 * PEM public keys (`-----BEGIN PUBLIC KEY-----`, as many as the file
 * holds) — and from `--jwt-secret-file FILE` (HS256: the
 * file's bytes are the key, one trailing newline ignored, at least
 * {@linkcode MIN_SECRET_BYTES} bytes). The signatures are checked by npm
 * `jose`.
 *
 * A token is checked in this order, the first failure naming it
 * ({@linkcode InvalidWhy}): its size in UTF-8 bytes (`oversized`, before
 * any parsing), its header (`malformed`, also for an `alg` that is not a
 * string), `alg: none` (`alg_none`), an `alg` no key allows
 * (`wrong_alg`; a token's `alg` picks only keys made for it, so an RS256
 * public key is never taken as an HS256 secret), the signature against every
 * key of that `alg` (and that `kid`, when the token names one:
 * `bad_signature`), then the claims: `exp` required (`no_exp`) and not past
 * (`expired`), `nbf` not ahead (`not_yet_valid`; `exp` or `nbf` not a
 * number: `malformed`), `iss` and `aud` when the server is given them
 * (`wrong_issuer`, `wrong_audience`), and the grant
 * claims (`malformed`, see `claim_grant.ts`). No clock tolerance: the
 * server's clock is the one that counts.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { SignJWT } from "jose";
 * import { SignedTokens } from "./signed_tokens.ts";
 * const secret = new TextEncoder().encode("s".repeat(32));
 * const tokens = await SignedTokens.from({ secret });
 * const jwt = await new SignJWT({ streamcast: { read: ["trades"] } })
 *   .setProtectedHeader({ alg: "HS256" })
 *   .setSubject("alice")
 *   .setExpirationTime("1h")
 *   .sign(secret);
 * const v = await tokens.verify(jwt);
 * equal(v.ok && v.grant.mayRead("trades"), true);
 * const bad = await tokens.verify(jwt.slice(0, -2) + "xx");
 * equal(!bad.ok && bad.why, "bad_signature");
 * ```
 *
 * @module
 */

import {
  type CryptoKey,
  decodeProtectedHeader,
  errors,
  importJWK,
  importSPKI,
  type JWK,
  jwtVerify,
} from "jose";
import { ClaimError, claimGrant } from "./claim_grant.ts";
import type { Grant } from "../auth.ts";

/** Fewest bytes an HS256 secret may have (RFC 7518 §3.2: at least the hash's size). */
export const MIN_SECRET_BYTES = 32;

/** Default of `maxTokenBytes`: the longest token the server reads. */
export const DEFAULT_MAX_TOKEN_BYTES = 8192;

/** The algorithms a key may be made for. */
export type TokenAlg = "RS256" | "ES256" | "EdDSA" | "HS256";

/** Why a signed token was refused (the 401's `detail` starts with it). */
export type InvalidWhy =
  | "oversized"
  | "malformed"
  | "alg_none"
  | "wrong_alg"
  | "bad_signature"
  | "no_exp"
  | "expired"
  | "not_yet_valid"
  | "wrong_issuer"
  | "wrong_audience";

/** What checking a token found. */
export type TokenCheck =
  | { ok: true; grant: Grant }
  | { ok: false; why: InvalidWhy; detail: string };

/** A verification key: its algorithm, its `kid` (null: none), the key. */
interface VerifyKey {
  alg: TokenAlg;
  kid: string | null;
  key: CryptoKey | Uint8Array;
}

/** What {@linkcode SignedTokens.from} takes. */
export interface SignedTokensOptions {
  /** A JWKS (`{"keys": [...]}`), parsed. */
  jwks?: unknown;
  /** PEM public keys (SPKI), one or more. */
  pem?: string;
  /** The HS256 secret (at least {@linkcode MIN_SECRET_BYTES} bytes). */
  secret?: Uint8Array;
  /** The `iss` a token must carry; null: not checked. @default {null} */
  issuer?: string | null;
  /** The `aud` a token must carry (one of); null: not checked. @default {null} */
  audience?: string | null;
  /** Longest token read, in bytes. @default {8192} */
  maxTokenBytes?: number;
}

/** Where {@linkcode SignedTokens.load} reads the keys from. */
export interface SignedTokensFiles {
  /** `--jwt-keys`: a JWKS or PEM public keys; null: none. */
  keys: string | null;
  /** `--jwt-secret-file`: the HS256 secret; null: none. */
  secret: string | null;
  /** `--jwt-issuer`; null: not checked. */
  issuer: string | null;
  /** `--jwt-audience`; null: not checked. */
  audience: string | null;
  /** `--max-token-bytes`. */
  maxTokenBytes: number;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

// The algorithm a JWK is for: its own `alg`, else what its type implies.
function jwkAlg(jwk: Record<string, unknown>, at: string): TokenAlg {
  const implied: TokenAlg | null = jwk.kty === "RSA"
    ? "RS256"
    : jwk.kty === "EC" && jwk.crv === "P-256"
    ? "ES256"
    : jwk.kty === "OKP" && jwk.crv === "Ed25519"
    ? "EdDSA"
    : null;
  if (implied === null) {
    throw new TypeError(
      `${at}: kty ${JSON.stringify(jwk.kty)} crv ${
        JSON.stringify(jwk.crv)
      } is none of RSA, EC P-256, OKP Ed25519`,
    );
  }
  if (jwk.alg !== undefined && (typeof jwk.alg !== "string" || tokenAlg(jwk.alg) !== implied)) {
    throw new TypeError(`${at}: alg ${JSON.stringify(jwk.alg)} does not fit a ${jwk.kty} key`);
  }
  return implied;
}

async function jwksKeys(jwks: unknown): Promise<VerifyKey[]> {
  if (!isObject(jwks) || !Array.isArray(jwks.keys)) {
    throw new TypeError(`a JWKS must be an object {"keys": [...]}`);
  }
  const out: VerifyKey[] = [];
  for (const [i, jwk] of jwks.keys.entries()) {
    const at = `keys[${i}]`;
    if (!isObject(jwk)) throw new TypeError(`${at} must be an object`);
    if (jwk.d !== undefined) throw new TypeError(`${at} is a private key; give the public key`);
    if (jwk.kty === "oct") throw new TypeError(`${at} is a secret; use --jwt-secret-file`);
    if (jwk.use !== undefined && jwk.use !== "sig") continue; // an encryption key
    const alg = jwkAlg(jwk, at);
    if (jwk.kid !== undefined && typeof jwk.kid !== "string") {
      throw new TypeError(`${at}.kid must be a string`);
    }
    let key: CryptoKey | Uint8Array;
    try {
      key = await importJWK({ ...(jwk as JWK), alg }, alg);
    } catch (err) {
      throw new TypeError(`${at}: ${(err as Error).message}`);
    }
    out.push({ alg, kid: (jwk.kid as string | undefined) ?? null, key });
  }
  if (out.length === 0) throw new TypeError(`the JWKS holds no signing key`);
  return out;
}

async function pemKeys(pem: string): Promise<VerifyKey[]> {
  const blocks = pem.match(/-----BEGIN PUBLIC KEY-----[\s\S]*?-----END PUBLIC KEY-----/g) ?? [];
  if (blocks.length === 0) {
    throw new TypeError(`no "-----BEGIN PUBLIC KEY-----" block (give public keys, SPKI PEM)`);
  }
  const out: VerifyKey[] = [];
  for (const [i, block] of blocks.entries()) {
    let found: VerifyKey | null = null;
    // The PEM does not say the algorithm: the first one its key imports for.
    for (const alg of ["RS256", "ES256", "EdDSA"] as const) {
      try {
        found = { alg, kid: null, key: await importSPKI(block, alg) };
        break;
      } catch {
        // Not a key for this algorithm: the next.
      }
    }
    if (found === null) {
      throw new TypeError(`PEM key ${i + 1} is none of RSA, EC P-256, Ed25519`);
    }
    out.push(found);
  }
  return out;
}

/**
 * The keys signed tokens are checked against, with the server's issuer and
 * audience (see the module doc).
 */
export class SignedTokens {
  readonly #keys: VerifyKey[];
  readonly #issuer: string | null;
  readonly #audience: string | null;
  /** Longest token read, in bytes. */
  readonly maxTokenBytes: number;

  private constructor(keys: VerifyKey[], options: SignedTokensOptions) {
    this.#keys = keys;
    this.#issuer = options.issuer ?? null;
    this.#audience = options.audience ?? null;
    this.maxTokenBytes = options.maxTokenBytes ?? DEFAULT_MAX_TOKEN_BYTES;
  }

  /** How many keys it holds. */
  get size(): number {
    return this.#keys.length;
  }

  /** The algorithms its keys allow. */
  get algorithms(): TokenAlg[] {
    return [...new Set(this.#keys.map((k) => k.alg))];
  }

  /** Keys from parsed parts; throws `TypeError` naming what is wrong. */
  static async from(options: SignedTokensOptions): Promise<SignedTokens> {
    const keys: VerifyKey[] = [];
    if (options.jwks !== undefined) keys.push(...await jwksKeys(options.jwks));
    if (options.pem !== undefined) keys.push(...await pemKeys(options.pem));
    if (options.secret !== undefined) {
      if (options.secret.length < MIN_SECRET_BYTES) {
        throw new TypeError(
          `an HS256 secret needs at least ${MIN_SECRET_BYTES} bytes, got ${options.secret.length}`,
        );
      }
      keys.push({ alg: "HS256", kid: null, key: options.secret });
    }
    if (keys.length === 0) throw new TypeError("no key to check signed tokens with");
    return new SignedTokens(keys, options);
  }

  /**
   * Reads the key files; errors name the file (never a secret's bytes).
   */
  static async load(files: SignedTokensFiles): Promise<SignedTokens> {
    const options: SignedTokensOptions = {
      issuer: files.issuer,
      audience: files.audience,
      maxTokenBytes: files.maxTokenBytes,
    };
    if (files.keys !== null) {
      const text = await Deno.readTextFile(files.keys);
      if (text.trimStart().startsWith("{")) {
        try {
          options.jwks = JSON.parse(text);
        } catch {
          throw new TypeError(`--jwt-keys ${files.keys} is not JSON (a JWKS) nor PEM`);
        }
      } else options.pem = text;
    }
    if (files.secret !== null) {
      let bytes = await Deno.readFile(files.secret);
      if (bytes.at(-1) === 0x0a) bytes = bytes.subarray(0, bytes.length - 1);
      if (bytes.at(-1) === 0x0d) bytes = bytes.subarray(0, bytes.length - 1);
      options.secret = bytes;
    }
    try {
      return await SignedTokens.from(options);
    } catch (err) {
      if (!(err instanceof TypeError)) throw err;
      const file = options.secret !== undefined && options.jwks === undefined &&
          options.pem === undefined
        ? `--jwt-secret-file ${files.secret}`
        : `--jwt-keys ${files.keys}`;
      throw new TypeError(`${file}: ${err.message}`);
    }
  }

  /**
   * Checks `token` at `now` (ms since the epoch) and returns its grant, or
   * why it is refused. Never throws for a token's content.
   */
  async verify(token: string, now: number = Date.now()): Promise<TokenCheck> {
    const fail = (why: InvalidWhy, detail: string): TokenCheck => ({ ok: false, why, detail });
    if (utf8Length(token, this.maxTokenBytes) > this.maxTokenBytes) {
      return fail("oversized", `the token is over ${this.maxTokenBytes} bytes`);
    }
    let header;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      return fail("malformed", "the token's header is not a JWS header");
    }
    const headerAlg: unknown = header.alg;
    if (typeof headerAlg !== "string") {
      return fail("malformed", "the token's header has no alg string");
    }
    if (headerAlg.toLowerCase() === "none") {
      return fail("alg_none", "an unsigned token (alg none)");
    }
    const alg = tokenAlg(headerAlg);
    let keys = this.#keys.filter((k) => k.alg === alg);
    if (keys.length === 0) {
      return fail(
        "wrong_alg",
        `alg ${JSON.stringify(headerAlg.slice(0, 16))} is not one the server's keys allow`,
      );
    }
    if (typeof header.kid === "string") {
      keys = keys.filter((k) => k.kid === null || k.kid === header.kid);
      if (keys.length === 0) return fail("bad_signature", "no key has the token's kid");
    }
    const options = {
      algorithms: [headerAlg],
      currentDate: new Date(now),
      requiredClaims: ["exp"],
      ...(this.#issuer !== null ? { issuer: this.#issuer } : {}),
      ...(this.#audience !== null ? { audience: this.#audience } : {}),
    };
    for (const k of keys) {
      try {
        const { payload } = await jwtVerify(token, k.key, options);
        return { ok: true, grant: claimGrant(payload as Record<string, unknown>) };
      } catch (err) {
        if (err instanceof errors.JWSSignatureVerificationFailed) continue;
        if (err instanceof errors.JWTExpired) return fail("expired", "the token has expired (exp)");
        if (err instanceof errors.JWTClaimValidationFailed) {
          switch (err.claim) {
            case "exp":
              return err.reason === "missing"
                ? fail("no_exp", "the token has no exp")
                : fail("malformed", "exp is not a number");
            case "nbf":
              return err.reason === "invalid"
                ? fail("malformed", "nbf is not a number")
                : fail("not_yet_valid", "the token is not valid yet (nbf)");
            case "iss":
              return fail("wrong_issuer", "the token's iss is not the server's issuer");
            case "aud":
              return fail("wrong_audience", "the token's aud is not the server's audience");
            default:
              return fail("malformed", `claim ${err.claim.slice(0, 16)}: ${err.reason}`);
          }
        }
        if (err instanceof ClaimError) return fail("malformed", err.message);
        if (err instanceof errors.JOSEError) return fail("malformed", "the token does not parse");
        throw err;
      }
    }
    return fail("bad_signature", "the signature is not one of the server's keys");
  }
}

/**
 * The algorithm a key must be made for to check a token whose header says
 * `alg`: JOSE's fully-specified name `Ed25519` (RFC 9864) is the `EdDSA` of
 * an Ed25519 key; any other name is itself.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { tokenAlg } from "./signed_tokens.ts";
 * equal(tokenAlg("Ed25519"), "EdDSA");
 * equal(tokenAlg("RS256"), "RS256");
 * ```
 */
export function tokenAlg(alg: string): string {
  return alg === "Ed25519" ? "EdDSA" : alg;
}

// The UTF-8 length of `s` in bytes, counted only until it passes `max`.
function utf8Length(s: string, max: number): number {
  if (s.length > max) return s.length; // every UTF-16 unit is at least one byte
  let n = 0;
  for (let i = 0; i < s.length && n <= max; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/**
 * Whether `token` has the shape of a JWT (three parts, two dots): the
 * server checks such a token as a signed token, any other against the
 * tokens file.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { looksSigned } from "./signed_tokens.ts";
 * equal(looksSigned("eyJh.eyJz.c2ln"), true);
 * equal(looksSigned("static-token-0123456789"), false);
 * ```
 */
export function looksSigned(token: string): boolean {
  const first = token.indexOf(".");
  if (first === -1) return false;
  const second = token.indexOf(".", first + 1);
  return second !== -1 && token.indexOf(".", second + 1) === -1;
}
