/**
 * Waiting between retries: capped exponential backoff with jitter, and a sleep
 * that an `AbortSignal` cuts short. Every part that retries (the client's
 * reconnect, the upstream ingest, the chunk worker's archive uploads) takes its
 * delays from here. Browser-safe.
 *
 * @module
 */

/**
 * The delay before retry `attempt` (1-based): `minMs · 2^(attempt-1)` capped at
 * `maxMs`, then a random 50–100 % of that (jitter, so that many clients dropped
 * together do not return together).
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { backoffDelay } from "./backoff.ts";
 * const d = backoffDelay(3, 100, 10_000);
 * ok(d >= 200 && d <= 400);
 * ```
 */
export function backoffDelay(attempt: number, minMs: number, maxMs: number): number {
  const base = Math.min(maxMs, minMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(jitter(base));
}

/**
 * A random 50–100 % of `ms`: the jitter {@linkcode backoffDelay} applies, for
 * callers that keep their own doubling.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { jitter } from "./backoff.ts";
 * const d = jitter(1000);
 * ok(d >= 500 && d <= 1000);
 * ```
 */
export function jitter(ms: number): number {
  return ms * (0.5 + Math.random() / 2);
}

/**
 * Resolves after `ms`, or at once when `signal` is (or becomes) aborted; never
 * rejects, and leaves no timer behind.
 *
 * @example
 * ```ts
 * import { sleep } from "./backoff.ts";
 * const ac = new AbortController();
 * ac.abort();
 * await sleep(60_000, ac.signal); // returns at once
 * ```
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
