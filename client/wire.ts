/**
 * The wire contract between a streamcast server and its subscribers: frame
 * shapes, close codes, refusal reasons, the greeting, and the subscribe query.
 *
 * This module is pure (no Deno API, no I/O) so that the server, the Deno client
 * and the browser client all import the one definition.
 *
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { parseSubscribeQuery } from "./wire.ts";
 * const q = parseSubscribeQuery(new URLSearchParams("offset=5&frames=batch"));
 * ok(q.ok && q.value.offset === 5 && q.value.frames === "batch");
 * ```
 *
 * @module
 */

import type { Where } from "./filter.ts";
import { parseSince } from "./since.ts";

/** The protocol version sent in every greeting's `streamcast` field. */
export const PROTOCOL_VERSION = 2;

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
  /** Access denied (bearer token missing or not valid for this stream). */
  Unauthorized: 4401,
  /** No such stream. */
  NotFound: 4404,
  /** That offset cannot be served. */
  NotReplayable: 4416,
  /** Too slow; resume at the offset in the reason. */
  TooSlow: 4429,
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

/** Any close reason the server sends as JSON. */
export type CloseReason =
  | ProtocolReason
  | NotFoundReason
  | NotReplayableReason
  | TooSlowReason
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
 * import { encodeCloseReason } from "./wire.ts";
 * const text = encodeCloseReason({ error: "too_slow", resume: 20481 });
 * equal(text, '{"error":"too_slow","resume":20481}');
 * ```
 */
export function encodeCloseReason(reason: CloseReason): string {
  const entries = Object.entries(reason).filter(([, v]) => v !== undefined);
  while (entries.length > 0) {
    const text = JSON.stringify(Object.fromEntries(entries));
    if (utf8Length(text) <= MAX_CLOSE_REASON_BYTES) return text;
    if (entries.length === 1) {
      // A single over-long field (a detail string): cut the string to fit.
      const [key, value] = entries[0];
      const s = String(value);
      const k = longestPrefix(s, utf8Length(JSON.stringify({ [key]: "" })));
      return k === null ? "" : JSON.stringify({ [key]: s.slice(0, k) });
    }
    if (entries.length === 2 && typeof entries[1][1] === "string") {
      // Keep `error` and shorten the detail rather than lose it.
      const [[k0, v0], [k1, s]] = entries as [[string, unknown], [string, string]];
      const k = longestPrefix(s, utf8Length(JSON.stringify({ [k0]: v0, [k1]: "" })));
      if (k !== null) return JSON.stringify({ [k0]: v0, [k1]: s.slice(0, k) });
    }
    entries.pop();
  }
  return "";
}

const utf8 = new TextEncoder();

function utf8Length(text: string): number {
  return utf8.encode(text).length;
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
 * import { decodeCloseReason } from "./wire.ts";
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

/** The `log` object of a greeting. */
export interface GreetingLog {
  /** The log's name (the stream name, `""` for the unnamed stream). */
  name: string;
  /** The archive's `s3://` URI, or `null` when there is none. */
  archive: string | null;
}

/**
 * The first frame of every accepted subscription.
 *
 * `end_offset` is exclusive (the next offset to be written); `replay` is
 * `[from, end_offset]` when the subscription starts below the end, else `null`.
 */
export interface Greeting {
  /** The protocol version, {@linkcode PROTOCOL_VERSION}. */
  streamcast: number;
  /** The stream's name. */
  stream: string;
  /** The log's id (32 hex characters), `null` on an ephemeral stream. */
  stream_id: string | null;
  /** The next offset to be written; `null` on an ephemeral stream. */
  end_offset: number | null;
  /** `[from, end_offset]` of the replay, or `null` for a live subscribe. */
  replay: [number, number] | null;
  /** The log, or `null` on an ephemeral stream. */
  log: GreetingLog | null;
  /** Whether rows are synced to disk before they are sent. */
  durable: boolean;
  /** The stream's JSON Schema, properties in column order. */
  schema: Record<string, unknown>;
  /** The frame mode in use. */
  frames?: FrameMode;
  /** The filter as parsed (same keys and values), or `null` without one. */
  where?: Where | null;
  /** The `since` asked for, in µs, or `null`. */
  since?: number | null;
  /** compress= (§16): the compression of data frames, `null` (or absent) for text frames. */
  compress?: Compression | null;
  /** compress= (§16): the zstd dictionary the frames need, by id; `null` (or absent): none. */
  dictionary?: string | null;
}

