/**
 * The one timer of a socket opened with a token that expires: it fires at
 * the token's `exp`, and the socket's session closes the socket with 4401
 * `token_expired`. One timer per socket, set once; nothing per row.
 *
 * @module
 */

// setTimeout's longest delay (2^31 - 1 ms, about 24.8 days); a later expiry waits in steps.
const MAX_DELAY_MS = 2 ** 31 - 1;

/**
 * Calls `fire` once at `expiresAt` (ms since the epoch; at once when it has
 * passed), unless the returned cancel is called first.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { atExpiry } from "./expiry.ts";
 * const fired = await new Promise<boolean>((resolve) => {
 *   atExpiry(Date.now() - 1, () => resolve(true));
 * });
 * equal(fired, true);
 * let late = false;
 * const cancel = atExpiry(Date.now() + 60_000, () => (late = true));
 * cancel();
 * equal(late, false);
 * ```
 */
export function atExpiry(expiresAt: number, fire: () => void): () => void {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const arm = () => {
    const wait = expiresAt - Date.now();
    if (wait > MAX_DELAY_MS) {
      timer = setTimeout(arm, MAX_DELAY_MS);
      return;
    }
    timer = setTimeout(() => {
      timer = null;
      fire();
    }, Math.max(0, wait));
  };
  arm();
  return () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  };
}
