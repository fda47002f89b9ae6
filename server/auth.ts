/**
 * Optional access control: bearer tokens granting read access per stream.
 *
 * A tokens file (JSON):
 *
 * ```json
 * {
 *   "tokens": [
 *     { "name": "alice", "token": "3f1c9b0e8a7d4c2b9e6f1a0d5c8b7e2f", "streams": ["trades", "book"] },
 *     { "name": "ops", "sha256": "<64 hex: SHA-256 of the token>", "streams": ["*"] }
 *   ]
 * }
 * ```
 *
 * - `token`: 16–512 characters of `A-Z a-z 0-9 . _ ~ -` (fits a header, a
 *   WebSocket subprotocol and a query unescaped; `openssl rand -hex 32` makes
 *   one). Or `sha256` instead: the lowercase hex SHA-256 of the token's UTF-8
 *   bytes, so the file need not hold the token itself.
 * - `streams`: the stream names it may read (`""` is the unnamed stream); `"*"`
 *   is every stream, and also `/_/metrics`.
 * - `publish`: the stream names it may publish to (`POST /{name}`, the
 *   `/{name}/publish` socket); `"*"` is every stream opened for publishing.
 *   Reading does not grant publishing, nor publishing reading.
 * - `cluster`: `true` makes it the cluster's credential, which opens the
 *   replicate route of a cluster's leader (docs/SPEC.md §11); neither reading
 *   nor publishing grants that.
 * - `admin`: `true` lets it create and delete streams while serving
 *   (`PUT`/`DELETE /_/streams/{name}`); nothing else grants that. A token
 *   needs `streams`, `publish`, `cluster: true`, `admin: true`, or several
 *   of them.
 * - `name`: what logs and metrics call the holder (never the token);
 *   1–64 of `A-Z a-z 0-9 . _ @ -`; `token#N` (1-based) when absent.
 *
 * A request carries its token in one of three places (more than one is a 400):
 * `Authorization: Bearer TOKEN`; the WebSocket subprotocol `bearer.TOKEN`
 * offered beside `streamcast` (browsers cannot set headers; the server answers
 * `streamcast`, never the token); or the `access_token` query parameter.
 *
 * Tokens are kept only as SHA-256 digests and compared in constant time
 * against every entry; they never reach logs, metrics or error messages.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { TokenTable } from "./auth.ts";
 * const table = TokenTable.parse({
 *   tokens: [{ name: "alice", token: "alice-token-0123456789", streams: ["trades"] }],
 * });
 * const grant = table.lookup("alice-token-0123456789");
 * equal(grant?.name, "alice");
 * equal(grant?.mayRead("trades"), true);
 * equal(grant?.mayRead("book"), false);
 * equal(table.lookup("wrong-token-0123456789"), null);
 * ```
 *
 * @module
 */

import { createHash, timingSafeEqual } from "node:crypto";
import { BEARER_PROTOCOL_PREFIX, TOKEN_PATTERN } from "../wire/subscribe.ts";
import { isStreamName } from "../wire/stream_name.ts";
import type { Where } from "../wire/filter.ts";
const NAME_PATTERN = /^[A-Za-z0-9._@-]{1,64}$/;
const SHA256_PATTERN = /^[0-9a-f]{64}$/;

/**
 * What a valid token may read.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { TokenTable } from "./auth.ts";
 * const t = TokenTable.parse({ tokens: [{ token: "x".repeat(16), streams: ["*"] }] });
 * const g = t.lookup("x".repeat(16))!;
 * equal(g.name, "token#1");
 * equal(g.all, true);
 * equal(g.mayRead("anything"), true);
 * ```
 */
export interface Grant {
  /** The holder's name from the tokens file (never the token). */
  readonly name: string;
  /** Whether it reads every stream (`"*"`). */
  readonly all: boolean;
  /** The streams it reads (empty when `all`). */
  readonly streams: ReadonlySet<string>;
  /** Whether it may read stream `name`. */
  mayRead(name: string): boolean;
  /** Whether it may publish to stream `name` (a `"publish"` grant). */
  mayPublish(name: string): boolean;
  /** Whether it is the cluster's credential (`"cluster": true`): it may replicate. */
  readonly cluster: boolean;
  /** Whether it may use the admin routes (`"admin": true`). */
  readonly admin: boolean;
  /** When it stops being valid (ms since the epoch; a signed token's `exp`); null: never. */
  readonly expiresAt: number | null;
  /**
   * The row filter of a row-level grant on stream `name` (a signed token's
   * `streamcast.where`): the holder reads and publishes only the rows that
   * match it. Null: every row.
   */
  whereFor(name: string): Where | null;
}