/** The object served at `GET /{name}/head` (and in `GET /_/streams`). */
export interface StreamHead {
  /** The stream name (`""` for the unnamed stream). */
  stream: string;
  /** The log's stream id, or `null` on an ephemeral stream. */
  stream_id: string | null;
  /** The next offset to be written (exclusive end), or `null` on an ephemeral stream. */
  end_offset: number | null;
  /** The earliest offset served, or `null` when the log holds nothing. */
  earliest: number | null;
  /** Whether the stream has a log. */
  durable: boolean;
  /** Subscribers connected now. */
  subscribers: number;
  /** The JSON Schema as declared. */
  schema: Record<string, unknown>;
  /** The archive's `s3://` URI, or `null`. */
  archive: string | null;
  /** With an archive: rows not yet archived, the age of the oldest of them, the last error. */
  archive_lag?: { rows: number; seconds: number; error: string | null } | null;
  /** Every schema version, oldest first, with its first offset (null: ephemeral); last is `schema`. */
  schema_versions?: readonly { from: number | null; schema: Record<string, unknown> }[];
  /** Whether the stream takes rows from publishers (`serve --publish`); absent from older servers. */
  publish?: boolean;
  /** Any field a newer server adds. */
  [key: string]: unknown;
}

/** How data rows are framed on a subscription. */
export type FrameMode = "single" | "batch" | "arrow";

/** The offset a subscribe asks for. */
export type OffsetRequest = number | "earliest" | null;

/** A parsed subscribe query. */
export interface SubscribeQuery {
  /** A row offset (inclusive), `"earliest"`, or `null` for live. */
  offset: OffsetRequest;
  /** The stream id the caller's offset came from, if given. */
  streamId: string | null;
  /** The frame mode asked for (`single` unless given). */
  frames: FrameMode;
  /** A bearer token passed as `access_token` (for clients that cannot set headers). */
  token: string | null;
  /**
   * The `where` filter's JSON text as given, or `null`. It is checked against
   * the stream's columns by `compileFilter` in `filter.ts` (the server refuses a bad
   * one with 4400 `where: …`).
   */
  where: string | null;
  /** `since` resolved to µs since the epoch (see {@linkcode parseSince}), or `null`. */
  since: number | null;
  /** compress= (§16): `"zstd"` for binary zstd data frames, `null` (or absent) for text. */
  compress?: Compression | null;
}

/**
 * The WebSocket subprotocol of streamcast. A client may offer it; the server
 * then answers with it. Offered beside `bearer.TOKEN` it lets a client that
 * cannot set headers (a browser) send a bearer token.
 */
export const SUBPROTOCOL = "streamcast";

/**
 * Prefix of the subprotocol carrying a bearer token: `bearer.TOKEN`.
 */
export const BEARER_PROTOCOL_PREFIX = "bearer.";

/**
 * What a bearer token may consist of: it must fit a header, a subprotocol
 * and a query unescaped (`openssl rand -hex 32` makes one).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { TOKEN_PATTERN } from "./wire.ts";
 * deepStrictEqual(["0123456789abcdef", "a b"].map((t) => TOKEN_PATTERN.test(t)), [true, false]);
 * ```
 */
export const TOKEN_PATTERN: RegExp = /^[A-Za-z0-9._~-]{16,512}$/;

/** Result of {@linkcode parseSubscribeQuery}. */
export type ParseResult<T> = { ok: true; value: T } | { ok: false; detail: string };

/** The query parameters a subscribe accepts. */
export const SUBSCRIBE_PARAMS: readonly string[] = [
  "offset",
  "stream_id",
  "frames",
  "access_token",
  "where",
  "since",
  "compress",
];

/** Largest offset a subscribe may name (2^53 - 1). */
export const MAX_OFFSET: number = Number.MAX_SAFE_INTEGER;

/**
 * Parses and checks a subscribe query. Unknown parameters, repeated ones and
 * malformed values are refused: a typo must never silently mean "live".
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { parseSubscribeQuery } from "./wire.ts";
 * const r = parseSubscribeQuery(new URLSearchParams("ofset=3"));
 * deepStrictEqual(r, { ok: false, detail: "unknown parameter ofset" });
 * ```
 */
