/**
 * Small pieces every route uses: JSON answers, the fields of a close reason
 * for a log event, a stream name clipped for the log. Private to `server/http/`.
 *
 * @module
 */

/**
 * A JSON answer (one line and a newline).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { json } from "./_respond.ts";
 * const res = json({ ok: true }, 503);
 * equal(res.status, 503);
 * equal(await res.text(), '{"ok":true}\n');
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
 * import { equal } from "node:assert/strict";
 * import { notFound } from "./_respond.ts";
 * equal((await notFound("no stream \"x\"").json()).error, "not_found");
 * ```
 */
export function notFound(detail: string): Response {
  return json({ error: "not_found", detail }, 404);
}

/**
 * The answer for stream `name` that is not served: 503 `unavailable` (try
 * again in a second) while it is being opened again here (`reopening`, with
 * why), else 404.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { streamMissing } from "./_respond.ts";
 * equal(streamMissing(new Map(), "t").status, 404);
 * const res = streamMissing(new Map([["t", "its log stopped"]]), "t");
 * equal(res.status, 503);
 * equal((await res.json()).error, "unavailable");
 * ```
 */
export function streamMissing(reopening: ReadonlyMap<string, string>, name: string): Response {
  const why = reopening.get(name);
  if (why === undefined) return notFound(`no stream ${JSON.stringify(name)}`);
  return json(
    {
      error: "unavailable",
      detail: `stream ${JSON.stringify(name)} is opening again here: ${why}`,
    },
    503,
    { "retry-after": "1" },
  );
}

/**
 * A stream name for a log event (names are attacker-chosen: clipped).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { streamField } from "./_respond.ts";
 * equal(streamField("x".repeat(100)).length, 81);
 * ```
 */
export function streamField(name: string): string {
  return name.length > 80 ? name.slice(0, 80) + "…" : name;
}
