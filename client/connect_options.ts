/**
 * The options of {@linkcode connect} and their defaults.
 *
 * @module
 */

import type { WebSocketConstructor } from "./_connection.ts";
import type { CatchUpOptions } from "./catch_up.ts";
import type { CursorStore } from "./cursor.ts";
import type { SubscriptionError } from "./errors.ts";
import type { Where } from "../wire/filter.ts";

export type { WebSocketConstructor } from "./_connection.ts";

/**
 * Default {@linkcode ConnectOptions.saveEveryRows}.
 */
export const DEFAULT_SAVE_EVERY_ROWS = 10_000;
/**
 * Default {@linkcode ConnectOptions.saveEveryMs}.
 */
export const DEFAULT_SAVE_EVERY_MS = 1_000;
/**
 * Default {@linkcode ConnectOptions.connectTimeoutMs}.
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/**
 * Default {@linkcode BackoffOptions.minMs}.
 */
export const DEFAULT_BACKOFF_MIN_MS = 100;
/**
 * Default {@linkcode BackoffOptions.maxMs}.
 */
export const DEFAULT_BACKOFF_MAX_MS = 10_000;

/**
 * Reconnect delays: capped exponential, with jitter (see {@linkcode backoffDelay}).
 */
export interface BackoffOptions {
  /** The delay before the first attempt (before jitter). @default 100 */
  minMs?: number;
  /** The largest delay (before jitter). @default 10000 */
  maxMs?: number;
}

/** A bearer token, or a function returning one (called before each connect). */
export type TokenSource = string | (() => string | Promise<string>);

/**
 * What {@linkcode ConnectOptions.onReconnect} is told before each reconnect attempt.
 */
export interface ReconnectEvent {
  /** Why the connection ended (attempt 1), or why the previous attempt failed. */
  error: SubscriptionError;
  /** 1 for the first attempt after a connection ended, then 2, 3, … */
  attempt: number;
  /** How long the client waits before this attempt. */
  delayMs: number;
  /** The offset the attempt resumes at; `null` on an ephemeral stream (live). */
  resumeAt: number | null;
  /**
   * `true` on an ephemeral stream: rows published while disconnected are lost
   * (the stream keeps no log). Always `false` on a durable stream, which
   * resumes with no gap.
   */
  lost: boolean;
  /** The URL this attempt goes to: the next of the URLs given, in turn. */
  url: string;
}

/**
 * Options of {@linkcode connect}.
 */
