/**
 * Small pieces every route uses: JSON answers, the path split, the fields of
 * a close reason for a log event. Private to `server/http/`.
 *
 * @module
 */

import type { LogFields } from "../../common/logger.ts";

/**
 * A JSON answer (one line and a newline).
 *
 * @example
 * ```ts
 * import { json } from "./_respond.ts";
 * console.log(await json({ ok: true }, 503).text()); // {"ok":true}
 * ```
 */
export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body) + "\n", {
    status,
    headers: { "content-type": "application/json; charset=utf-8", ...headers },
  });
}

/**
 * 404 with a JSON error.
 *
 * @example
 * ```ts
 * import { notFound } from "./_respond.ts";
 * console.log((await notFound("no stream \"x\"").json()).error); // not_found
 * ```
 */
export function notFound(detail: string): Response {
  return json({ error: "not_found", detail }, 404);
}

/**
 * A request path split into a stream name and the rest; null if it does not
 * parse. The unnamed stream's routes live under `/_/`.
 *
 * @example
 * ```ts
 * import { splitPath } from "./_respond.ts";
 * console.log(splitPath("/trades/head"), splitPath("/_/head")); // { name: "trades", rest: "head" } { name: "", rest: "head" }
 * console.log(splitPath("/%zz")); // null
 * ```
 */
export function splitPath(pathname: string): { name: string; rest: string } | null {
  let path: string;
  try {
    path = decodeURIComponent(pathname);
  } catch {
    return null;
  }
  if (path === "/") return { name: "", rest: "" };
  const parts = path.slice(1).split("/");
  if (parts[0] === "_") return { name: "", rest: parts.slice(1).join("/") };
  return { name: parts[0], rest: parts.slice(1).join("/") };
}

/**
 * The fields of a JSON close reason, for a log event; `{}` when it is not JSON.
 *
 * @example
 * ```ts
 * import { parseReason } from "./_respond.ts";
 * console.log(parseReason('{"error":"too_slow"}'), parseReason("bye")); // { error: "too_slow" } {}
 * ```
 */
export function parseReason(reason: string | undefined): LogFields {
  if (!reason) return {};
  try {
    const v = JSON.parse(reason);
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

/**
 * A stream name for a log event (names are attacker-chosen: clipped).
 *
 * @example
 * ```ts
 * import { streamField } from "./_respond.ts";
 * console.log(streamField("x".repeat(100)).length); // 81
 * ```
 */
export function streamField(name: string): string {
  return name.length > 80 ? name.slice(0, 80) + "…" : name;
}
