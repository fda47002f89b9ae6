/**
 * The HTTP and WebSocket front of a set of streams, on one port.
 *
 * | route | what |
 * |---|---|
 * | WebSocket `/{name}` (`/` for the unnamed stream) | subscribe (see docs/SPEC.md §2) |
 * | `GET /{name}/head` (`/_/head` for the unnamed stream) | the stream's head |
 * | `GET /{name}/manifest` | the stream's chunk manifest |
 * | `GET /{name}/chunks/{sha256}` | a chunk's bytes (ETag, Range, immutable) |
 * | `GET /_/health` | 200 while serving |
 * | `GET /_/metrics` | Prometheus text |
 * | `GET /_/streams` | every stream's head |
 * | `GET /` and `GET /{name}` without an upgrade | the web viewer |
 * | `GET /_/client.js`, `GET /_/viewer.js` | the viewer's scripts (see viewer.ts) |
 *
 * Every request is checked in this order, each check answering before the
 * next runs: URL length (414); method (405); with a tokens file, the bearer
 * token (400, 401) except for `/_/health` and the viewer's scripts; then for
 * an upgrade the connection limit (503), the stream's permission (403), the
 * path (4400), the stream (4404), the query (4400), the offset (4416) and
 * the stream's subscriber limit (1013); for other routes the permission (403)
 * and the route. The limits are in `limits.ts`, the tokens in `auth.ts`, the
 * events logged in `logger.ts`.
 *
 * @module
 */

import {
  CloseCode,
  encodeCloseReason,
  type NotReplayableReason,
  parseSubscribeQuery,
  SUBPROTOCOL,
  type SubscribeQuery,
} from "../client/wire.ts";
import { CONTENT_TYPE, Registry } from "./metrics.ts";
import { COMMIT_BUCKETS_MS, type Stream } from "./stream.ts";
import { chunkPath } from "../log/mod.ts";
import type { Subscriber } from "./subscriber.ts";
import { viewerAsset, viewerPage } from "./viewer.ts";
import {
  findToken,
  forbidden,
  type Grant,
  offeredProtocols,
  TokenTable,
  unauthorized,
} from "./auth.ts";
import {
  checkLimit,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_REPLAY_READERS,
  DEFAULT_MAX_URL_BYTES,
  Gate,
  TRY_AGAIN_LATER,
} from "./limits.ts";
import { type LogFields, Logger } from "../common/logger.ts";

export { type Grant, TokenTable } from "./auth.ts";
export {
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_REPLAY_READERS,
  DEFAULT_MAX_ROW_BYTES,
  DEFAULT_MAX_SUBSCRIBERS,
  DEFAULT_MAX_URL_BYTES,
} from "./limits.ts";
export {
  type LogFields,
  type LogFormat,
  Logger,
  type LoggerOptions,
  type LogLevel,
} from "../common/logger.ts";

/** Options of {@linkcode serve}. */
export interface ServeOptions {
  /** Address to listen on. @default "127.0.0.1" */
  hostname?: string;
  /** Port to listen on; 0 picks a free one. @default 8765 */
  port?: number;
  /** Aborting it shuts the server down like {@linkcode Server.shutdown}. */
  signal?: AbortSignal;
  /** Ping idle sockets this often and drop those that do not answer (seconds; 0: off). @default 30 */
  pingIntervalS?: number;
  /** Longest request URL accepted, in bytes; a longer one is answered 414. @default 8192 */
  maxUrlBytes?: number;
  /**
   * WebSocket connections open at once: subscribers, and refused sockets
   * until their close completes. One more upgrade is answered HTTP 503 with
   * `Retry-After: 1`, before the upgrade.
   * @default 10000
   */
  maxConnections?: number;
  /**
   * Log reads in flight at once for catching-up subscribers, across every
   * stream of the server; a read beyond it waits its turn (first come, first
   * served): nobody is refused.
   * @default 16
   */
  maxReplayReaders?: number;
  /**
   * Bearer tokens granting read access per stream (see `auth.ts`); checked
   * before the upgrade and on every route but `/_/health` and the viewer's
   * scripts. `null`: no access control.
   * @default null
   */
  tokens?: TokenTable | null;
  /**
   * Where events go (subscribes, refusals, drops, errors; see docs/CLI.md).
   * @default a text Logger at level "warn" on stderr
   */
  logger?: Logger;
  /** Called once listening. @default logs "listening on http://HOST:PORT" to stderr */
  onListen?: (addr: Deno.NetAddr) => void;
  /** TLS certificate and key (PEM), to serve https:// and wss://. */
  tls?: { cert: string; key: string };
  /** Close the streams (and their logs) on shutdown. @default true */
  closeStreams?: boolean;
  /** On shutdown, how long to wait for subscribers' sockets to close after 1001. @default 2000 */
  closeWaitMs?: number;
}