/**
 * Checks a signed token: its grant, or why it is refused (`why` names the
 * check that failed). `access/signed_tokens.ts`'s `SignedTokens` is one.
 */
export interface TokenVerifier {
  /** Checks `token` at `now` (ms since the epoch; default: the clock). */
  verify(
    token: string,
    now?: number,
  ): Promise<{ ok: true; grant: Grant } | { ok: false; why: string; detail: string }>;
}

interface Entry {
  digest: Uint8Array;
  grant: Grant;
}

function digest(token: string): Uint8Array {
  return createHash("sha256").update(token, "utf8").digest();
}

function fromHex(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * The tokens of a tokens file, as digests, each with what it may read.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { TokenTable } from "./auth.ts";
 * const table = TokenTable.parse({ tokens: [{ token: "t".repeat(20), streams: [""] }] });
 * equal(table.size, 1);
 * equal(table.lookup("t".repeat(20))?.mayRead(""), true);
 * ```
 */
export class TokenTable {
  readonly #entries: Entry[];

  private constructor(entries: Entry[]) {
    this.#entries = entries;
  }

  /** How many tokens it holds. */
  get size(): number {
    return this.#entries.length;
  }

  /** The holders' names, in file order. */
  get names(): string[] {
    return this.#entries.map((e) => e.grant.name);
  }

  /**
   * Checks the parsed JSON of a tokens file; throws `TypeError` naming what is
   * wrong (never quoting a token).
   */
  static parse(json: unknown): TokenTable {
    if (!isObject(json)) throw new TypeError(`the top level must be an object {"tokens": [...]}`);
    for (const key of Object.keys(json)) {
      if (key !== "tokens") throw new TypeError(`unknown key "${key}"`);
    }
    const list = json.tokens;
    if (!Array.isArray(list)) throw new TypeError(`"tokens" must be an array`);
    if (list.length === 0) throw new TypeError(`"tokens" lists no token`);
    const entries: Entry[] = [];
    const names = new Set<string>();
    list.forEach((item, i) => {
      const where = `tokens[${i}]`;
      if (!isObject(item)) throw new TypeError(`${where} must be an object`);
      for (const key of Object.keys(item)) {
        if (!["token", "sha256", "name", "streams", "publish", "cluster", "admin"].includes(key)) {
          throw new TypeError(`unknown key "${where}.${key}"`);
        }
      }
      let d: Uint8Array;
      if (item.token !== undefined && item.sha256 !== undefined) {
        throw new TypeError(`${where} gives both "token" and "sha256"; give one`);
      } else if (item.token !== undefined) {
        if (typeof item.token !== "string" || !TOKEN_PATTERN.test(item.token)) {
          // The value itself is not quoted: it may be a real token with a typo.
          throw new TypeError(
            `${where}.token must be 16-512 characters of A-Z a-z 0-9 . _ ~ -`,
          );
        }
        d = digest(item.token);
      } else if (item.sha256 !== undefined) {
        if (typeof item.sha256 !== "string" || !SHA256_PATTERN.test(item.sha256)) {
          throw new TypeError(`${where}.sha256 must be 64 lowercase hex characters`);
        }
        d = fromHex(item.sha256);
      } else {
        throw new TypeError(`${where} needs "token" or "sha256"`);
      }
      // The default name has a "#", which a given name cannot: they never clash.
      let name = `token#${i + 1}`;
      if (item.name !== undefined) {
        if (typeof item.name !== "string" || !NAME_PATTERN.test(item.name)) {
          throw new TypeError(
            `${where}.name must be 1-64 of A-Z a-z 0-9 . _ @ -, got ${JSON.stringify(item.name)}`,
          );
        }
        name = item.name;
      }
      if (names.has(name)) throw new TypeError(`${where}: the name "${name}" is used twice`);
      if (item.cluster !== undefined && typeof item.cluster !== "boolean") {
        throw new TypeError(
          `${where}.cluster must be true or false, got ${JSON.stringify(item.cluster)}`,
        );
      }
      const cluster = item.cluster === true;
      if (item.admin !== undefined && typeof item.admin !== "boolean") {
        throw new TypeError(
          `${where}.admin must be true or false, got ${JSON.stringify(item.admin)}`,
        );
      }
      const admin = item.admin === true;
      names.add(name);
      const listOf = (key: "streams" | "publish"): { all: boolean; set: Set<string> } => {
        const list = item[key];
        const set = new Set<string>();
        let all = false;
        // A token may only publish (no "streams"), only read (no "publish"), or
        // only replicate or administer (`cluster`, `admin`, neither list).
        if (
          list === undefined &&
          (key === "publish" || item.publish !== undefined || cluster || admin)
        ) {
          return { all, set };
        }
        if (!Array.isArray(list) || list.length === 0) {
          throw new TypeError(`${where}.${key} must be a non-empty array of stream names or "*"`);
        }
        for (const s of list) {
          if (s === "*") all = true;
          else if (typeof s === "string" && isStreamName(s)) set.add(s);
          else {
            throw new TypeError(
              `${where}.${key}: ${JSON.stringify(s)} is not a stream name (or "*")`,
            );
          }
        }
        return { all, set };
      };
      const read = listOf("streams");
      const pub = listOf("publish");
      const streams = read.set;
      const all = read.all;
      if (entries.some((e) => timingSafeEqual(e.digest, d))) {
        throw new TypeError(`${where}: the same token is listed twice`);
      }
      const grant: Grant = {
        name,
        all,
        streams: all ? new Set() : streams,
        mayRead: (stream: string) => all || streams.has(stream),
        mayPublish: (stream: string) => pub.all || pub.set.has(stream),
        cluster,
        admin,
        expiresAt: null,
        whereFor: () => null,
      };
      entries.push({ digest: d, grant });
    });
    return new TokenTable(entries);
  }

  /** Reads and checks a tokens file; errors name the file, never a token. */
  static async load(path: string): Promise<TokenTable> {
    const text = await Deno.readTextFile(path);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      // JSON.parse's message quotes the text near the error: it may be a token.
      throw new TypeError(`tokens file ${path} is not JSON`);
    }
    try {
      return TokenTable.parse(json);
    } catch (err) {
      throw new TypeError(`tokens file ${path}: ${(err as Error).message}`);
    }
  }

  /**
   * The grant of `token`, or null when it is not listed. Compares its digest
   * with every entry's in constant time, whichever matches.
   */
  lookup(token: string): Grant | null {
    const d = digest(token);
    let found: Grant | null = null;
    for (const e of this.#entries) {
      if (timingSafeEqual(e.digest, d) && found === null) found = e.grant;
    }
    return found;
  }
}

