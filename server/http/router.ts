/**
 * Routes declared as data — method, path pattern, name, who may use it,
 * handler — and the one place a request is matched against them, answering
 * "no such path" (404) and "wrong method" (405, with `Allow`) for all.
 *
 * A pattern is a path whose segments are literal or `{param}`. `{name}` is a
 * stream name: the unnamed stream's is `/` itself and `/_/…` under it
 * (`/{name}/head` matches `/trades/head` and `/_/head`). A request path is
 * percent-decoded once, here.
 *
 * @module
 */

import type { Grant } from "../auth.ts";
import type { Stream } from "../stream/stream.ts";
import type { HttpContext } from "./context.ts";
import type { RouteName } from "./metrics.ts";

/**
 * Who may use a route, when the server checks tokens: anyone (`public`: no
 * token asked), any valid token (`token`), a token that reads every stream
 * (`all`), one that may read (`read`) or publish to (`publish`) the stream
 * named in the path, one that reads every row of it (`rows`: a row-level
 * grant, which must read through the socket, may not), a cluster member
 * (`cluster`: the route checks the cluster's credential itself, with or
 * without tokens; see replicate.ts), or an admin (`admin`: a token with
 * `"admin": true`; without tokens, a client on a loopback address).
 */
export type Access =
  | "public"
  | "token"
  | "all"
  | "read"
  | "rows"
  | "publish"
  | "cluster"
  | "admin";

/** A request as a route's handler gets it. */
export interface RouteRequest {
  /** The request. */
  readonly req: Request;
  /** Its URL, parsed. */
  readonly url: URL;
  /** Where it came from (`HOST:PORT`, for the log). */
  readonly remote: string;
  /** What its token grants; null without access control. */
  readonly grant: Grant | null;
  /** The path's parameters, percent-decoded (`name`: the stream's). */
  readonly params: Readonly<Record<string, string>>;
  /** The stream named in the path, for a route with `stream: true`. */
  readonly stream: Stream;
}

/** One route. */
export interface Route {
  /** `GET` (which answers `HEAD` too), `POST`, `PUT` or `DELETE`. */
  readonly method: "GET" | "POST" | "PUT" | "DELETE";
  /** Whether it answers a WebSocket upgrade (only upgrades reach it, and no upgrade reaches the others). */
  readonly upgrade: boolean;
  /** The path pattern. */
  readonly pattern: string;
  /** What `streamcast_http_requests_total{route}` counts it as. */
  readonly name: RouteName;
  /** Who may use it. */
  readonly access: Access;
  /** Whether the stream named in the path is looked up first (404 for an unknown one). */
  readonly stream: boolean;
  /** Answers the request. */
  handle(ctx: HttpContext, r: RouteRequest): Response | Promise<Response>;
}

/** What matching a request found. */
export type Match =
  | { kind: "route"; route: Route; params: Record<string, string> }
  | { kind: "no_route"; name: string | null }
  | { kind: "bad_method"; allow: string }
  | { kind: "bad_path" };

/**
 * The route of a request with `method` (and an upgrade or not) at `pathname`
 * (as in the URL, percent-encoded), or why there is none: no route has the
 * path (`no_route`, with the stream name the path starts with, if any), only
 * other methods (`bad_method`), or the path is not valid percent-encoding.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { matchRoute, type Route } from "./router.ts";
 * const route = (method: "GET" | "POST", pattern: string): Route => ({
 *   method, pattern, upgrade: false, name: "head", access: "read", stream: true,
 *   handle: () => new Response(),
 * });
 * const routes = [route("GET", "/_/health"), route("GET", "/{name}/head"), route("POST", "/{name}")];
 * const m = matchRoute(routes, "GET", false, "/_/head");
 * equal(m.kind === "route" && m.route.pattern, "/{name}/head");
 * deepStrictEqual(m.kind === "route" && m.params, { name: "" });
 * deepStrictEqual(matchRoute(routes, "PUT", false, "/trades/head"), { kind: "bad_method", allow: "GET, HEAD" });
 * deepStrictEqual(matchRoute(routes, "GET", false, "/trades/tail"), { kind: "no_route", name: "trades" });
 * equal(matchRoute(routes, "GET", false, "/%zz").kind, "bad_path");
 * ```
 */
export function matchRoute(
  routes: readonly Route[],
  method: string,
  upgrade: boolean,
  pathname: string,
): Match {
  let path: string;
  try {
    path = decodeURIComponent(pathname);
  } catch {
    return { kind: "bad_path" };
  }
  const segments = path === "/" ? [] : path.slice(1).split("/");
  // A stream's own path may end with a slash (`/trades/`, `/_/`).
  if (segments.length === 2 && segments[1] === "") segments.pop();
  const want = method === "HEAD" ? "GET" : method;
  const allow = new Set<string>();
  for (const route of routes) {
    if (route.upgrade !== upgrade) continue;
    const params = paramsOf(route.pattern, segments);
    if (params === null) continue;
    if (route.method === want) return { kind: "route", route, params };
    allow.add(route.method);
  }
  if (allow.size > 0) {
    const methods = [...allow].flatMap((m) => m === "GET" ? ["GET", "HEAD"] : [m]);
    return { kind: "bad_method", allow: methods.join(", ") };
  }
  return { kind: "no_route", name: streamOf(segments) };
}

// The stream name a path's segments start with (`_` and `/` are the unnamed stream's).
function streamOf(segments: readonly string[]): string {
  return segments.length === 0 || segments[0] === "_" ? "" : segments[0];
}

// The parameters of `segments` (a decoded path's) under `pattern`, or null when it does not match.
function paramsOf(pattern: string, segments: readonly string[]): Record<string, string> | null {
  const want = pattern === "/" ? [] : pattern.slice(1).split("/");
  let rest = segments;
  const params: Record<string, string> = {};
  if (want[0] === "{name}") {
    // The unnamed stream's paths: `/` and `/_/…`.
    if (segments.length === 0 || segments[0] === "_") {
      params.name = "";
      rest = segments.slice(1);
    } else {
      params.name = segments[0];
      rest = segments.slice(1);
    }
    want.shift();
  }
  if (rest.length !== want.length) return null;
  for (let i = 0; i < want.length; i++) {
    const w = want[i];
    if (w.startsWith("{") && w.endsWith("}")) {
      if (rest[i] === "") return null;
      params[w.slice(1, -1)] = rest[i];
    } else if (w !== rest[i]) return null;
  }
  return params;
}
