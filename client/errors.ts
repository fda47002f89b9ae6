/**
 * The errors a subscription raises. The WebSocket close code decides the
 * class; the close reason (compact JSON, see `wire/close_reason.ts`) only fills in the
 * numbers, so a reason that is missing or not JSON still gives the right class.
 *
 * | code | class |
 * |---|---|
 * | 4400, malformed frames, offsets out of order | {@linkcode ProtocolError} |
 * | 4404 | {@linkcode StreamNotFound} |
 * | 4416 | {@linkcode NotReplayable} (with `why`) |
 * | 4429 | {@linkcode TooSlow} (with `resume`) |
 * | anything else (1001, 1006, …) | {@linkcode ConnectionClosed} |
 *
 * Every class extends {@linkcode SubscriptionError}, whose `reconnectable`
 * says whether `reconnect: true` retries after it.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { closeError, NotReplayable } from "./errors.ts";
 * const err = closeError(4416, '{"error":"not_replayable","why":"ahead","offset":12,"end_offset":11}', {
 *   url: "ws://127.0.0.1:8765/trades",
 * });
 * ok(err instanceof NotReplayable);
 * equal(err.why, "ahead");
 * ```
 *
 * This module uses only web APIs: it runs in Deno and in browsers.
 *
 * @module
 */

import type { OffsetRequest } from "../wire/subscribe.ts";
import {
  CloseCode,
  type CloseReason,
  decodeCloseReason,
  NOT_REPLAYABLE_WHYS,
  type NotReplayableWhy,
} from "../wire/close_reason.ts";

/**
 * What the client knew when a subscription failed; used to word messages.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { closeError, type ErrorContext } from "./errors.ts";
 * const ctx: ErrorContext = { url: "ws://h/trades", offset: 5, streamId: null };
 * ok(closeError(4416, "", ctx).message.includes("offset 5"));
 * ```
 */
export interface ErrorContext {
  /** The stream URL (without the subscribe query). */
  url: string;
  /** The offset the failed subscribe asked for (`null`: live). */
  offset?: OffsetRequest;
  /** The `stream_id` the failed subscribe sent, if any. */
  streamId?: string | null;
}

/**
 * Close codes after which `reconnect: true` connects again: the server going
 * away (1001), a drop without a close frame (1006) and the other transient
 * codes of RFC 6455 / the IANA registry, a normal close the client did not ask
 * for (1000), and 4429 (too slow).
 */
export const RECONNECT_CODES: readonly number[] = [
  1000,
  CloseCode.GoingAway,
  1005,
  1006,
  1011,
  1012,
  1013,
  1014,
  CloseCode.TooSlow,
];

/** The stream's name from its URL path (`""` for the unnamed stream). */
function streamName(url: string): string {
  try {
    const path = decodeURIComponent(new URL(url).pathname);
    const name = path.replace(/^\/+/, "").split("/")[0];
    return name === "_" ? "" : name;
  } catch {
    return url;
  }
}

function quoteStream(url: string): string {
  const name = streamName(url);
  return name === "" ? "the unnamed stream" : `stream "${name}"`;
}

function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

/**
 * The base class of every error a subscription raises.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { closeError, SubscriptionError } from "./errors.ts";
 * const err = closeError(1006, "", { url: "ws://127.0.0.1:1/trades" });
 * ok(err instanceof SubscriptionError);
 * equal(err.code, 1006);
 * equal(err.reconnectable, true);
 * ```
 */
export class SubscriptionError extends Error {
  /** The WebSocket close code, or `null` when the client detected the problem itself. */
  readonly code: number | null;
  /** The close reason as received (`""` when none). */
  readonly reason: string;
  /** The stream URL. */
  readonly url: string;

  /** Makes the error; `code` is the close code (or `null`). */
  constructor(message: string, code: number | null, reason: string, url: string) {
    super(message);
    this.name = "SubscriptionError";
    this.code = code;
    this.reason = reason;
    this.url = url;
  }

  /** Whether `reconnect: true` connects again after this error. */
  get reconnectable(): boolean {
    return this.code !== null && RECONNECT_CODES.includes(this.code);
  }
}

/**
 * The server refused the subscribe's path or query (4400), or it sent
 * something this client cannot accept: a frame that is not `[offset,msg]`, an
 * offset not greater than the one before, a greeting of another protocol.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { closeError, ProtocolError } from "./errors.ts";
 * const err = closeError(4400, '{"error":"protocol","detail":"unknown parameter ofset"}', {
 *   url: "ws://127.0.0.1:8765/trades?ofset=3",
 * });
 * ok(err instanceof ProtocolError);
 * equal(err.detail, "unknown parameter ofset");
 * ```
 */