/**
 * A running server.
 *
 * @example
 * ```ts
 * import { serve, Stream, TokenTable } from "../mod.ts";
 * const stream = new Stream("ticks", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const tokens = (t: string) => TokenTable.parse({ tokens: [{ token: t, streams: ["*"] }] });
 * const server = serve([stream], { port: 0, onListen: () => {}, tokens: tokens("a".repeat(16)) });
 * const head = (t: string) =>
 *   fetch(`${server.url}/ticks/head`, { headers: { authorization: `Bearer ${t}` } })
 *     .then(async (res) => (await res.body?.cancel(), res.status));
 * console.log(await head("a".repeat(16))); // 200
 * server.setTokens(tokens("b".repeat(16))); // e.g. on SIGHUP, after re-reading the file
 * console.log(await head("a".repeat(16)), await head("b".repeat(16))); // 401 200
 * await server.shutdown();
 * ```
 */
export interface Server {
  /** The address it listens on. */
  readonly addr: Deno.NetAddr;
  /** `http://HOST:PORT`. */
  readonly url: string;
  /** The streams by name. */
  readonly streams: ReadonlyMap<string, Stream>;
  /** The registry behind `/_/metrics` (add your own metrics to it). */
  readonly metrics: Registry;
  /** Resolves once the server has shut down. */
  readonly finished: Promise<void>;
  /**
   * Stops accepting connections, closes every subscriber with 1001, flushes
   * and closes the streams' logs.
   */
  shutdown(): Promise<void>;
  /**
   * Replaces the bearer tokens every later request is checked against (a
   * reloaded tokens file). Subscriptions already open are not checked again:
   * they stay until they close. A server started without tokens starts
   * checking them from now on.
   */
  setTokens(tokens: TokenTable): void;
}

/** The start a subscribe asks for, once checked: a first offset, or live. */
export type StartDecision =
  | { ok: true; from: number | null }
  | { ok: false; reason: NotReplayableReason };

/**
 * Decides where a subscribe starts, or why it is refused, checking in the
 * order `not_durable`, `other_stream`, `ahead`, `empty`, `evicted`, `too_old`.
 *
 * @example
 * ```ts
 * import { decideStart } from "./serve.ts";
 * const log = { streamId: "0".repeat(32), endOffset: 10, earliest: 1, firstOffset: 1,
 *   rowsBetween: (a: number, b: number) => b - a };
 * const q = { offset: 12, streamId: null, frames: "single" as const, token: null };
 * const d = decideStart(log, null, q);
 * console.log(d.ok ? d.from : d.reason.why); // ahead
 * ```
 */
export function decideStart(
  log: {
    streamId: string;
    endOffset: number;
    earliest: number | null;
    firstOffset: number;
    rowsBetween(from: number, to: number): number;
    /** Last offset served as chunks over HTTP (null: the log keeps no chunks). */
    readonly chunksThrough?: number | null;
  } | null,
  maxReplay: number | null,
  q: SubscribeQuery,
): StartDecision {
  if (!log) {
    if (q.offset !== null) {
      return { ok: false, reason: { error: "not_replayable", why: "not_durable" } };
    }
    if (q.streamId !== null) {
      return { ok: false, reason: { error: "not_replayable", why: "other_stream" } };
    }
    return { ok: true, from: null };
  }
  if (q.streamId !== null && q.streamId !== log.streamId) {
    return { ok: false, reason: { error: "not_replayable", why: "other_stream" } };
  }
  const end = log.endOffset;
  if (q.offset === null) return { ok: true, from: null };
  const earliest = log.earliest;
  let from: number;
  if (q.offset === "earliest") {
    if (earliest === null) return { ok: true, from: end };
    from = earliest;
  } else {
    from = q.offset === 0 ? log.firstOffset : q.offset;
    if (from > end) {
      return {
        ok: false,
        reason: { error: "not_replayable", why: "ahead", offset: q.offset, end_offset: end },
      };
    }
    if (from === end) return { ok: true, from };
    if (earliest === null) {
      return {
        ok: false,
        reason: { error: "not_replayable", why: "empty", offset: q.offset, end_offset: end },
      };
    }
    if (from < earliest) {
      return {
        ok: false,
        reason: { error: "not_replayable", why: "evicted", offset: q.offset, earliest },
      };
    }
  }
  if (maxReplay !== null) {
    const rows = log.rowsBetween(from, end);
    // Refusing helps a client only if it can read the start some other way:
    // over HTTP from the chunks. Rows not sealed into chunks yet can only come
    // through the socket, and how many there are is bounded by sealing.
    const through = log.chunksThrough;
    const refuse = through === undefined || through === null || from <= through;
    if (rows > maxReplay && refuse) {
      return {
        ok: false,
        reason: {
          error: "not_replayable",
          why: "too_old",
          offset: from,
          end_offset: end,
          rows,
          max_replay: maxReplay,
        },
      };
    }
  }
  return { ok: true, from };
}

