/**
 * How a server ends a subscription: the WebSocket close codes it uses and the
 * JSON reason each carries (why an offset cannot be served, where a too-slow
 * subscriber resumes), encoded to fit the protocol's 123 bytes.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { decodeCloseReason, encodeCloseReason } from "./close_reason.ts";
 * const text = encodeCloseReason({ error: "not_replayable", why: "ahead", offset: 9 });
 * deepStrictEqual(decodeCloseReason(text), { error: "not_replayable", why: "ahead", offset: 9 });
 * ```
 *
 * @module
 */

import { utf8Bytes } from "./utf8_bytes.ts";

/**
 * WebSocket close codes the server uses. The code is what a client dispatches
 * on; the reason only carries numbers.
 */
export const CloseCode = {
  /** Server shutting down; reconnect with your next offset. */
  GoingAway: 1001,
  /** The client sent a data frame; subscriptions are read-only. */
  PolicyViolation: 1008,
  /** The runtime's own message size limit fired. */
  MessageTooBig: 1009,
  /** The server failed while serving this subscriber (e.g. reading the log failed). */
  InternalError: 1011,
  /** Too many subscribers on this stream or connections on the server; try again later. */
  TryAgainLater: 1013,
  /** The path or query does not parse. */
  Protocol: 4400,
  /**
   * Access denied (bearer token missing or not valid for this stream), or
   * the token expired while the socket was open (`token_expired`, with the
   * offset to resume at).
   */
  Unauthorized: 4401,
  /** No such stream. */
  NotFound: 4404,
  /** The stream was deleted while serving (`DELETE /_/streams/{name}`); do not reconnect. */
  StreamDeleted: 4410,
  /** That offset cannot be served. */
  NotReplayable: 4416,
  /** Too slow; resume at the offset in the reason. */
  TooSlow: 4429,
  /** What was asked for cannot be served now (a keyed stream's snapshot past its key limit). */
  Unavailable: 4503,
} as const;

/** One of the values of {@linkcode CloseCode}. */
export type CloseCode = typeof CloseCode[keyof typeof CloseCode];

/**
 * Why a subscribe at an offset was refused, in the order the server checks.
 *
 * - `not_durable`: the stream has no log (ephemeral), nothing is replayable;
 * - `other_stream`: the `stream_id` given is not this stream's;
 * - `ahead`: the offset is past the stream's end;
 * - `empty`: the log holds no row it can serve below the end;
 * - `evicted`: the offset is below the earliest offset still served;
 * - `too_old`: more rows than `max_replay` lie between the offset and the end.
 */
export type NotReplayableWhy =
  | "not_durable"
  | "other_stream"
  | "ahead"
  | "empty"
  | "evicted"
  | "too_old";

/** Every {@linkcode NotReplayableWhy}, in the order the server checks them. */
export const NOT_REPLAYABLE_WHYS: readonly NotReplayableWhy[] = [
  "not_durable",
  "other_stream",
  "ahead",
  "empty",
  "evicted",
  "too_old",
];

/** The JSON object in a 4400 close reason. */
export interface ProtocolReason {
  /** Always `"protocol"`. */
  error: "protocol";
  /** What did not parse. */
  detail: string;
}

/** The JSON object in a 4404 close reason. */
export interface NotFoundReason {
  /** Always `"not_found"`. */
  error: "not_found";
  /** The stream name asked for. */
  stream: string;
}

/** The JSON object in a 4410 close reason. */
export interface StreamDeletedReason {
  /** Always `"stream_deleted"`. */
  error: "stream_deleted";
}

/** The JSON object in a 4416 close reason. */
export interface NotReplayableReason {
  /** Always `"not_replayable"`. */
  error: "not_replayable";
  /** Why the offset cannot be served. */
  why: NotReplayableWhy;
  /** The offset asked for. */
  offset?: number;
  /** The time asked for (µs), when the subscribe gave `since` instead of an offset. */
  since?: number;
  /** The earliest offset this stream still serves, when it has one. */
  earliest?: number | null;
  /** The stream's end offset (exclusive). */
  end_offset?: number;
  /** Rows between `offset` and `end_offset` (for `too_old`). */
  rows?: number;
  /** The server's `max_replay` (for `too_old`). */
  max_replay?: number;
}

/** The JSON object in a 4429 close reason. */
export interface TooSlowReason {
  /** Always `"too_slow"`. */
  error: "too_slow";
  /** The offset to resume at; `null` on an ephemeral stream. */
  resume: number | null;
  /** When retention dropped rows while catching up: the earliest offset still held. */
  earliest?: number | null;
}