export class ProtocolError extends SubscriptionError {
  /** What did not parse or was out of order. */
  readonly detail: string;

  /** Makes the error; `code` is 4400 for a refusal, `null` for a client-side check. */
  constructor(detail: string, url: string, code: number | null = null, reason = "") {
    super(
      code === CloseCode.Protocol
        ? `subscribe to ${url} refused (4400): ${detail}. Check the URL's path and query ` +
          `(the client sets offset, stream_id and frames itself)`
        : `protocol error on ${url}: ${detail}`,
      code,
      reason,
      url,
    );
    this.name = "ProtocolError";
    this.detail = detail;
  }
}

/**
 * The server has no stream by that name (4404).
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { closeError, StreamNotFound } from "./errors.ts";
 * const err = closeError(4404, "", { url: "ws://127.0.0.1:8765/nope" });
 * ok(err instanceof StreamNotFound);
 * equal(err.stream, "nope");
 * ```
 */
export class StreamNotFound extends SubscriptionError {
  /** The stream name asked for. */
  readonly stream: string;

  /** Makes the error for `stream` at `url`; `code` is `null` for an HTTP 404. */
  constructor(stream: string, url: string, reason = "", code: number | null = CloseCode.NotFound) {
    const base = new URL(url);
    base.pathname = "/_/streams";
    base.search = "";
    base.protocol = base.protocol === "wss:"
      ? "https:"
      : base.protocol === "ws:"
      ? "http:"
      : base.protocol;
    super(
      `no ${stream === "" ? "unnamed stream" : `stream "${stream}"`} at ${url} ` +
        `(${code === null ? "HTTP 404" : code}): check the name; GET ${base} lists the ` +
        `streams this server has`,
      code,
      reason,
      url,
    );
    this.name = "StreamNotFound";
    this.stream = stream;
  }
}

/**
 * The numbers a {@linkcode NotReplayable} carries (each when the server sent it).
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { NotReplayable, type NotReplayableInfo } from "./errors.ts";
 * const info: NotReplayableInfo = { why: "evicted", offset: 100, earliest: 5000 };
 * ok(new NotReplayable("ws://h/trades", info).message.includes("5000"));
 * ```
 */
export interface NotReplayableInfo {
  /** Why the offset cannot be served (`null`: the reason was missing or not JSON). */
  why: NotReplayableWhy | null;
  /** The offset asked for. */
  offset?: number;
  /** The earliest offset the stream still serves. */
  earliest?: number | null;
  /** The stream's end offset (exclusive: the next offset to be written). */
  endOffset?: number;
  /** Rows between `offset` and `endOffset`. */
  rows?: number;
  /** The server's `max_replay`. */
  maxReplay?: number;
  /** The `stream_id` the client sent. */
  streamId?: string | null;
}

function notReplayableMessage(url: string, i: NotReplayableInfo): string {
  const s = quoteStream(url);
  const at = i.offset !== undefined ? `offset ${i.offset}` : "the offset asked for";
  switch (i.why) {
    case "not_durable":
      return `${s} is ephemeral (it has no log), so ${at} cannot be replayed (4416 not_durable). ` +
        `Subscribe live: no offset and no cursor.`;
    case "other_stream":
      return `${s} at ${url} is not the log your position came from (4416 other_stream): you sent ` +
        `stream_id ${i.streamId ?? "(unknown)"}, and the server's log has another id (it was ` +
        `wiped and recreated, or this is another server). Your offset means nothing here: ` +
        `delete the saved cursor and start again at offset "earliest" or live, knowing that ` +
        `rows of the old log are not on this one.`;
    case "ahead":
      return `${at} is ahead of ${s}, whose end is ${i.endOffset ?? "(unknown)"} ` +
        `(the next offset to be written) (4416 ahead). The position came from a longer or ` +
        `another log, or is a typo: check the stream_id, then subscribe at ${
          i.endOffset ?? "the end"
        } to go live or at "earliest" to re-read what is there.`;
    case "empty":
      return `${s} holds no row it can serve below its end ${i.endOffset ?? "(unknown)"}, ` +
        `so ${at} cannot be replayed (4416 empty: everything was evicted). Subscribe at ` +
        `${i.endOffset ?? "the end"} (live) or at "earliest"; older rows are only in the ` +
        `archive, if the stream has one.`;
    case "evicted": {
      const gap = i.offset !== undefined && typeof i.earliest === "number"
        ? ` (a gap of ${i.earliest - i.offset} offsets)`
        : "";
      return `${at} was evicted from ${s}: the earliest offset it still serves is ` +
        `${i.earliest ?? "(unknown)"} (4416 evicted). Read ${i.offset ?? "the offset"}..${
          typeof i.earliest === "number" ? i.earliest - 1 : "earliest-1"
        } from the archive first, or resume at "earliest" accepting the gap${gap}.`;
    }
    case "too_old": {
      const oldest = i.endOffset !== undefined && i.maxReplay !== undefined
        ? ` (about offset ${Math.max(1, i.endOffset - i.maxReplay)})`
        : "";
      return `${at} of ${s} is ${i.rows ?? "more"} rows behind its end ${
        i.endOffset ?? "(unknown)"
      }, more than the server's max_replay of ${i.maxReplay ?? "(unknown)"} ` +
        `(4416 too_old). Resume within the last ${
          i.maxReplay ?? "max_replay"
        } rows${oldest}, read the gap from the archive, or ask the operator to raise ` +
        `--max-replay.`;
    }
    default:
      return `${s} cannot serve ${at} (4416; the server gave no reason that this client ` +
        `understands). Subscribe live or at "earliest", or check the server's version.`;
  }
}