/** Close codes of a server-side drop of an accepted subscriber (logged as `dropped`). */
const DROP_CODES: ReadonlySet<number> = new Set([
  CloseCode.PolicyViolation,
  CloseCode.MessageTooBig,
  1011,
  CloseCode.TooSlow,
]);

/** How often the archive's last error is looked at, for the log. */
const ARCHIVE_WATCH_MS = 1000;

/** The fields of a JSON close reason, for a log event; `{}` when it is not JSON. */
function parseReason(reason: string | undefined): LogFields {
  if (!reason) return {};
  try {
    const v = JSON.parse(reason);
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body) + "\n", {
    status,
    headers: { "content-type": "application/json; charset=utf-8", ...headers },
  });
}

function notFound(detail: string): Response {
  return json({ error: "not_found", detail }, 404);
}

/** Splits a request path into a stream name and the rest; null if it does not parse. */
function route(pathname: string): { name: string; rest: string } | null {
  let path: string;
  try {
    path = decodeURIComponent(pathname);
  } catch {
    return null;
  }
  if (path === "/") return { name: "", rest: "" };
  const parts = path.slice(1).split("/");
  if (parts[0] === "_") return { name: "", rest: parts.slice(1).join("/") };
  return { name: parts[0], rest: parts.slice(1).join("/") };
}

/** Serves a chunk file: whole, or the byte range asked for. */
export async function serveChunk(req: Request, path: string, sha: string): Promise<Response> {
  const etag = `"${sha}"`;
  const base: Record<string, string> = {
    "content-type": "application/zstd",
    "etag": etag,
    "cache-control": "public, max-age=31536000, immutable",
    "accept-ranges": "bytes",
  };
  const inm = req.headers.get("if-none-match");
  if (inm && inm.split(",").some((t) => t.trim() === etag || t.trim() === "*")) {
    return new Response(null, { status: 304, headers: base });
  }
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return notFound(`no chunk ${sha}`);
    throw err;
  }
  const size = (await file.stat()).size;
  let start = 0;
  let end = size - 1;
  let status = 200;
  const range = req.headers.get("range");
  if (range) {
    const m = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
    if (m && (m[1] !== "" || m[2] !== "")) {
      if (m[1] === "") {
        start = Math.max(0, size - Number(m[2]));
      } else {
        start = Number(m[1]);
        if (m[2] !== "") end = Math.min(end, Number(m[2]));
      }
      if (start > end || start >= size) {
        file.close();
        return new Response(null, {
          status: 416,
          headers: { ...base, "content-range": `bytes */${size}` },
        });
      }
      status = 206;
      base["content-range"] = `bytes ${start}-${end}/${size}`;
    }
    // A range we do not understand (several ranges, say) gets the whole chunk.
  }
  const length = end - start + 1;
  base["content-length"] = String(length);
  if (req.method === "HEAD") {
    file.close();
    return new Response(null, { status, headers: base });
  }
  await file.seek(start, Deno.SeekMode.Start);
  let left = length;
  const body = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const buf = new Uint8Array(Math.min(left, 256 * 1024));
        const n = await file.read(buf);
        if (n === null || n === 0) {
          file.close();
          ctrl.close();
          return;
        }
        left -= n;
        ctrl.enqueue(buf.subarray(0, n));
        if (left <= 0) {
          file.close();
          ctrl.close();
        }
      } catch (err) {
        file.close();
        ctrl.error(err);
      }
    },
    cancel() {
      file.close();
    },
  });
  return new Response(body, { status, headers: base });
}

