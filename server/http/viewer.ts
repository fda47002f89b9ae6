/**
 * The web viewer's routes: the page (`GET /`, or `GET /{name}` without an
 * upgrade) listing the streams the caller may read, and its scripts (public:
 * they hold no data). The page and its scripts are in `../viewer/`.
 *
 * @module
 */

import { CLIENT_SCRIPT_PATH, VIEWER_SCRIPT_PATH, viewerAsset, viewerPage } from "../viewer/page.ts";
import type { HttpContext } from "./context.ts";
import { readableHeads } from "./head.ts";
import type { RouteRequest } from "./router.ts";

/** Where the viewer's scripts are served. */
export const VIEWER_ASSETS: readonly string[] = [CLIENT_SCRIPT_PATH, VIEWER_SCRIPT_PATH];

/**
 * The viewer page listing the streams the caller may read.
 */
export function viewerPageRoute(ctx: HttpContext, r: RouteRequest): Response {
  return new Response(viewerPage(readableHeads(ctx, r.grant)), {
    headers: { "content-type": "text/html; charset=utf-8" },
  });
}

/**
 * One of the viewer's scripts (the path is one of {@linkcode VIEWER_ASSETS}).
 */
export function viewerAssetRoute(_ctx: HttpContext, r: RouteRequest): Response {
  return viewerAsset(r.url.pathname)!;
}