/**
 * The server cannot serve the offset asked for (4416). `why` says which check
 * refused it, the other fields carry the numbers the server sent, and the
 * message says what to do next.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { NotReplayable } from "./errors.ts";
 * const err = new NotReplayable("ws://127.0.0.1:8765/trades", {
 *   why: "too_old", offset: 2, rows: 9, maxReplay: 5, endOffset: 11,
 * });
 * ok(err.message.includes("max_replay of 5"));
 * ```
 */
export class NotReplayable extends SubscriptionError {
  /** Why the offset cannot be served (`null`: the reason was missing or not JSON). */
  readonly why: NotReplayableWhy | null;
  /** The offset asked for, when known. */
  readonly offset: number | undefined;
  /** The earliest offset the stream still serves, when sent. */
  readonly earliest: number | null | undefined;
  /** The stream's end offset (exclusive), when sent. */
  readonly endOffset: number | undefined;
  /** Rows between `offset` and `endOffset`, when sent (`too_old`). */
  readonly rows: number | undefined;
  /** The server's `max_replay`, when sent (`too_old`). */
  readonly maxReplay: number | undefined;

  /** Makes the error from what is known about the refusal. */
  constructor(url: string, info: NotReplayableInfo, reason = "") {
    super(notReplayableMessage(url, info), CloseCode.NotReplayable, reason, url);
    this.name = "NotReplayable";
    this.why = info.why;
    this.offset = info.offset;
    this.earliest = info.earliest;
    this.endOffset = info.endOffset;
    this.rows = info.rows;
    this.maxReplay = info.maxReplay;
  }
}

/**
 * The server dropped the subscriber for reading too slowly (4429). On a
 * durable stream `resume` is the offset to resume at; on an ephemeral stream it
 * is `null` and the rows sent meanwhile are lost.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { closeError, TooSlow } from "./errors.ts";
 * const err = closeError(4429, '{"error":"too_slow","resume":20481}', { url: "ws://h/trades" });
 * ok(err instanceof TooSlow);
 * equal(err.resume, 20481);
 * ```
 */
export class TooSlow extends SubscriptionError {
  /** The offset to resume at, or `null` (ephemeral stream, or not sent). */
  readonly resume: number | null;

  /** Makes the error. */
  constructor(url: string, resume: number | null, reason = "") {
    super(
      `${quoteStream(url)} dropped this subscriber for reading too slowly (4429). ` +
        (resume !== null
          ? `Resume at offset ${resume} (reconnect: true does this).`
          : `The stream is ephemeral: rows sent meanwhile are lost; subscribe live again ` +
            `(reconnect: true does this) and read faster, or ask for a larger --max-backlog.`),
      CloseCode.TooSlow,
      reason,
      url,
    );
    this.name = "TooSlow";
    this.resume = resume;
  }
}

/**
 * The token the socket was opened with expired (4401 `token_expired`): the
 * server closed the subscription at its `exp`. `resume` is the offset to
 * resume at (`null` on an ephemeral stream). With `token` given as a
 * function, the subscription reconnects on a fresh token by itself.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { closeError, TokenExpired } from "./errors.ts";
 * const err = closeError(4401, '{"error":"token_expired","resume":12}', { url: "ws://h/trades" });
 * ok(err instanceof TokenExpired);
 * equal(err.resume, 12);
 * ```
 */
export class TokenExpired extends SubscriptionError {
  /** The offset to resume at, or `null` (ephemeral stream, or not sent). */
  readonly resume: number | null;