export interface ConnectOptions {
  /**
   * Where to start: an offset (inclusive; 0 means the stream's first offset)
   * or `"earliest"` (the earliest offset still served, accepting any gap).
   * A saved cursor wins over this. Absent: live, from the next row.
   * @default undefined
   */
  offset?: number | "earliest";
  /**
   * Start at a point in time instead of an offset: the first row whose
   * append time (the server's clock at commit) is at or after it — a `Date`,
   * an integer of µs since the epoch, or RFC 3339 text
   * (`"2026-12-01T09:30:00Z"`). After the last row: live. Not with `offset`.
   * A saved cursor wins over this; a reconnect resumes at the offset after
   * the last row received, not at this time again.
   * @default undefined
   */
  since?: Date | number | string;
  /**
   * Where the resume position is loaded from at connect and saved to as the
   * loop runs. When it holds a cursor, that cursor (offset and stream id)
   * wins over `offset`; when it holds none, the start position is saved at
   * connect. Needs a durable stream. A `CursorStore` (`MemoryCursor`,
   * `LocalStorageCursor`, `FileCursor`, your own), or in Deno a file path,
   * which means `new FileCursor(path)`; in a browser a path is a `TypeError`.
   * @default undefined
   */
  cursor?: CursorStore | string;
  /** Save the cursor (awaited, in the loop) once this many rows were handled since the last save. @default 10000 */
  saveEveryRows?: number;
  /** Save the cursor (in the background) at most this long after a row was handled. @default 1000 */
  saveEveryMs?: number;
  /**
   * Called before each cursor save: flush whatever output the handled rows
   * produced, so the saved position never runs ahead of your side effects.
   * A rejection cancels that save.
   * @default undefined
   */
  beforeSave?: () => void | Promise<void>;
  /**
   * Reconnect after 1001, 4429 or a dropped connection (see `RECONNECT_CODES`),
   * with backoff, at the offset after the last row received and with the
   * known stream id. A refusal (4400, 4404, 4416) is always thrown. The first
   * connect is never retried: `connect()` itself rejects.
   * @default false
   */
  reconnect?: boolean;
  /** Delays between reconnect attempts. @default {minMs: 100, maxMs: 10000} */
  backoff?: BackoffOptions;
  /** Told before each reconnect attempt (an exception thrown here ends the iteration). @default undefined */
  onReconnect?: (event: ReconnectEvent) => void;
  /** Aborting closes the subscription: `connect()` or the loop rejects with the signal's reason. @default undefined */
  signal?: AbortSignal;
  /** Give up on a connect (or a reconnect attempt) without a greeting after this long. @default 10000 */
  connectTimeoutMs?: number;
  /** The WebSocket constructor to use. @default globalThis.WebSocket */
  WebSocket?: WebSocketConstructor;
  /**
   * A bearer token, for a server started with a tokens file or signed
   * tokens: the token, or a function (sync or async) returning one, called
   * before each connect and reconnect — so a short-lived signed token is
   * fresh each time, and when the server closes the subscription at the
   * token's expiry (4401 `token_expired`) it reconnects on a new token from
   * where it was, with or without `reconnect`. The socket offers it as the
   * subprotocol `bearer.TOKEN` beside `streamcast` (the form browsers can
   * send); catch-up's HTTP requests to the server send it as
   * `Authorization: Bearer TOKEN`. A server that refuses it (HTTP 401/403
   * before the upgrade) makes `connect()` reject with a `ConnectionClosed`
   * of code 4401, which `reconnect` does not retry. It appears in no error
   * message.
   * @default undefined
   */
  token?: TokenSource;
  /**
   * When a subscribe is refused `too_old` (or `evicted`/`empty`, given an
   * `archive` source), read the gap from the server's chunks over HTTP — with no socket
   * open — then subscribe where they end; repeat until accepted. Chunks are
   * checked against their SHA-256. zstd is decoded with `node:zlib` where it
   * exists; elsewhere pass `{ decompress }`. See `client/catch_up.ts`.
   * @default false
   */
  catchUp?: boolean | CatchUpOptions;
  /**
   * Only the rows this filter matches (`where=`, see `wire/filter.ts`): an
   * object such as `{ symbol: ["BTC-USD", "ETH-USD"], size: { gte: 1 } }`,
   * or its JSON text. Sent on every (re)connect; the server refuses a filter
   * that does not fit the stream's columns (`ProtocolError` naming `where`).
   * Offsets skip the rows left out. Catch-up applies the same filter to the
   * rows it reads from chunks.
   * @default undefined
   */
  where?: Where | string;
  /**
   * A keyed stream's snapshot first (`snapshot=1`): the latest row of each
   * key (that `where` matches), in offset order, then every row after them,
   * live, with nothing missed between. The greeting's `snapshot` says where
   * the rows after it start. Not with `offset` or `since`; a saved cursor
   * wins over it, and a reconnect resumes at the offset after the last row
   * received (past the snapshot's end once all of it came).
   * @default false
   */
  snapshot?: boolean;
  /**
   * compress= (§16, §20): `"zstd-stream"` asks for the server's compressed
   * stream (one zstd stream per group of subscribers, compressed once; the
   * fewest bytes a live row), decoded here with a streaming decoder that
   * also runs in a browser; `"zstd"` asks for one zstd frame per batched
   * frame (decoded with `node:zlib`: not in a browser), `"zstd-dict"` the
   * same with the stream's dictionary (fetched once); `false` keeps text
   * frames. Default: `"zstd-stream"`, and a server that refuses it is asked
   * again with less (`zstd-dict`, `zstd` where `node:zlib` has zstd, then
   * none); a server without libzstd answers `"zstd-stream"` with plain
   * `"zstd"` frames, which are decoded too. A message that does not decode
   * ends the subscription with a `ProtocolError` saying so.
   * @default "zstd-stream"
   */
  compress?: "zstd-stream" | "zstd-dict" | "zstd" | false;
}

/**
 * The options a `Subscription` runs with: {@linkcode ConnectOptions}
 * as `connect` checked them, with the cursor resolved to a store.
 */
export interface SubscriptionOptions extends Omit<ConnectOptions, "cursor"> {
  /** The cursor store (a path was made a `FileCursor` by `connect`). @default undefined */
  cursor?: CursorStore;
  /** @internal compress= (§16): the zstd decoder `connect` loaded, or null (text frames). */
  _zstd?: ((bytes: Uint8Array, maxBytes: number) => Uint8Array) | null;
  /** @internal compress= (§16): true when compress was not given (then a 4400 naming it falls back). */
  _zstdDefault?: boolean;
  /**
   * @internal compress=zstd-dict (§16): the decoder of frames made with a
   * dictionary, or null (frames without one).
   */
  _zstdDict?: ((bytes: Uint8Array, dict: Uint8Array) => Uint8Array) | null;
  /** @internal compress=zstd-stream (§20): whether to ask for it. */
  _zstdStream?: boolean;
}