/**
 * Whether `token` is `expected`, compared through their digests in time
 * that does not depend on where they differ.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { sameToken } from "./auth.ts";
 * equal(sameToken("cluster-token-0123456789", "cluster-token-0123456789"), true);
 * equal(sameToken("cluster-token-0123456789", "cluster-token-0123456780"), false);
 * ```
 */
export function sameToken(token: string, expected: string): boolean {
  return timingSafeEqual(digest(token), digest(expected));
}

/** Where a request's token was found, or why it could not be read. */
export type TokenFind =
  | { ok: true; token: string | null; carrier: "header" | "subprotocol" | "query" | null }
  | { ok: false; detail: string };

/**
 * Finds the bearer token of a request: the `Authorization: Bearer` header,
 * a `bearer.TOKEN` WebSocket subprotocol (upgrades only), or the
 * `access_token` query parameter. More than one of them is an error (RFC 6750
 * §2). Another `Authorization` scheme counts as no token.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { findToken } from "./auth.ts";
 * const req = new Request("http://h/trades/head", { headers: { authorization: "Bearer abc" } });
 * const f = findToken(req, new URL(req.url), false);
 * deepStrictEqual(f, { ok: true, token: "abc", carrier: "header" });
 * ```
 */
export function findToken(req: Request, url: URL, upgrade: boolean): TokenFind {
  const found: [string, "header" | "subprotocol" | "query"][] = [];
  const auth = req.headers.get("authorization");
  if (auth !== null) {
    const m = /^\s*bearer\s+(\S+)\s*$/i.exec(auth);
    if (m) found.push([m[1], "header"]);
  }
  if (upgrade) {
    const bearers = offeredProtocols(req).filter((p) => p.startsWith(BEARER_PROTOCOL_PREFIX));
    if (bearers.length > 1) return { ok: false, detail: "more than one bearer subprotocol" };
    if (bearers.length === 1) {
      found.push([bearers[0].slice(BEARER_PROTOCOL_PREFIX.length), "subprotocol"]);
    }
  }
  const q = url.searchParams.getAll("access_token");
  if (q.length > 1) return { ok: false, detail: "repeated parameter access_token" };
  if (q.length === 1) found.push([q[0], "query"]);
  if (found.length > 1) {
    return {
      ok: false,
      detail: `a token in more than one place (${found.map(([, c]) => c).join(", ")}); send one`,
    };
  }
  if (found.length === 0) return { ok: true, token: null, carrier: null };
  return { ok: true, token: found[0][0], carrier: found[0][1] };
}