  /** Makes the error. */
  constructor(url: string, resume: number | null, reason = "") {
    super(
      `${quoteStream(url)} closed this subscription: its token expired (4401). ` +
        (resume !== null ? `Resume at offset ${resume} ` : "Subscribe again ") +
        "with a fresh token (a token function does this).",
      CloseCode.Unauthorized,
      reason,
      url,
    );
    this.name = "TokenExpired";
    this.resume = resume;
  }
}

function describeCode(code: number | null): string {
  switch (code) {
    case null:
      return "no close code";
    case 1000:
      return "1000: closed normally by the server";
    case 1001:
      return "1001: the server is shutting down";
    case 1005:
      return "1005: closed without a status";
    case 1006:
      return "1006: connection dropped or refused, no close frame";
    case 1008:
      return "1008: policy violation (subscriptions are read-only)";
    case 1009:
      return "1009: message too big";
    case 1011:
      return "1011: server error";
    case 4401:
      return "4401: not authorized";
    default:
      return String(code);
  }
}

/**
 * The connection ended without a refusal: the server shut down (1001), the
 * connection dropped (1006), no greeting came in time, and so on. With
 * `reconnect: true` the reconnectable ones are retried; without, the iteration
 * ends by throwing this.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ConnectionClosed } from "./errors.ts";
 * const err = new ConnectionClosed("ws://127.0.0.1:8765/trades", 1001, "", 57);
 * equal(
 *   err.message,
 *   "connection to ws://127.0.0.1:8765/trades closed (1001: the server is shutting down). " +
 *     "Resume at offset 57 with the same stream_id (reconnect: true does this).",
 * );
 * ```
 */
export class ConnectionClosed extends SubscriptionError {
  /** Whether the close handshake completed (false for a drop). */
  readonly wasClean: boolean;
  /** The offset to resume at, when the client knows one. */
  readonly resume: number | null;

  /**
   * Makes the error. `resume` is the next offset the client would read;
   * `detail` replaces the description of the code (e.g. a timeout).
   */
  constructor(
    url: string,
    code: number | null,
    reason: string,
    resume: number | null = null,
    detail?: string,
    wasClean = false,
  ) {
    const tail = resume !== null
      ? ` Resume at offset ${resume} with the same stream_id (reconnect: true does this).`
      : "";
    super(
      `connection to ${url} closed (${detail ?? describeCode(code)})` +
        (reason ? `: ${reason}` : "") + "." + tail,
      code,
      reason,
      url,
    );
    this.name = "ConnectionClosed";
    this.wasClean = wasClean;
    this.resume = resume;
  }
}

/**
 * The typed error for a close `code` and `reason`. The code decides the class;
 * numbers come from the reason when it is JSON, else from `ctx`.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { closeError, NotReplayable } from "./errors.ts";
 * // A reason that is not JSON still gives the class the code says.
 * const err = closeError(4416, "gone", { url: "ws://h/trades", offset: 5 });
 * ok(err instanceof NotReplayable);
 * equal(err.why, null);
 * ```
 */
export function closeError(
  code: number,
  reason: string,
  ctx: ErrorContext,
  resume: number | null = null,
  wasClean = true,
): SubscriptionError {
  const r: CloseReason | null = decodeCloseReason(reason);
  const f = (r ?? {}) as Record<string, unknown>;
  const asked = typeof ctx.offset === "number" ? ctx.offset : undefined;
  switch (code) {
    case CloseCode.Protocol:
      return new ProtocolError(
        typeof f.detail === "string" ? f.detail : reason || "the server gave no detail",
        ctx.url,
        code,
        reason,
      );
    case CloseCode.NotFound:
      return new StreamNotFound(
        typeof f.stream === "string" ? f.stream : streamName(ctx.url),
        ctx.url,
        reason,
      );
    case CloseCode.NotReplayable: {
      const why = NOT_REPLAYABLE_WHYS.includes(f.why as NotReplayableWhy)
        ? f.why as NotReplayableWhy
        : null;
      return new NotReplayable(ctx.url, {
        why,
        offset: num(f.offset) ?? asked,
        earliest: f.earliest === null ? null : num(f.earliest),
        endOffset: num(f.end_offset),
        rows: num(f.rows),
        maxReplay: num(f.max_replay),
        streamId: ctx.streamId,
      }, reason);
    }
    case CloseCode.TooSlow:
      return new TooSlow(ctx.url, num(f.resume) ?? resume, reason);
    case CloseCode.Unauthorized:
      if (f.error === "token_expired") {
        return new TokenExpired(
          ctx.url,
          f.resume === null ? null : num(f.resume) ?? resume,
          reason,
        );
      }
      return new ConnectionClosed(ctx.url, code, reason, resume, undefined, wasClean);
    default:
      return new ConnectionClosed(ctx.url, code, reason, resume, undefined, wasClean);
  }
}
