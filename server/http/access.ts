/**
 * Access control at the door: the request's bearer token is found (see
 * `../auth.ts`) and looked up, and a denial is answered, counted and logged.
 *
 * @module
 */

import { ROW_LEVEL_DETAIL, SUBPROTOCOL } from "../../wire/subscribe.ts";
import type { LogFields } from "../../common/logger.ts";
import {
  findToken,
  forbidden,
  type Grant,
  invalidToken,
  offeredProtocols,
  type TokenTable,
  type TokenVerifier,
  unauthorized,
} from "../auth.ts";
import { looksSigned } from "../access/signed_tokens.ts";
import type { HttpContext } from "./context.ts";
import type { Access } from "./router.ts";
import type { DenyWhy } from "./metrics.ts";
import { json, streamField } from "./_respond.ts";

// Counts and logs a denial, and returns its answer `res`.
function deny(ctx: HttpContext, res: Response, why: DenyWhy, fields: LogFields): Response {
  ctx.metrics.denial(why);
  ctx.logger.warn("denied", { status: res.status, why, ...fields });
  return res;
}

/**
 * The 403 for a route `grant` may not use (see `Access`), or null when it
 * may: `name` is the stream the path names (null: none), `route` the route's
 * pattern (for the answer and the log).
 *
 * @example
 * ```ts ignore
 * const denied = denyRoute(ctx, grant, "read", "trades", "/{name}/head", remote);
 * if (denied) return denied;
 * ```
 */
export function denyRoute(
  ctx: HttpContext,
  grant: Grant,
  access: Access,
  name: string | null,
  route: string,
  remote: string,
): Response | null {
  const who = { token_name: grant.name, remote };
  switch (access) {
    case "public":
    case "token":
    case "cluster": // checked by the route (replicate.ts)
      return null;
    case "admin":
      return denyAdmin(ctx, grant, route, remote);
    case "all":
      if (grant.all) return null;
      return deny(ctx, forbidden({ route }), "forbidden", { route, ...who });
    case "read":
      if (name === null || grant.mayRead(name)) return null;
      return deny(ctx, forbidden({ stream: name }), "forbidden", {
        stream: streamField(name),
        ...who,
      });
    case "rows":
      if (name === null) return null;
      if (!grant.mayRead(name)) {
        return deny(ctx, forbidden({ stream: name }), "forbidden", {
          stream: streamField(name),
          ...who,
        });
      }
      if (grant.whereFor(name) === null) return null;
      // Chunks hold every row: a row-level grant reads through the socket, which filters.
      return deny(
        ctx,
        json({ error: "forbidden", detail: ROW_LEVEL_DETAIL }, 403, {
          "www-authenticate": `Bearer realm="streamcast", error="insufficient_scope"`,
        }),
        "forbidden",
        { stream: streamField(name), route, ...who },
      );
    case "publish":
      if (name === null || grant.mayPublish(name)) return null;
      return deny(ctx, forbidden({ stream: name }), "forbidden", {
        stream: streamField(name),
        route: "publish",
        ...who,
      });
  }
}

/**
 * Whether `remote` (`HOST:PORT`, `[V6]:PORT`) is a loopback address:
 * 127.0.0.0/8, `::1`, or an IPv4 loopback mapped into IPv6.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { isLoopback } from "./access.ts";
 * deepStrictEqual(
 *   ["127.0.0.1:5", "[::1]:5", "[::ffff:127.0.0.2]:5", "192.0.2.7:5", "[fe80::1]:5"].map(isLoopback),
 *   [true, true, true, false, false],
 * );
 * ```
 */
export function isLoopback(remote: string): boolean {
  const host = remote.startsWith("[")
    ? remote.slice(1, remote.indexOf("]"))
    : remote.slice(0, remote.lastIndexOf(":"));
  const v4 = host.toLowerCase().startsWith("::ffff:") ? host.slice(7) : host;
  return v4.startsWith("127.") || host === "::1";
}

/**
 * The 403 for an admin route (creating and deleting streams) `grant` may
 * not use, or null when it may: with tokens, a grant with `"admin": true`;
 * without, a client on a loopback address only.
 *
 * @example
 * ```ts ignore
 * const denied = denyAdmin(ctx, grant, "/_/streams/{name}", remote);
 * if (denied) return denied;
 * ```
 */
export function denyAdmin(
  ctx: HttpContext,
  grant: Grant | null,
  route: string,
  remote: string,
): Response | null {
  if (grant !== null) {
    if (grant.admin) return null;
    return deny(ctx, forbidden({ route }), "forbidden", { route, token_name: grant.name, remote });
  }
  if (ctx.tokens !== null || isLoopback(remote)) return null;
  const detail = "without --tokens only a client on a loopback address may create or delete " +
    'streams; give --tokens with an "admin": true entry';
  return deny(ctx, json({ error: "forbidden", detail }, 403), "forbidden", { route, remote });
}

/**
 * The grant of the request's token, or the answer refusing it: a token
 * listed in `tokens` is that entry's, whatever its shape; any other with two
 * dots is checked against `signed` when the server has signed-token keys (a
 * promise: a signature's check is asynchronous).
 *
 * @example
 * ```ts ignore
 * let a = authenticate(ctx, req, url, upgrade, remote, tokens, signed);
 * if (a instanceof Promise) a = await a;
 * if (a instanceof Response) return a;
 * ```
 */
export function authenticate(
  ctx: HttpContext,
  req: Request,
  url: URL,
  upgrade: boolean,
  remote: string,
  tokens: TokenTable | null,
  signed: TokenVerifier | null,
): Grant | Response | Promise<Grant | Response> {
  const f = findToken(req, url, upgrade);
  if (!f.ok) {
    return deny(
      ctx,
      json({ error: "bad_request", detail: f.detail }, 400, {
        "www-authenticate": `Bearer realm="streamcast", error="invalid_request"`,
      }),
      "bad_request",
      { detail: f.detail, remote },
    );
  }
  if (f.token === null) return deny(ctx, unauthorized(false), "missing_token", { remote });
  const token = f.token;
  const carrier = f.carrier;
  const listed = tokens?.lookup(token) ?? null;
  if (listed === null && signed !== null && looksSigned(token)) {
    return signed.verify(token).then((v) => {
      if (!v.ok) {
        return deny(ctx, invalidToken(v.why, v.detail), "invalid_token", {
          carrier,
          check: v.why,
          remote,
        });
      }
      return carrierChecked(ctx, req, carrier, v.grant, remote);
    });
  }
  if (!listed) {
    return deny(ctx, unauthorized(true), "invalid_token", { carrier, remote });
  }
  return carrierChecked(ctx, req, carrier, listed, remote);
}

// `grant`, or the 400 for a bearer subprotocol offered without the streamcast one.
function carrierChecked(
  ctx: HttpContext,
  req: Request,
  carrier: string | null,
  grant: Grant,
  remote: string,
): Grant | Response {
  if (carrier === "subprotocol" && !offeredProtocols(req).includes(SUBPROTOCOL)) {
    // Answering with the bearer subprotocol would echo the token.
    const detail = `offer the ${SUBPROTOCOL} subprotocol beside bearer.TOKEN`;
    return deny(ctx, json({ error: "bad_request", detail }, 400), "bad_request", {
      detail,
      token_name: grant.name,
      remote,
    });
  }
  return grant;
}
