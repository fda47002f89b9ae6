/**
 * The web viewer's routes: the page (`GET /`, or `GET /{name}` without an
 * upgrade) listing the streams the caller may read, and its scripts (public:
 * they hold no data). The page itself is made in `../viewer.ts`.
 *
 * @module
 */

import { viewerAsset, type ViewerHead, viewerPage } from "../viewer/page.ts";

/**
 * The viewer's script at `pathname`, or null when it names none.
 *
 * @example
 * ```ts
 * import { viewerAssetResponse } from "./viewer.ts";
 * console.log(viewerAssetResponse("/_/nothing")); // null
 * ```
 */
export function viewerAssetResponse(pathname: string): Response | null {
  return viewerAsset(pathname);
}

/**
 * The viewer page listing `heads`.
 *
 * @example
 * ```ts
 * import { viewerPageResponse } from "./viewer.ts";
 * const res = viewerPageResponse([]);
 * console.log(res.headers.get("content-type")); // text/html; charset=utf-8
 * await res.body?.cancel();
 * ```
 */
export function viewerPageResponse(heads: readonly ViewerHead[]): Response {
  return new Response(viewerPage(heads), {
    headers: { "content-type": "text/html; charset=utf-8" },
  });
}
