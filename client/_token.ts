/**
 * A bearer token on both paths of a subscription: the socket offers it as the
 * subprotocol `bearer.TOKEN` beside `streamcast` (the form browsers can send),
 * and HTTP requests to the stream's own origin send `Authorization: Bearer`;
 * a refused upgrade is told apart from a server that is down by asking `/head`.
 *
 * @module
 */

import type { WebSocketConstructor } from "./_connection.ts";
import { ConnectionClosed } from "./errors.ts";
import { headUrl } from "./head.ts";
import { BEARER_PROTOCOL_PREFIX, isBearerToken, SUBPROTOCOL } from "../wire/subscribe.ts";
import { CloseCode } from "../wire/close_reason.ts";

/**
 * A WebSocket constructor that offers `streamcast` and `bearer.TOKEN` as subprotocols.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import type { WebSocketConstructor } from "./_connection.ts";
 * import { withToken } from "./_token.ts";
 * const offered: unknown[] = [];
 * class Recording {
 *   constructor(_url: string | URL, protocols?: string[]) {
 *     offered.push(protocols);
 *   }
 * }
 * const WS = withToken(Recording as unknown as WebSocketConstructor, "0123456789abcdef0123");
 * new WS("ws://127.0.0.1:8765/trades");
 * deepEqual(offered, [["streamcast", "bearer.0123456789abcdef0123"]]);
 * ```
 */
export function withToken(WS: WebSocketConstructor, token: string): WebSocketConstructor {
  const Base = WS as unknown as new (url: string | URL, protocols: string[]) => WebSocket;
  const protocols = [SUBPROTOCOL, BEARER_PROTOCOL_PREFIX + token];
  // Called with `new`: the object returned is the instance.
  return function (url: string | URL): WebSocket {
    return new Base(url, protocols);
  } as unknown as WebSocketConstructor;
}

/**
 * `f` sending `Authorization: Bearer TOKEN` to `origin` (and to nowhere else).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { fetchWithToken } from "./_token.ts";
 * const seen: (string | null)[] = [];
 * const f = fetchWithToken((input, init) => {
 *   seen.push(new Headers(init?.headers).get("authorization"));
 *   return Promise.resolve(new Response("{}"));
 * }, "0123456789abcdef0123", "http://127.0.0.1:8765");
 * await f("http://127.0.0.1:8765/trades/head");
 * await f("http://example.com/elsewhere");
 * deepStrictEqual(seen, ["Bearer 0123456789abcdef0123", null]);
 * ```
 */
export function fetchWithToken(f: typeof fetch, token: string, origin: string): typeof fetch {
  return (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : input);
    if (url.origin !== origin) return f(input, init);
    const headers = new Headers(input instanceof Request ? input.headers : undefined);
    new Headers(init?.headers).forEach((v, k) => headers.set(k, v));
    headers.set("authorization", `Bearer ${token}`);
    return f(input, { ...init, headers });
  };
}

/**
 * The stream's HTTP origin (`ws:` → `http:`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { httpOrigin } from "./_token.ts";
 * equal(httpOrigin("wss://example.com/trades"), "https://example.com");
 * ```
 */
export function httpOrigin(url: string): string {
  const u = new URL(url);
  u.protocol = u.protocol === "wss:" ? "https:" : u.protocol === "ws:" ? "http:" : u.protocol;
  return u.origin;
}

/**
 * After a socket that failed before the greeting without a close frame:
 * whether the server denies access (a WebSocket cannot see the HTTP status
 * of a refused upgrade, so `/head` is asked, with the same token). Resolves
 * the error to throw, or null (anything else: the server is down, say).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { accessDenied } from "./_token.ts";
 * import { serve, Stream, TokenTable } from "../mod.ts";
 * const stream = Stream.ephemeral("ticks", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const token = "a".repeat(16);
 * const tokens = TokenTable.parse({ tokens: [{ token, streams: ["*"] }] });
 * const server = serve([stream], { port: 0, onListen: () => {}, tokens });
 * const url = `${server.url}/ticks`;
 * equal((await accessDenied(url, undefined, 5_000, 1))?.code, 4401); // no token: refused
 * equal(await accessDenied(url, token, 5_000, 1), null); // the token may read: not a refusal
 * await server.shutdown();
 * ```
 */
export async function accessDenied(
  url: string,
  token: string | undefined,
  timeoutMs: number,
  resume: number | null,
): Promise<ConnectionClosed | null> {
  if (typeof fetch !== "function") return null;
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  try {
    const res = await fetch(headUrl(url), {
      signal: ac.signal,
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    });
    const body = await res.text();
    if (res.status !== 401 && res.status !== 403) return null;
    const detail = res.status === 401
      ? (token === undefined
        ? "401: the server requires a bearer token (the token option)"
        : "401: the server does not accept this token")
      : "403: this token may not read this stream";
    let reason = "";
    try {
      const j = JSON.parse(body);
      if (j && typeof j.error === "string") reason = JSON.stringify(j);
    } catch {
      // Not the server's JSON: the detail says enough.
    }
    return new ConnectionClosed(url, CloseCode.Unauthorized, reason, resume, detail);
  } catch {
    return null;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Throws a `TypeError` when `token` is not one a client may send (a static
 * token, or a signed one); `who` starts the message, which never quotes
 * the token.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { checkToken } from "./_token.ts";
 * checkToken("a".repeat(16), "connect");
 * throws(() => checkToken("a b", "connect"), TypeError);
 * ```
 */
export function checkToken(token: string, who: string): void {
  // A TypeError, not a RangeError: the characters are the token's shape.
  if (!isBearerToken(token)) {
    throw new TypeError(
      `${who}: token must be 16-512 characters of A-Z a-z 0-9 . _ ~ -, or a signed token ` +
        `(three base64url parts)`,
    );
  }
}

/**
 * The token of `source` now: the string, or what the function returns
 * (checked); undefined without one.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { tokenNow } from "./_token.ts";
 * equal(await tokenNow(() => "a.b.c", "connect"), "a.b.c");
 * equal(await tokenNow(undefined, "connect"), undefined);
 * ```
 */
export async function tokenNow(
  source: string | (() => string | Promise<string>) | undefined,
  who: string,
): Promise<string | undefined> {
  if (typeof source !== "function") return source;
  const token = await source();
  if (typeof token !== "string") {
    throw new TypeError(`${who}: the token function returned ${typeof token}, not a string`);
  }
  checkToken(token, who);
  return token;
}
