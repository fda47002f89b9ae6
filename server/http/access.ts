/**
 * Access control at the door: the request's bearer token is found (see
 * `../auth.ts`) and looked up, and a denial is answered, counted and logged.
 *
 * @module
 */

import { SUBPROTOCOL } from "../../client/wire.ts";
import type { LogFields } from "../../common/logger.ts";
import {
  findToken,
  forbidden,
  type Grant,
  offeredProtocols,
  type TokenTable,
  unauthorized,
} from "../auth.ts";
import type { HttpContext } from "./context.ts";
import type { DenyWhy } from "./metrics.ts";
import { json, streamField } from "./_respond.ts";

/**
 * Counts and logs a denial, and returns its answer `res`.
 *
 * @example
 * ```ts ignore
 * return deny(ctx, forbidden({ route: "/_/metrics" }), "forbidden", { remote });
 * ```
 */
export function deny(ctx: HttpContext, res: Response, why: DenyWhy, fields: LogFields): Response {
  ctx.metrics.denial(why);
  ctx.logger.warn("denied", { status: res.status, why, ...fields });
  return res;
}

/**
 * The 403 for a stream the grant may not read.
 *
 * @example
 * ```ts ignore
 * if (!grant.mayRead(name)) return denyStream(ctx, name, grant, remote);
 * ```
 */
export function denyStream(ctx: HttpContext, name: string, grant: Grant, remote: string): Response {
  return deny(ctx, forbidden({ stream: name }), "forbidden", {
    stream: streamField(name),
    token_name: grant.name,
    remote,
  });
}

/**
 * The grant of the request's token, or the answer refusing it.
 *
 * @example
 * ```ts ignore
 * const a = authenticate(ctx, req, url, upgrade, remote, tokens);
 * if (a instanceof Response) return a;
 * ```
 */
export function authenticate(
  ctx: HttpContext,
  req: Request,
  url: URL,
  upgrade: boolean,
  remote: string,
  tokens: TokenTable,
): Grant | Response {
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
  const grant = tokens.lookup(f.token);
  if (!grant) {
    return deny(ctx, unauthorized(true), "invalid_token", { carrier: f.carrier, remote });
  }
  if (f.carrier === "subprotocol" && !offeredProtocols(req).includes(SUBPROTOCOL)) {
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
