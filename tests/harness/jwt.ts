// Keys and signed tokens for the tests, made with jose: each test signs its
// own tokens, and the server checks them against the key files written here.
import { type CryptoKey, exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from "jose";

/** A key pair for one algorithm: the private key signs, the public one goes to the server. */
export interface TestKey {
  alg: "RS256" | "ES256" | "EdDSA";
  privateKey: CryptoKey;
  /** The public key as PEM (SPKI). */
  pem: string;
  /** The public key as a JWK (with `alg`, and `kid` when given). */
  jwk: JWK;
}

/** A fresh key pair for `alg`; `kid` names it in a JWKS. */
export async function testKey(alg: TestKey["alg"], kid?: string): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), alg, ...(kid ? { kid } : {}) };
  return { alg, privateKey, pem: await exportSPKI(publicKey), jwk };
}

/**
 * The claims of a test token: `exp` and `nbf` in seconds from now, counted
 * from the current whole second (so `expIn: 2` expires in 1 to 2 s; null:
 * left out).
 */
export interface TestClaims {
  sub?: string;
  expIn?: number | null;
  nbfIn?: number;
  iss?: string;
  aud?: string;
  streamcast?: Record<string, unknown>;
}

/** Signs `claims` with `key` (an HS256 secret, or a test key), naming `kid` in the header. */
export async function sign(
  key: Uint8Array | TestKey,
  claims: TestClaims,
  kid?: string,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const alg = key instanceof Uint8Array ? "HS256" : key.alg;
  const jwt = new SignJWT(claims.streamcast ? { streamcast: claims.streamcast } : {})
    .setProtectedHeader({ alg, ...(kid ? { kid } : {}) })
    .setSubject(claims.sub ?? "tester")
    .setIssuedAt(now);
  const expIn = claims.expIn === undefined ? 600 : claims.expIn;
  if (expIn !== null) jwt.setExpirationTime(now + expIn);
  if (claims.nbfIn !== undefined) jwt.setNotBefore(now + claims.nbfIn);
  if (claims.iss) jwt.setIssuer(claims.iss);
  if (claims.aud) jwt.setAudience(claims.aud);
  return await jwt.sign(key instanceof Uint8Array ? key : key.privateKey);
}

/** An unsigned token (`alg: none`) with `payload`. */
export function unsigned(payload: Record<string, unknown>): string {
  const b64 = (o: unknown) =>
    btoa(JSON.stringify(o)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
  return `${b64({ alg: "none", typ: "JWT" })}.${b64(payload)}.`;
}

/** 32 random bytes as a hex string: an HS256 secret file's text. */
export function secretText(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(32)),
    (b) => b.toString(16).padStart(2, "0"),
  )
    .join("");
}

/** `data` (bytes, or text as UTF-8) in base64url without padding, as JOSE writes it. */
export function b64url(data: Uint8Array | string): string {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

// The Web Crypto parameters that sign with a key of each test algorithm.
const SUBTLE_SIGN: Record<TestKey["alg"], AlgorithmIdentifier | EcdsaParams> = {
  RS256: "RSASSA-PKCS1-v1_5",
  ES256: { name: "ECDSA", hash: "SHA-256" },
  EdDSA: "Ed25519",
};

/**
 * A compact JWS of any `header` and `payload` (a value, written as JSON, or
 * raw bytes), signed with `key` (an HS256 secret or a test key) whatever the
 * header says: for tokens no JOSE library would make — an `alg` that is not a
 * string, an `nbf` that is a string, a claims set that is not an object.
 */
export async function signClaims(
  key: Uint8Array | TestKey,
  header: unknown,
  payload: unknown,
): Promise<string> {
  const body = payload instanceof Uint8Array ? payload : JSON.stringify(payload);
  const input = `${b64url(JSON.stringify(header))}.${b64url(body)}`;
  const data = new TextEncoder().encode(input);
  let sig: ArrayBuffer;
  if (key instanceof Uint8Array) {
    const hmac = await crypto.subtle.importKey(
      "raw",
      new Uint8Array(key),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    sig = await crypto.subtle.sign("HMAC", hmac, data);
  } else {
    // jose's CryptoKey type is node's; the key is Web Crypto's.
    const privateKey = key.privateKey as unknown as Parameters<typeof crypto.subtle.sign>[1];
    sig = await crypto.subtle.sign(SUBTLE_SIGN[key.alg], privateKey, data);
  }
  return `${input}.${b64url(new Uint8Array(sig))}`;
}
