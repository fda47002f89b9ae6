/**
 * The grant a signed token carries: its `sub` names the holder, its `exp`
 * ends it, and its `streamcast` claim says what it may do:
 *
 * ```json
 * {
 *   "sub": "alice", "exp": 1767225600,
 *   "streamcast": {
 *     "read": ["trades", "book"],
 *     "publish": ["orders"],
 *     "where": { "trades": { "symbol": ["BTC-USD", "ETH-USD"] } },
 *     "admin": false
 *   }
 * }
 * ```
 *
 * - `read`, `publish`: stream names (`""` the unnamed stream), or `"*"` for
 *   every stream, as in the tokens file. Reading does not grant publishing.
 * - `where`: a row filter (the `where=` language) per stream name. The
 *   holder gets only the rows of that stream that match it, and may publish
 *   only rows that match it. It is compiled against the stream's schema when
 *   used, not here: the claim does not know the schemas.
 * - `admin`: `true` opens what a tokens-file entry's `"admin": true` does.
 * - `sub`: 1–{@linkcode MAX_SUB_CHARS} printable ASCII characters without a
 *   space; what logs call the holder, and the scope of its producer ids.
 *
 * A token without a `streamcast` claim is valid and grants nothing (403 on
 * every route that needs a grant).
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { claimGrant } from "./claim_grant.ts";
 * const g = claimGrant({
 *   sub: "alice",
 *   exp: 2_000_000_000,
 *   streamcast: { read: ["trades"], where: { trades: { symbol: "BTC-USD" } } },
 * });
 * equal(g.name, "alice");
 * equal(g.mayRead("trades"), true);
 * equal(g.mayPublish("trades"), false);
 * deepStrictEqual(g.whereFor("trades"), { symbol: "BTC-USD" });
 * equal(g.expiresAt, 2_000_000_000_000);
 * ```
 *
 * @module
 */

import type { Where } from "../../wire/filter.ts";
import { isStreamName } from "../../wire/stream_name.ts";
import type { Grant } from "../auth.ts";

/** Longest `sub` a signed token may carry, in characters. */
export const MAX_SUB_CHARS = 128;

const SUB_PATTERN = new RegExp(`^[\\x21-\\x7e]{1,${MAX_SUB_CHARS}}$`);
const CLAIM_KEYS: readonly string[] = ["read", "publish", "where", "admin"];

/** A claim that is not the shape this server reads; `message` names the claim. */
export class ClaimError extends Error {
  /** Makes the error from what was wrong. */
  constructor(message: string) {
    super(message);
    this.name = "ClaimError";
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function streamList(
  claim: Record<string, unknown>,
  key: string,
): { all: boolean; set: Set<string> } {
  const list = claim[key];
  const set = new Set<string>();
  let all = false;
  if (list === undefined) return { all, set };
  if (!Array.isArray(list)) {
    throw new ClaimError(`streamcast.${key} must be an array of stream names or "*"`);
  }
  for (const s of list) {
    if (s === "*") all = true;
    else if (typeof s === "string" && isStreamName(s)) set.add(s);
    else throw new ClaimError(`streamcast.${key}: ${JSON.stringify(s)} is not a stream name`);
  }
  return { all, set };
}

/**
 * The grant of a verified token's claims; throws {@linkcode ClaimError}
 * naming the claim that is not the expected shape. `exp` (seconds since the
 * epoch) becomes `expiresAt` (ms).
 */
export function claimGrant(payload: Record<string, unknown>): Grant {
  const sub = payload.sub;
  if (typeof sub !== "string" || !SUB_PATTERN.test(sub)) {
    throw new ClaimError(
      `sub must be 1-${MAX_SUB_CHARS} printable ASCII characters without a space`,
    );
  }
  const exp = payload.exp;
  if (typeof exp !== "number" || !Number.isFinite(exp)) throw new ClaimError("no exp");
  const claim = payload.streamcast ?? {};
  if (!isObject(claim)) throw new ClaimError("streamcast must be an object");
  for (const key of Object.keys(claim)) {
    if (!CLAIM_KEYS.includes(key)) throw new ClaimError(`unknown key streamcast.${key}`);
  }
  const read = streamList(claim, "read");
  const pub = streamList(claim, "publish");
  const where = new Map<string, Where>();
  if (claim.where !== undefined) {
    if (!isObject(claim.where)) {
      throw new ClaimError(`streamcast.where must be an object of stream name → filter`);
    }
    for (const [stream, filter] of Object.entries(claim.where)) {
      if (!isStreamName(stream)) {
        throw new ClaimError(`streamcast.where: ${JSON.stringify(stream)} is not a stream name`);
      }
      if (!isObject(filter) || Object.keys(filter).length === 0) {
        throw new ClaimError(`streamcast.where.${stream} must be a non-empty filter object`);
      }
      where.set(stream, filter as Where);
    }
  }
  if (claim.admin !== undefined && typeof claim.admin !== "boolean") {
    throw new ClaimError(`streamcast.admin must be true or false`);
  }
  const admin = claim.admin === true;
  return {
    name: sub,
    all: read.all,
    streams: read.all ? new Set() : read.set,
    mayRead: (stream: string) => read.all || read.set.has(stream),
    mayPublish: (stream: string) => pub.all || pub.set.has(stream),
    cluster: false,
    admin,
    expiresAt: exp * 1000,
    whereFor: (stream: string) => where.get(stream) ?? null,
  };
}
