/**
 * `GET /_/health`: 200 with `{"ok":true,"streams":N}` while serving, 503 with
 * `ok: false` once shutting down. Public (no token), like the viewer's scripts.
 *
 * @module
 */

import { json } from "./_respond.ts";

/**
 * The health answer.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { healthResponse } from "./health.ts";
 * const res = healthResponse(false, 2);
 * equal(res.status, 200);
 * deepStrictEqual(await res.json(), { ok: true, streams: 2 });
 * ```
 */
export function healthResponse(shuttingDown: boolean, streams: number): Response {
  return json({ ok: !shuttingDown, streams }, shuttingDown ? 503 : 200);
}