/**
 * The JSON object in a 4401 close reason when the token a socket was opened
 * with expires: the subscription, or the publish socket, ends at its `exp`.
 * A client reconnects with a fresh token from `resume`.
 */
export interface TokenExpiredReason {
  /** Always `"token_expired"`. */
  error: "token_expired";
  /**
   * A subscription: the next offset it would have got (`null` on an
   * ephemeral stream). A publish socket: the stream's end offset when it
   * closed (its acknowledged frames are below it).
   */
  resume: number | null;
}

/** Any close reason the server sends as JSON. */
export type CloseReason =
  | ProtocolReason
  | NotFoundReason
  | StreamDeletedReason
  | NotReplayableReason
  | TooSlowReason
  | TokenExpiredReason
  | { error: string; [key: string]: unknown };

/** The WebSocket protocol caps a close reason at 123 bytes of UTF-8. */
export const MAX_CLOSE_REASON_BYTES = 123;

/**
 * Encodes a close reason as compact JSON of at most 123 bytes, dropping
 * trailing fields (and then shortening the last string) until it fits.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { encodeCloseReason } from "./close_reason.ts";
 * const text = encodeCloseReason({ error: "too_slow", resume: 20481 });
 * equal(text, '{"error":"too_slow","resume":20481}');
 * ```
 */
export function encodeCloseReason(reason: CloseReason): string {
  const entries = Object.entries(reason).filter(([, v]) => v !== undefined);
  while (entries.length > 0) {
    const text = JSON.stringify(Object.fromEntries(entries));
    if (utf8Bytes(text) <= MAX_CLOSE_REASON_BYTES) return text;
    if (entries.length === 1) {
      // A single over-long field (a detail string): cut the string to fit.
      const [key, value] = entries[0];
      const s = String(value);
      const k = longestPrefix(s, utf8Bytes(JSON.stringify({ [key]: "" })));
      return k === null ? "" : JSON.stringify({ [key]: s.slice(0, k) });
    }
    if (entries.length === 2 && typeof entries[1][1] === "string") {
      // Keep `error` and shorten the detail rather than lose it.
      const [[k0, v0], [k1, s]] = entries as [[string, unknown], [string, string]];
      const k = longestPrefix(s, utf8Bytes(JSON.stringify({ [k0]: v0, [k1]: "" })));
      if (k !== null) return JSON.stringify({ [k0]: v0, [k1]: s.slice(0, k) });
    }
    entries.pop();
  }
  return "";
}

// The UTF-8 bytes code unit `i` of `s` adds inside a JSON string, as
// JSON.stringify writes it: escapes for quotes, backslashes and control
// characters, `\uXXXX` for a lone surrogate. A surrogate pair's 4 bytes count
// as 6 for its high half (alone, it would be escaped) and -2 for its low half,
// so that the sum over any prefix is that prefix's length.
function jsonUnitBytes(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === 0x22 || c === 0x5c) return 2;
  if (c < 0x20) return c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : 6;
  if (c < 0x80) return 1;
  if (c < 0x800) return 2;
  if (c >= 0xdc00 && c <= 0xdfff) {
    const h = i > 0 ? s.charCodeAt(i - 1) : 0;
    return h >= 0xd800 && h <= 0xdbff ? -2 : 6;
  }
  if (c >= 0xd800 && c <= 0xdbff) return 6;
  return 3;
}

// The longest prefix length of `s` whose JSON text, added to `fixed` bytes,
// fits a close reason; null when not even the empty string does. One pass
// over `s` (the sums of a prefix are not monotonic around surrogate pairs,
// so the longest fitting one is found by walking back from the end).
function longestPrefix(s: string, fixed: number): number | null {
  const sums = new Array<number>(s.length + 1);
  sums[0] = fixed;
  for (let i = 0; i < s.length; i++) sums[i + 1] = sums[i] + jsonUnitBytes(s, i);
  for (let k = s.length; k >= 0; k--) if (sums[k] <= MAX_CLOSE_REASON_BYTES) return k;
  return null;
}

/**
 * Parses a close reason sent by the server; returns `null` when it is not a
 * JSON object (a close from a proxy, say).
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { decodeCloseReason } from "./close_reason.ts";
 * const reason = decodeCloseReason('{"error":"too_slow","resume":5}');
 * deepStrictEqual(reason, { error: "too_slow", resume: 5 });
 * equal(decodeCloseReason("Going away"), null);
 * ```
 */
export function decodeCloseReason(text: string): CloseReason | null {
  if (!text.startsWith("{")) return null;
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && typeof v.error === "string" ? v : null;
  } catch {
    return null;
  }
}
