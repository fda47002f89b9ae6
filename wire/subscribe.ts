/**
 * The subscribing half of the wire contract: the subscribe query and URL, the
 * subprotocol and token, the greeting that opens every subscription, the
 * head a stream serves, and how batched frames split into rows.
 *
 * Pure (no Deno API, no I/O), like all of `wire/`: the server, the Deno client
 * and the browser client import the one definition.
 *
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { parseSubscribeQuery } from "./subscribe.ts";
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
  /**
   * snapshot=1: the keyed stream's snapshot that follows: the latest row
   * below `end` of each of `keys` keys (those the filter matches), in offset
   * order, then every row from `end` on. Absent without snapshot=1.
   */
  snapshot?: GreetingSnapshot;
}

/** The `snapshot` object of a greeting (snapshot=1). */
export interface GreetingSnapshot {
  /** The rows after the snapshot start here: it is each key's state as of `end - 1`. */
  end: number;
  /** Rows in the snapshot: one per key (that the filter matches). */
  keys: number;
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
  /** A keyed stream's key columns (`serve --key`); absent when it has none. */
  key?: readonly string[];
  /** A keyed stream's keys kept now; absent when it has none. */
  keys?: number;
  /** A durable stream's retention bounds (null: none): seconds of age, bytes of local history. */
  retention?: { age_s: number | null; bytes: number | null };
  /** A durable stream's local history: bytes of its segments and chunks on disk. */
  bytes?: number;
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
  /** snapshot=1: the latest row of each key first, then live (a keyed stream's). */
  snapshot?: boolean;
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
 * The `detail` of the 403 that `/{name}/manifest` and `/{name}/chunks/…`
 * answer a row-level grant (a signed token whose grant filters the
 * stream's rows): chunks hold every row, so such a holder reads through the
 * socket, which filters them. A client catching up from chunks falls back
 * to the socket on it.
 */
export const ROW_LEVEL_DETAIL = "row-level grant: read through the socket";

/** Longest signed token (JWT) a client sends, in characters. */
export const MAX_SIGNED_TOKEN_CHARS = 16384;

/**
 * Whether `token` is one a client may send: a static token
 * ({@linkcode TOKEN_PATTERN}) or a signed one (three base64url parts, at
 * most {@linkcode MAX_SIGNED_TOKEN_CHARS} characters).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { isBearerToken } from "./subscribe.ts";
 * deepStrictEqual(
 *   ["0123456789abcdef", "eyJh.eyJz.c2ln", "a b", "a.b.c.d"].map(isBearerToken),
 *   [true, true, false, false],
 * );
 * ```
 */
export function isBearerToken(token: string): boolean {
  return TOKEN_PATTERN.test(token) ||
    (token.length <= MAX_SIGNED_TOKEN_CHARS &&
      /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token));
}

/**
 * What a bearer token may consist of: it must fit a header, a subprotocol
 * and a query unescaped (`openssl rand -hex 32` makes one).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { TOKEN_PATTERN } from "./subscribe.ts";
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
  "snapshot",
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
 * import { parseSubscribeQuery } from "./subscribe.ts";
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
  const rawSnapshot = params.get("snapshot");
  if (rawSnapshot !== null) {
    if (rawSnapshot !== "1") return { ok: false, detail: `snapshot must be 1, got ${rawSnapshot}` };
    if (offset !== null || rawSince !== null) {
      return { ok: false, detail: "snapshot=1 starts at the snapshot: give no offset or since" };
    }
  }
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
      ...(rawSnapshot !== null ? { snapshot: true } : {}),
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
 * import { parseCompress } from "./subscribe.ts";
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
 * import { subscribeUrl } from "./subscribe.ts";
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
    snapshot?: boolean;
  },
): string {
  const u = new URL(url);
  if (u.protocol === "http:") u.protocol = "ws:";
  if (u.protocol === "https:") u.protocol = "wss:";
  for (const key of ["offset", "stream_id", "frames", "where", "since", "compress", "snapshot"]) {
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
  if (query.snapshot && (query.offset === undefined || query.offset === null) && !query.since) {
    u.searchParams.set("snapshot", "1");
  }
  return u.toString();
}

/**
 * Splits a batched text frame into its `[offset,msg]` lines (one line when the
 * frame is a single frame).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { splitBatch } from "./subscribe.ts";
 * equal(splitBatch('[1,{"a":1}]\n[2,{"a":2}]').length, 2);
 * ```
 */
export function splitBatch(frame: string): string[] {
  return frame.split("\n");
}