export function parseSubscribeQuery(params: URLSearchParams): ParseResult<SubscribeQuery> {
  const seen = new Set<string>();
  for (const key of params.keys()) {
    if (!SUBSCRIBE_PARAMS.includes(key)) {
      return { ok: false, detail: `unknown parameter ${key}` };
    }
    if (seen.has(key)) return { ok: false, detail: `repeated parameter ${key}` };
    seen.add(key);
  }
  let offset: OffsetRequest = null;
  const rawOffset = params.get("offset");
  if (rawOffset !== null) {
    if (rawOffset === "earliest") offset = "earliest";
    else if (/^\d{1,16}$/.test(rawOffset) && Number(rawOffset) <= MAX_OFFSET) {
      offset = Number(rawOffset);
    } else {
      return {
        ok: false,
        detail: `offset must be an integer >= 0 or "earliest", got ${rawOffset}`,
      };
    }
  }
  const streamId = params.get("stream_id");
  if (streamId !== null && !/^[0-9a-f]{32}$/.test(streamId)) {
    return { ok: false, detail: `stream_id must be 32 lowercase hex characters` };
  }
  const rawFrames = params.get("frames") ?? "single";
  if (rawFrames !== "single" && rawFrames !== "batch" && rawFrames !== "arrow") {
    return { ok: false, detail: `frames must be single, batch or arrow, got ${rawFrames}` };
  }
  const rawSince = params.get("since");
  let since: number | null = null;
  if (rawSince !== null) {
    if (offset !== null) return { ok: false, detail: "give offset or since, not both" };
    try {
      since = parseSince(rawSince);
    } catch (err) {
      return { ok: false, detail: (err as RangeError).message };
    }
  }
  const compress = parseCompress(params.get("compress"), rawFrames);
  if (!compress.ok) return compress;
  const where = params.get("where");
  return {
    ok: true,
    value: {
      offset,
      streamId,
      frames: rawFrames,
      token: params.get("access_token"),
      where,
      since,
      compress: compress.value,
    },
  };
}

// compress= (docs/SPEC.md §2.6).

/**
 * How data frames are compressed: `"zstd"`, one zstd frame per batched
 * frame; `"zstd-dict"` (asked for only; the greeting then says `"zstd"`
 * and names the `dictionary`, when the server has one), the same with the
 * stream's dictionary; `"zstd-stream"` (§20), one zstd stream per live group
 * whose messages each end at a flush (docs/SPEC.md §2.6.1).
 */
export type Compression = "zstd" | "zstd-dict" | "zstd-stream";

/**
 * Checks `compress=`: absent is `null` (text frames); `zstd`, `zstd-dict`
 * and `zstd-stream` need `frames=batch`; any other value is refused.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { parseCompress } from "./wire.ts";
 * deepStrictEqual(parseCompress("zstd", "batch"), { ok: true, value: "zstd" });
 * deepStrictEqual(parseCompress("zstd", "single"), {
 *   ok: false,
 *   detail: "compress=zstd needs frames=batch, got frames=single",
 * });
 * ```
 */
export function parseCompress(
  raw: string | null,
  frames: FrameMode,
): ParseResult<Compression | null> {
  if (raw === null) return { ok: true, value: null };
  if (raw !== "zstd" && raw !== "zstd-dict" && raw !== "zstd-stream") {
    return { ok: false, detail: `compress must be zstd, zstd-dict or zstd-stream, got ${raw}` };
  }
  if (frames !== "batch") {
    return { ok: false, detail: `compress=${raw} needs frames=batch, got frames=${frames}` };
  }
  return { ok: true, value: raw };
}

/**
 * Builds a subscribe URL from a stream URL and the query to send.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { subscribeUrl } from "./wire.ts";
 * equal(
 *   subscribeUrl("ws://127.0.0.1:8765/trades", { offset: 10, frames: "batch" }),
 *   "ws://127.0.0.1:8765/trades?offset=10&frames=batch",
 * );
 * ```
 */
export function subscribeUrl(
  url: string | URL,
  query: {
    offset?: OffsetRequest;
    streamId?: string | null;
    frames?: FrameMode;
    where?: Where | string | null;
    since?: number | null;
    compress?: Compression | null;
  },
): string {
  const u = new URL(url);
  if (u.protocol === "http:") u.protocol = "ws:";
  if (u.protocol === "https:") u.protocol = "wss:";
  for (const key of ["offset", "stream_id", "frames", "where", "since", "compress"]) {
    u.searchParams.delete(key);
  }
  if (query.since !== undefined && query.since !== null) {
    u.searchParams.set("since", String(query.since));
  } else if (query.offset !== undefined && query.offset !== null) {
    u.searchParams.set("offset", String(query.offset));
  }
  if (query.where !== undefined && query.where !== null) {
    u.searchParams.set(
      "where",
      typeof query.where === "string" ? query.where : JSON.stringify(query.where),
    );
  }
  if (query.streamId) u.searchParams.set("stream_id", query.streamId);
  if (query.frames && query.frames !== "single") u.searchParams.set("frames", query.frames);
  if (query.compress) u.searchParams.set("compress", query.compress);
  return u.toString();
}

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
 * import { isStreamName } from "./wire.ts";
 * deepStrictEqual(["trades", "", "_x"].map(isStreamName), [true, true, false]);
 * ```
 */
export function isStreamName(name: string): boolean {
  return STREAM_NAME_PATTERN.test(name);
}

/**
 * Splits a batched text frame into its `[offset,msg]` lines (one line when the
 * frame is a single frame).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { splitBatch } from "./wire.ts";
 * equal(splitBatch('[1,{"a":1}]\n[2,{"a":2}]').length, 2);
 * ```
 */
export function splitBatch(frame: string): string[] {
  return frame.split("\n");
}