/**
 * The WebSocket subprotocols a request offers, in order.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { offeredProtocols } from "./auth.ts";
 * const req = new Request("http://h/", { headers: { "sec-websocket-protocol": "streamcast, bearer.x" } });
 * deepStrictEqual(offeredProtocols(req), ["streamcast", "bearer.x"]);
 * ```
 */
export function offeredProtocols(req: Request): string[] {
  const h = req.headers.get("sec-websocket-protocol");
  if (h === null) return [];
  return h.split(",").map((p) => p.trim()).filter((p) => p !== "");
}

function problem(
  status: number,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify(body) + "\n", {
    status,
    headers: { "content-type": "application/json; charset=utf-8", ...headers },
  });
}

/**
 * The 401 answer: no token, or one that is not listed (`invalid`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { unauthorized } from "./auth.ts";
 * const res = unauthorized(true);
 * equal(res.status, 401);
 * equal(res.headers.get("www-authenticate"), 'Bearer realm="streamcast", error="invalid_token"');
 * await res.body?.cancel();
 * ```
 */
export function unauthorized(invalid: boolean): Response {
  const challenge = invalid
    ? `Bearer realm="streamcast", error="invalid_token"`
    : `Bearer realm="streamcast"`;
  return problem(
    401,
    {
      error: "unauthorized",
      detail: invalid ? "the bearer token is not valid" : "a bearer token is required",
    },
    { "www-authenticate": challenge },
  );
}

/**
 * The 401 answer to a signed token that is not valid: `why` names which
 * check failed (`expired`, `bad_signature`, …; see
 * `access/signed_tokens.ts`), in the body and in the challenge's
 * `error_description`.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { invalidToken } from "./auth.ts";
 * const res = invalidToken("expired", "the token has expired (exp)");
 * equal(res.status, 401);
 * equal(
 *   res.headers.get("www-authenticate"),
 *   'Bearer realm="streamcast", error="invalid_token", error_description="expired"',
 * );
 * deepStrictEqual(await res.json(), {
 *   error: "unauthorized",
 *   why: "expired",
 *   detail: "the token has expired (exp)",
 * });
 * ```
 */
export function invalidToken(why: string, detail: string): Response {
  return problem(401, { error: "unauthorized", why, detail }, {
    "www-authenticate":
      `Bearer realm="streamcast", error="invalid_token", error_description="${why}"`,
  });
}

/**
 * The 403 answer: a valid token that may not read `what` (a stream name, or a
 * route such as `/_/metrics`).
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { forbidden } from "./auth.ts";
 * const res = forbidden({ stream: "trades" });
 * equal(res.status, 403);
 * deepStrictEqual(await res.json(), { error: "forbidden", stream: "trades" });
 * ```
 */
export function forbidden(what: { stream: string } | { route: string }): Response {
  return problem(403, { error: "forbidden", ...what }, {
    "www-authenticate": `Bearer realm="streamcast", error="insufficient_scope"`,
  });
}
