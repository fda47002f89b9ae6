/**
 * `GET /_/health`: 200 with `{"ok":true,"streams":N}` while serving (with
 * `"degraded"` naming the streams whose full disk keeps them from taking
 * rows, and those whose chunk worker stopped: they still serve reads), 503
 * with `ok: false` once shutting down. Public (no token), like the viewer's
 * scripts.
 *
 * @module
 */

import { json } from "./_respond.ts";

/**
 * A stream that serves reads but is short of something, and why:
 * `disk_full`, it takes no rows; `chunks_stopped`, its chunk worker's thread
 * stopped, so nothing is chunked, archived or dropped by retention until the
 * stream is opened again (a restart).
 */
export interface Degraded {
  /** The stream's name. */
  stream: string;
  /** Why. */
  why: "disk_full" | "chunks_stopped";
}

/**
 * The health answer: `degraded` lists the streams short of something (their
 * reads still work, so the server stays healthy); absent when none.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { healthResponse } from "./health.ts";
 * const res = healthResponse(false, 2);
 * equal(res.status, 200);
 * deepStrictEqual(await res.json(), { ok: true, streams: 2 });
 * const full = healthResponse(false, 2, [{ stream: "t", why: "disk_full" }]);
 * deepStrictEqual(await full.json(), {
 *   ok: true,
 *   streams: 2,
 *   degraded: [{ stream: "t", why: "disk_full" }],
 * });
 * ```
 */
export function healthResponse(
  shuttingDown: boolean,
  streams: number,
  degraded: readonly Degraded[] = [],
): Response {
  const body = degraded.length > 0
    ? { ok: !shuttingDown, streams, degraded }
    : { ok: !shuttingDown, streams };
  return json(body, shuttingDown ? 503 : 200);
}