function label(v: string): string {
  return v.replace(/[\\"\n]/g, (c) => (c === "\n" ? "\\n" : "\\" + c));
}

function streamMetrics(streams: readonly Stream[]): string {
  type Line = [string, string, string, [string, number][]];
  const lines: Line[] = [];
  const per = (
    name: string,
    type: string,
    help: string,
    get: (s: Stream) => [string, number][],
  ) => {
    const out: [string, number][] = [];
    for (const s of streams) out.push(...get(s));
    lines.push([name, type, help, out]);
  };
  const st = (s: Stream) => `stream="${label(s.name)}"`;
  per(
    "streamcast_rows_appended_total",
    "counter",
    "Rows made durable (sent, on ephemeral streams).",
    (s) => [[`{${st(s)}}`, s.stats.rowsAppended]],
  );
  per(
    "streamcast_rows_rejected_total",
    "counter",
    "Rows refused by the stream's schema.",
    (s) => [[`{${st(s)}}`, s.stats.rowsRejected]],
  );
  per(
    "streamcast_commits_total",
    "counter",
    "Log commits (one write and one sync each).",
    (s) => [[`{${st(s)}}`, s.stats.commits]],
  );
  per("streamcast_frames_sent_total", "counter", "WebSocket frames sent.", (s) => [[
    `{${st(s)}}`,
    s.stats.framesSent,
  ]]);
  per("streamcast_bytes_sent_total", "counter", "Bytes of frame text sent.", (s) => [[
    `{${st(s)}}`,
    s.stats.bytesSent,
  ]]);
  per(
    "streamcast_replay_rows_total",
    "counter",
    "Rows sent from the log to catching-up subscribers.",
    (s) => [[`{${st(s)}}`, s.stats.replayRows]],
  );
  per("streamcast_subscribes_total", "counter", "Subscribes accepted.", (s) => [[
    `{${st(s)}}`,
    s.stats.subscribes,
  ]]);
  per("streamcast_subscribers", "gauge", "Subscribers connected, by state.", (s) => {
    const states = s.subscriberStates();
    return [
      [`{${st(s)},state="catching_up"}`, states.catching_up],
      [`{${st(s)},state="live"}`, states.live],
    ];
  });
  per(
    "streamcast_drops_total",
    "counter",
    "Subscribers dropped (backlog, stalled) or sent back to the log (to_catch_up), by reason.",
    (s) => Object.entries(s.stats.drops).map(([r, n]) => [`{${st(s)},reason="${label(r)}"}`, n]),
  );
  per(
    "streamcast_refusals_total",
    "counter",
    "Subscribes refused, by why.",
    (s) => Object.entries(s.stats.refusals).map(([r, n]) => [`{${st(s)},why="${label(r)}"}`, n]),
  );
  per(
    "streamcast_end_offset",
    "gauge",
    "The next offset to be written.",
    (s) => s.endOffset === null ? [] : [[`{${st(s)}}`, s.endOffset]],
  );
  let text = "";
  for (const [name, type, help, values] of lines) {
    text += `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n`;
    for (const [labels, v] of values) text += `${name}${labels} ${v}\n`;
  }
  // Commit (write + sync) latency histogram, in seconds.
  const h = "streamcast_commit_seconds";
  text += `# HELP ${h} Duration of a log commit (write + syncData).\n# TYPE ${h} histogram\n`;
  for (const s of streams) {
    if (!s.durable) continue;
    let cum = 0;
    COMMIT_BUCKETS_MS.forEach((le, i) => {
      cum += s.stats.commitBuckets[i];
      text += `${h}_bucket{${st(s)},le="${le / 1000}"} ${cum}\n`;
    });
    text += `${h}_bucket{${st(s)},le="+Inf"} ${s.stats.commits}\n`;
    text += `${h}_sum{${st(s)}} ${s.stats.commitMsSum / 1000}\n`;
    text += `${h}_count{${st(s)}} ${s.stats.commits}\n`;
  }
  return text;
}

/**
 * Serves `streams` over HTTP and WebSocket on one port.
 *
 * @example
 * ```ts
 * import { serve, Stream } from "../mod.ts";
 * const stream = new Stream("ticks", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * const head = await (await fetch(`${server.url}/ticks/head`)).json();
 * console.log(head.stream); // ticks
 * await server.shutdown();
 * ```
 */
export function serve(streams: Stream | readonly Stream[], options: ServeOptions = {}): Server {
  const list = Array.isArray(streams) ? streams : [streams as Stream];
  const byName = new Map<string, Stream>();
  for (const s of list) {
    if (byName.has(s.name)) throw new TypeError(`two streams are named ${JSON.stringify(s.name)}`);
    byName.set(s.name, s);
  }
  const pingS = options.pingIntervalS ?? 30;
  if (!(pingS >= 0)) throw new RangeError(`pingIntervalS must be >= 0, got ${pingS}`);
  const maxUrl = checkLimit("maxUrlBytes", options.maxUrlBytes ?? DEFAULT_MAX_URL_BYTES, 64);
  const maxConnections = checkLimit(
    "maxConnections",
    options.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
    1,
  );
  const replayGate = new Gate(
    checkLimit("maxReplayReaders", options.maxReplayReaders ?? DEFAULT_MAX_REPLAY_READERS, 1),
  );
  // Replaced by setTokens(); each request reads it once, when it is checked.
  let tokens = options.tokens ?? null;
  const logger = options.logger ?? new Logger({ level: "warn" });
  const scheme = options.tls ? "https" : "http";
  for (const s of byName.values()) s._useReplayGate(replayGate);

  const registry = new Registry();
  const httpRequests = registry.counter(
    "streamcast_http_requests_total",
    "HTTP requests, by route.",
  );
  const protocolRefusals = registry.counter(
    "streamcast_protocol_refusals_total",
    "Subscribes refused before reaching a stream (4400, 4404).",
  );
  const limitRefusals = registry.counter(
    "streamcast_limit_refusals_total",
    "Requests refused by a limit (max_connections, max_subscribers, max_url_bytes).",
  );
  const authDenials = registry.counter(
    "streamcast_auth_denials_total",
    "Requests denied by access control, by why (missing_token, invalid_token, bad_request, " +
      "forbidden).",
  );
  const connections = registry.gauge(
    "streamcast_connections",
    "WebSocket connections open (subscribers, and refused ones still closing).",
  );
  const replayReads = registry.gauge(
    "streamcast_replay_reads",
    "Log reads for catching-up subscribers, in flight (active) and waiting their turn (waiting).",
  );
  const memory = registry.gauge(
    "streamcast_process_memory_bytes",
    "Memory of the server process: resident (RSS), and the JavaScript heap of the main thread " +
      "(heap_total, heap_used) and outside it (external).",
  );
  const ac = new AbortController();
  const sockets = new Set<WebSocket>();
  let shuttingDown: Promise<void> | null = null;

  /** Fields naming a stream in a log event (names are attacker-chosen: clipped). */
  const streamField = (name: string): string => name.length > 80 ? name.slice(0, 80) + "…" : name;

  function deny(
    res: Response,
    why: "missing_token" | "invalid_token" | "bad_request" | "forbidden",
    fields: LogFields,
  ): Response {
    authDenials.inc({ why });
    logger.warn("denied", { status: res.status, why, ...fields });
    return res;
  }

  /** The grant of the request's token, or the answer refusing it. */
  function authenticate(
    req: Request,
    url: URL,
    upgrade: boolean,
    remote: string,
    tokens: TokenTable,
  ): Grant | Response {
    const f = findToken(req, url, upgrade);
    if (!f.ok) {
      return deny(
        json({ error: "bad_request", detail: f.detail }, 400, {
          "www-authenticate": `Bearer realm="streamcast", error="invalid_request"`,
        }),
        "bad_request",
        { detail: f.detail, remote },
      );
    }
    if (f.token === null) return deny(unauthorized(false), "missing_token", { remote });
    const grant = tokens.lookup(f.token);
    if (!grant) return deny(unauthorized(true), "invalid_token", { carrier: f.carrier, remote });
    if (f.carrier === "subprotocol" && !offeredProtocols(req).includes(SUBPROTOCOL)) {
      // Answering with the bearer subprotocol would echo the token.
      const detail = `offer the ${SUBPROTOCOL} subprotocol beside bearer.TOKEN`;
      return deny(json({ error: "bad_request", detail }, 400), "bad_request", {
        detail,
        token_name: grant.name,
        remote,
      });
    }
    return grant;
  }

  /** The subprotocol to answer with: `streamcast` when offered, else none. */
  function upgradeOptions(req: Request): Deno.UpgradeWebSocketOptions {
    return {
      idleTimeout: pingS,
      ...(offeredProtocols(req).includes(SUBPROTOCOL) ? { protocol: SUBPROTOCOL } : {}),
    };
  }

  function track(socket: WebSocket): void {
    sockets.add(socket);
    connections.set(sockets.size);
  }

  function untrack(socket: WebSocket): void {
    sockets.delete(socket);
    connections.set(sockets.size);
  }

  function refuse(req: Request, code: number, reason: string, fields: LogFields): Response {
    const { socket, response } = Deno.upgradeWebSocket(req, upgradeOptions(req));
    track(socket);
    logger.info("refused", { code, ...parseReason(reason), ...fields });
    socket.onopen = () => socket.close(code, reason);
    socket.onclose = () => untrack(socket);
    socket.onerror = () => untrack(socket);
    return response;
  }

  function subscribe(
    req: Request,
    stream: Stream,
    q: SubscribeQuery,
    grant: Grant | null,
    remote: string,
  ): Response {
    const { socket, response } = Deno.upgradeWebSocket(req, upgradeOptions(req));
    const who: LogFields = {
      stream: stream.name,
      remote,
      ...(grant ? { token_name: grant.name } : {}),
    };
    let sub: Subscriber | null = null;
    let closedByServer = false;
    let ended = false;
    track(socket);
    // Every close the server starts (the subscriber's too) passes here, so a
    // drop is logged with the code and reason the peer is sent.
    const close = socket.close.bind(socket);
    socket.close = (code?: number, reason?: string) => {
      if (!closedByServer) {
        closedByServer = true;
        if (code !== undefined && DROP_CODES.has(code)) {
          logger.warn("dropped", { ...who, code, ...parseReason(reason), sent: sub?.next });
        }
      }
      close(code, reason);
    };
    const end = () => {
      if (ended) return;
      ended = true;
      untrack(socket);
      sub?.close();
    };
    socket.onopen = async () => {
      if (shuttingDown) {
        socket.close(CloseCode.GoingAway, "");
        return;
      }
      let encoder = null;
      if (q.frames === "arrow") {
        try {
          encoder = await stream.arrowEncoder();
        } catch (err) {
          protocolRefusals.inc({ code: "4400" });
          const detail = `frames=arrow: ${err instanceof Error ? err.message : err}`;
          logger.info("refused", { ...who, code: CloseCode.Protocol, error: "protocol", detail });
          socket.close(CloseCode.Protocol, encodeCloseReason({ error: "protocol", detail }));
          return;
        }
        if (socket.readyState !== WebSocket.OPEN) return;
      }
      // Decide now, not at request time: the log may have moved since.
      const d = decideStart(stream.log, stream.maxReplay, q);
      if (!d.ok) {
        stream.stats.refusals[d.reason.why] = (stream.stats.refusals[d.reason.why] ?? 0) + 1;
        logger.info("refused", { ...who, code: CloseCode.NotReplayable, ...d.reason });
        socket.close(CloseCode.NotReplayable, encodeCloseReason(d.reason));
        return;
      }
      // Counted and joined in this same synchronous step: the limit is exact.
      if (stream.subscribers >= stream.maxSubscribers) {
        stream.stats.refusals.max_subscribers = (stream.stats.refusals.max_subscribers ?? 0) + 1;
        limitRefusals.inc({ limit: "max_subscribers" });
        const reason = {
          error: "overloaded",
          limit: "max_subscribers",
          max: stream.maxSubscribers,
        };
        logger.warn("refused", { ...who, code: TRY_AGAIN_LATER, ...reason });
        socket.close(TRY_AGAIN_LATER, encodeCloseReason(reason));
        return;
      }
      const from = d.from ?? stream.endOffset;
      const frames = q.frames;
      socket.send(JSON.stringify(stream.greeting(d.from, frames)));
      // Arrow: the schema message goes first, then record batches.
      if (encoder) socket.send(encoder.schemaMessage());
      sub = stream._subscribe(socket, from ?? 0, frames);
      logger.info("subscribe", {
        ...who,
        offset: q.offset,
        from: d.from,
        end_offset: stream.endOffset,
        frames,
      });
    };
    socket.onmessage = () => {
      // Subscriptions are read-only.
      const reason = encodeCloseReason({
        error: "read_only",
        detail: "subscriptions are read-only",
      });
      if (sub) sub.close(CloseCode.PolicyViolation, reason);
      else socket.close(CloseCode.PolicyViolation, reason);
    };
    socket.onclose = (e) => {
      if (!ended) logger.debug("unsubscribe", { ...who, code: e.code, sent: sub?.next });
      end();
    };
    socket.onerror = (e) => {
      // The runtime's own ends: a frame over its size limit, invalid UTF-8,
      // no pong, a reset. It closes the socket itself.
      if (!ended && !closedByServer) {
        const error = e instanceof ErrorEvent ? e.message : "error";
        logger.info("dropped", { ...who, reason: "runtime", error, sent: sub?.next });
      }
      end();
    };
    return response;
  }

  function handleUpgrade(req: Request, url: URL, grant: Grant | null, remote: string): Response {
    if (sockets.size >= maxConnections) {
      limitRefusals.inc({ limit: "max_connections" });
      logger.warn("refused", {
        status: 503,
        error: "overloaded",
        limit: "max_connections",
        max: maxConnections,
        remote,
      });
      return json({ error: "overloaded", limit: "max_connections", max: maxConnections }, 503, {
        "retry-after": "1",
      });
    }
    const r = route(url.pathname);
    if (r && grant && !grant.mayRead(r.name)) {
      return deny(forbidden({ stream: r.name }), "forbidden", {
        stream: streamField(r.name),
        token_name: grant.name,
        remote,
      });
    }
    if (!r || r.rest !== "") {
      protocolRefusals.inc({ code: "4400" });
      const detail = r ? `no such path ${url.pathname}` : "path is not valid percent-encoding";
      return refuse(
        req,
        CloseCode.Protocol,
        encodeCloseReason({ error: "protocol", detail }),
        { remote },
      );
    }
    const stream = byName.get(r.name);
    if (!stream) {
      protocolRefusals.inc({ code: "4404" });
      return refuse(
        req,
        CloseCode.NotFound,
        encodeCloseReason({ error: "not_found", stream: r.name }),
        { remote },
      );
    }
    const q = parseSubscribeQuery(url.searchParams);
    if (!q.ok) {
      protocolRefusals.inc({ code: "4400" });
      return refuse(
        req,
        CloseCode.Protocol,
        encodeCloseReason({ error: "protocol", detail: q.detail }),
        { stream: stream.name, remote },
      );
    }
    return subscribe(req, stream, q.value, grant, remote);
  }

  function handle(req: Request, remote: string): Response | Promise<Response> {
    if (req.url.length > maxUrl) {
      limitRefusals.inc({ limit: "max_url_bytes" });
      logger.info("refused", {
        status: 414,
        limit: "max_url_bytes",
        url_bytes: req.url.length,
        remote,
      });
      return json({ error: "uri_too_long", max_bytes: maxUrl }, 414);
    }
    const url = new URL(req.url);
    const upgrade = req.headers.get("upgrade")?.toLowerCase() === "websocket";
    if (!upgrade && req.method !== "GET" && req.method !== "HEAD") {
      return json({ error: "method_not_allowed", allow: "GET, HEAD" }, 405, { allow: "GET, HEAD" });
    }
    const path = url.pathname;
    if (!upgrade && path === "/_/health") {
      httpRequests.inc({ route: "health" });
      return json({ ok: !shuttingDown, streams: byName.size }, shuttingDown ? 503 : 200);
    }
    const asset = upgrade ? null : viewerAsset(path);
    if (asset) {
      // The viewer's code: public, holds no data.
      httpRequests.inc({ route: "viewer" });
      return asset;
    }
    let grant: Grant | null = null;
    if (tokens) {
      const a = authenticate(req, url, upgrade, remote, tokens);
      if (a instanceof Response) return a;
      grant = a;
    }
    if (upgrade) {
      httpRequests.inc({ route: "upgrade" });
      return handleUpgrade(req, url, grant, remote);
    }
    const readable = (s: Stream) => !grant || grant.mayRead(s.name);
    if (path === "/_/metrics") {
      httpRequests.inc({ route: "metrics" });
      if (grant && !grant.all) {
        return deny(forbidden({ route: "/_/metrics" }), "forbidden", {
          route: "/_/metrics",
          token_name: grant.name,
          remote,
        });
      }
      replayReads.set(replayGate.active, { state: "active" });
      replayReads.set(replayGate.waiting, { state: "waiting" });
      const m = Deno.memoryUsage();
      memory.set(m.rss, { kind: "resident" });
      memory.set(m.heapTotal, { kind: "heap_total" });
      memory.set(m.heapUsed, { kind: "heap_used" });
      memory.set(m.external, { kind: "external" });
      return new Response(registry.render() + streamMetrics([...byName.values()]), {
        headers: { "content-type": CONTENT_TYPE },
      });
    }
    if (path === "/_/streams") {
      httpRequests.inc({ route: "streams" });
      return json([...byName.values()].filter(readable).map((s) => s.head()));
    }
    const r = route(path);
    if (!r) {
      return json({ error: "bad_request", detail: "path is not valid percent-encoding" }, 400);
    }
    if (r.rest === "" && r.name === "") {
      httpRequests.inc({ route: "viewer" });
      return new Response(viewerPage([...byName.values()].filter(readable).map((s) => s.head())), {
        headers: { "content-type": "text/html; charset=utf-8" },
      });
    }
    // Denied before looking the stream up: a 404 would say which names exist.
    if (grant && !grant.mayRead(r.name)) {
      return deny(forbidden({ stream: r.name }), "forbidden", {
        stream: streamField(r.name),
        token_name: grant.name,
        remote,
      });
    }
    if (r.rest === "" && byName.has(r.name)) {
      httpRequests.inc({ route: "viewer" });
      return new Response(viewerPage([...byName.values()].filter(readable).map((s) => s.head())), {
        headers: { "content-type": "text/html; charset=utf-8" },
      });
    }
    const stream = byName.get(r.name);
    if (!stream) return notFound(`no stream ${JSON.stringify(r.name)}`);
    if (r.rest === "head") {
      httpRequests.inc({ route: "head" });
      return json(stream.head());
    }
    if (r.rest === "manifest") {
      httpRequests.inc({ route: "manifest" });
      const m = stream.log?.manifest;
      if (!m) return notFound(`stream ${JSON.stringify(r.name)} keeps no chunks`);
      return json(m, 200, { "cache-control": "no-cache", etag: `"g${m.generation}"` });
    }
    const chunk = /^chunks\/([0-9a-f]{64})$/.exec(r.rest);
    if (chunk && stream.log) {
      httpRequests.inc({ route: "chunk" });
      const sha = chunk[1];
      const m = stream.log.manifest;
      const known = m &&
        (m.chunks.some((c) => c.sha256 === sha) || m.retired.some((c) => c.sha256 === sha));
      if (!known) return notFound(`no chunk ${sha}`);
      return serveChunk(req, chunkPath(stream.log.dir, sha), sha);
    }
    return notFound(`no such path ${path}`);
  }

  // Archive errors happen in the chunk worker; the log keeps the last one.
  const archived = [...byName.values()].filter((s) => s.archive !== null && s.log !== null);
  const lastArchiveError = new Map<string, string | null>();
  let archiveWatch: ReturnType<typeof setInterval> | undefined;
  if (archived.length > 0) {
    archiveWatch = setInterval(() => {
      for (const s of archived) {
        const error = s.log!.archiveState?.lastError ?? null;
        const before = lastArchiveError.get(s.name) ?? null;
        if (error === before) continue;
        lastArchiveError.set(s.name, error);
        if (error !== null) logger.error("archive_error", { stream: s.name, error });
        else logger.info("archive_recovered", { stream: s.name });
      }
    }, ARCHIVE_WATCH_MS);
    Deno.unrefTimer(archiveWatch);
  }

  const httpServer = Deno.serve(
    {
      hostname: options.hostname ?? "127.0.0.1",
      port: options.port ?? 8765,
      signal: ac.signal,
      ...(options.tls ? { cert: options.tls.cert, key: options.tls.key } : {}),
      onListen: (addr) => {
        const a = addr as Deno.NetAddr;
        const url = `${scheme}://${a.hostname}:${a.port}`;
        if (options.onListen) options.onListen(a);
        else console.error(`listening on ${url}`);
        // In text format the plain line above is the event.
        if (logger.format === "json") {
          logger.info("listening", {
            url,
            tls: options.tls !== undefined,
            auth: tokens ? "tokens" : "off",
            streams: [...byName.keys()],
          }, `listening on ${url}`);
        }
      },
      onError: (err) => {
        logger.error("request_failed", { error: String(err) });
        return json({ error: "internal" }, 500);
      },
    },
    (req, info) => {
      const r = info.remoteAddr as Deno.NetAddr;
      const remote = r.hostname.includes(":")
        ? `[${r.hostname}]:${r.port}`
        : `${r.hostname}:${r.port}`;
      try {
        return handle(req, remote);
      } catch (err) {
        logger.error("request_failed", { error: String(err), remote });
        return json({ error: "internal" }, 500);
      }
    },
  );
  const addr = httpServer.addr as Deno.NetAddr;

  async function shutdown(): Promise<void> {
    if (shuttingDown) return await shuttingDown;
    shuttingDown = (async () => {
      clearInterval(archiveWatch);
      logger.debug("shutdown", { subscribers: sockets.size });
      // New upgrades are now answered with 1001 and /_/health with 503. Let
      // what is pending commit and reach the subscribers, then say goodbye,
      // and give the close frames (queued behind data) time to go out before
      // the listener and its connections are torn down.
      await Promise.all([...byName.values()].map((s) => s.log?.flush()));
      for (const s of byName.values()) s.closeSubscribers(CloseCode.GoingAway, "");
      for (const sock of sockets) {
        try {
          sock.close(CloseCode.GoingAway, "");
        } catch {
          // already closing
        }
      }
      const deadline = Date.now() + (options.closeWaitMs ?? 2000);
      while (sockets.size > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      ac.abort();
      if (options.closeStreams ?? true) {
        await Promise.all([...byName.values()].map((s) => s.close()));
      } else {
        await Promise.all([...byName.values()].map((s) => s.log?.flush()));
      }
      await httpServer.finished;
      for (const s of byName.values()) s._useReplayGate(null);
    })();
    return await shuttingDown;
  }
  options.signal?.addEventListener("abort", () => void shutdown(), { once: true });

  return {
    addr,
    url: `${scheme}://${addr.hostname}:${addr.port}`,
    streams: byName,
    metrics: registry,
    finished: httpServer.finished.then(() => shuttingDown ?? undefined),
    shutdown,
    setTokens(table: TokenTable): void {
      // A runtime check too: `null` here would silently turn access control off.
      if (!(table instanceof TokenTable)) {
        throw new TypeError(
          `setTokens wants a TokenTable, got ${table === null ? "null" : typeof table}`,
        );
      }
      tokens = table;
    },
  };
}
