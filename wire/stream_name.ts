/**
 * Which names a stream may have: the one rule the server checks on `serve`
 * and on every path, and the client on the URLs it builds.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { isStreamName } from "./stream_name.ts";
 * ok(isStreamName("trades") && !isStreamName(".hidden"));
 * ```
 *
 * @module
 */

/**
 * The stream-name rule in words, for error messages.
 */
export const STREAM_NAME_RULE = "1-64 of A-Z a-z 0-9 . _ -, not starting with _ or .";

/** Stream names: 1–64 of `[A-Za-z0-9._-]`, not starting with `_` or `.`; or `""`. */
export const STREAM_NAME_PATTERN: RegExp = /^(?:[A-Za-z0-9-][A-Za-z0-9._-]{0,63})?$/;

/**
 * Whether `name` is a valid stream name (the empty name is the unnamed stream).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { isStreamName } from "./stream_name.ts";
 * deepStrictEqual(["trades", "", "_x"].map(isStreamName), [true, true, false]);
 * ```
 */
export function isStreamName(name: string): boolean {
  return STREAM_NAME_PATTERN.test(name);
}
