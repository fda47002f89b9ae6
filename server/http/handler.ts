/**
 * The portable HTTP side of a server: one `Request → Response` handler that
 * routes every request, with the WebSocket upgrade the only runtime piece,
 * injected ({@linkcode WebSocketUpgrader}). `../serve.ts` binds it to
 * `Deno.serve`; a test can drive it with plain `Request` objects.
 *
 * | route | module |
 * |---|---|
 * | WebSocket `/{name}` (`/` for the unnamed stream) | `subscribe.ts` |
 * | `GET /{name}/head` (`/_/head` for the unnamed stream), `GET /_/streams` | `head.ts` |
 * | `GET /{name}/at?since=T` (`/_/at` for the unnamed stream) | `at.ts` |
 * | `GET /{name}/manifest`, `GET /{name}/chunks/{sha256}` | `chunks.ts` |
 * | `GET /{name}/dictionaries/{id}` (compress=zstd-dict) | `dictionaries.ts` |
 * | `GET /_/health` | `health.ts` |
 * | `GET /_/metrics` | `metrics.ts` |
 * | `GET /` and `GET /{name}` without an upgrade, `GET /_/client.js`, `GET /_/viewer.js` | `viewer.ts` |
 * | `POST /{name}` (`POST /` for the unnamed stream) | `publish.ts` |
 * | WebSocket `/{name}/publish` (`/_/publish` for the unnamed stream) | `publish_socket.ts` |
 *
 * Every request is checked in this order, each check answering before the
 * next runs: URL length (414); method (405); with tokens, the bearer token
 * (400, 401) except for `/_/health` and the viewer's scripts; then for an
 * upgrade the connection limit (503), the stream's permission (403), the
 * path (4400), the stream (4404), the query (4400), the offset (4416) and
 * the stream's subscriber limit (1013); for other routes the permission
 * (403) and the route. A publish (`POST`, the publish socket) checks the
 * publish grant (403) where a read checks the read grant (see `publish.ts`).
 *
 * @module
 */

import { CloseCode } from "../../client/wire.ts";
import type { Logger } from "../../common/logger.ts";
import { forbidden, type Grant, TokenTable } from "../auth.ts";
import { DEFAULT_MAX_PUBLISH_BYTES, type Gate, type SendBudget } from "../limits.ts";
import type { Registry } from "../metrics.ts";
import type { Stream } from "../stream.ts";
import { authenticate, deny, denyStream } from "./access.ts";
import { isPublishable } from "./_publish_target.ts";
import { atResponse } from "./at.ts";
import { chunkResponse, manifestResponse } from "./chunks.ts";
import { dictionaryResponse } from "./dictionaries.ts";
import type { HttpContext, WebSocketUpgrader } from "./context.ts";
import { headResponse, readableHeads, streamsResponse } from "./head.ts";
import { healthResponse } from "./health.ts";
import { metricsResponse, ServerMetrics } from "./metrics.ts";
import { handleSubscribe } from "./subscribe.ts";
import { handlePublishPost } from "./publish.ts";
import { handlePublishSocket } from "./publish_socket.ts";
import { PublishMetrics } from "../publish/publish_metrics.ts";
import { DEFAULT_MAX_PUBLISH_SERVER_BYTES, PublishBudget } from "../publish/budget.ts";
import { DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_IN_FLIGHT_BYTES } from "../../client/publish_wire.ts";
import { viewerAssetResponse, viewerPageResponse } from "./viewer.ts";
import { json, notFound, splitPath } from "./_respond.ts";

/** What {@linkcode HttpHandler} serves, and how. */
export interface HttpHandlerOptions {
  /** The streams by name. */
  streams: ReadonlyMap<string, Stream>;
  /** The runtime's WebSocket upgrade. */
  upgrader: WebSocketUpgrader;
  /** Where events go. */
  logger: Logger;
  /** The registry behind `/_/metrics`: the server's series go in it, each stream's are included. */
  registry: Registry;
  /** The gate of catching-up reads (for `streamcast_replay_reads`). */
  replayGate: Gate;
  /** The server's send buffer (its `buffered()` is a gauge). @default none: no gauge */
  sendBudget?: SendBudget;
  /** Longest request URL, in bytes (414 past it). */
  maxUrlBytes: number;
  /** WebSocket connections open at once (503 past it). */
  maxConnections: number;
  /** Seconds between pings of an idle socket (0: off). */
  pingIntervalS: number;
  /** The tokens to check; null: no access control. */
  tokens: TokenTable | null;
  /**
   * Publishing (DESIGN §13): the streams opened for it, the largest body or
   * frame (bytes, default 16 MiB), the frames and bytes a socket may have
   * awaiting their ack (default 64, 16 MiB), and the bytes of publishing the
   * server holds at once (default 64 MiB). Absent: no stream is opened for
   * publishing.
   */
  publish?: {
    streams: Iterable<string>;
    maxPublishBytes?: number;
    maxInFlight?: number;
    maxInFlightBytes?: number;
    maxServerBytes?: number;
  };
}

/**
 * Routes requests to the streams' routes.
 *
 * @example
 * ```ts
 * import { Logger } from "../../common/logger.ts";
 * import { Gate } from "../limits.ts";
 * import { Registry } from "../metrics.ts";
 * import { Stream } from "../stream.ts";
 * import { HttpHandler } from "./handler.ts";
 * const s = Stream.ephemeral("ticks", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const handler = new HttpHandler({
 *   streams: new Map([[s.name, s]]),
 *   upgrader: { upgrade: () => { throw new Error("no sockets here"); } },
 *   logger: Logger.silent(),
 *   registry: new Registry(),
 *   replayGate: new Gate(1),
 *   maxUrlBytes: 8192,
 *   maxConnections: 10,
 *   pingIntervalS: 30,
 *   tokens: null,
 * });
 * const res = await handler.handle(new Request("http://x/ticks/head"), "127.0.0.1:1");
 * console.log(res.status, (await res.json()).stream); // 200 ticks
 * ```
 */
export class HttpHandler {
  /** The server's series (the registry renders them first). */
  readonly metrics: ServerMetrics;
  readonly #ctx: HttpContext & { tokens: TokenTable | null; shuttingDown: boolean };
  readonly #maxUrlBytes: number;
  readonly #excludes: (() => void)[];

  /** A handler over `options.streams`; registers the server's series and includes the streams'. */
  constructor(options: HttpHandlerOptions) {
    this.metrics = new ServerMetrics(options.registry, options.replayGate, options.sendBudget);
    this.#excludes = [...options.streams.values()].map((s) => options.registry.include(s._metrics));
    this.#maxUrlBytes = options.maxUrlBytes;
    const sockets = new Set<WebSocket>();
    const metrics = this.metrics;
    this.#ctx = {
      streams: options.streams,
      logger: options.logger,
      metrics,
      upgrader: options.upgrader,
      pingIntervalS: options.pingIntervalS,
      maxConnections: options.maxConnections,
      tokens: options.tokens,
      shuttingDown: false,
      sockets,
      track(socket) {
        sockets.add(socket);
        metrics.connections(sockets.size);
      },
      untrack(socket) {
        sockets.delete(socket);
        metrics.connections(sockets.size);
      },
      publishing: {
        streams: new Set(options.publish?.streams ?? []),
        maxPublishBytes: options.publish?.maxPublishBytes ?? DEFAULT_MAX_PUBLISH_BYTES,
        maxInFlight: options.publish?.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT,
        maxInFlightBytes: options.publish?.maxInFlightBytes ?? DEFAULT_MAX_IN_FLIGHT_BYTES,
        budget: new PublishBudget(
          options.publish?.maxServerBytes ?? DEFAULT_MAX_PUBLISH_SERVER_BYTES,
        ),
        metrics: new PublishMetrics(options.registry, options.streams.values()),
      },
    };
  }

  /** WebSocket connections open (subscribers, and refused ones still closing). */
  get sockets(): ReadonlySet<WebSocket> {
    return this.#ctx.sockets;
  }

  /** The tokens requests are checked against; null: none. */
  get tokens(): TokenTable | null {
    return this.#ctx.tokens;
  }

  /** Replaces the tokens for the requests that follow (open subscriptions stay). */
  setTokens(tokens: TokenTable): void {
    // A runtime check too: `null` here would silently turn access control off.
    if (!(tokens instanceof TokenTable)) {
      throw new TypeError(
        `setTokens wants a TokenTable, got ${tokens === null ? "null" : typeof tokens}`,
      );
    }
    this.#ctx.tokens = tokens;
  }

  /** From now on, `/_/health` answers 503 and an opening subscribe is closed with 1001. */
  startShutdown(): void {
    this.#ctx.shuttingDown = true;
  }

  /** Takes the streams' series out of the registry again (the streams may be served anew). */
  release(): void {
    for (const exclude of this.#excludes.splice(0)) exclude();
  }

  /** Closes every open socket with 1001 (those not closed by their stream already). */
  closeSockets(): void {
    for (const sock of this.#ctx.sockets) {
      try {
        sock.close(CloseCode.GoingAway, "");
      } catch {
        // already closing
      }
    }
  }

  /**
   * Answers `req` from `remote` (`HOST:PORT`, for the log). An exception in a
   * route is logged and answered 500.
   */
  handle(req: Request, remote: string): Response | Promise<Response> {
    try {
      const res = this.#route(req, remote);
      if (res instanceof Promise) return res.catch((err) => this.#failed(err, remote));
      return res;
    } catch (err) {
      return this.#failed(err, remote);
    }
  }

  #failed(err: unknown, remote: string): Response {
    this.#ctx.logger.error("request_failed", { error: String(err), remote });
    return json({ error: "internal" }, 500);
  }

  #route(req: Request, remote: string): Response | Promise<Response> {
    const ctx = this.#ctx;
    const { metrics, streams } = ctx;
    if (req.url.length > this.#maxUrlBytes) {
      metrics.limitRefusal("max_url_bytes");
      ctx.logger.info("refused", {
        status: 414,
        limit: "max_url_bytes",
        url_bytes: req.url.length,
        remote,
      });
      return json({ error: "uri_too_long", max_bytes: this.#maxUrlBytes }, 414);
    }
    const url = new URL(req.url);
    const upgrade = req.headers.get("upgrade")?.toLowerCase() === "websocket";
    const post = !upgrade && req.method === "POST" && isStreamPath(url.pathname);
    if (!upgrade && !post && req.method !== "GET" && req.method !== "HEAD") {
      return json({ error: "method_not_allowed", allow: "GET, HEAD" }, 405, { allow: "GET, HEAD" });
    }
    const path = url.pathname;
    if (!upgrade && path === "/_/health") {
      metrics.request("health");
      return healthResponse(ctx.shuttingDown, streams.size);
    }
    const asset = upgrade ? null : viewerAssetResponse(path);
    if (asset) {
      // The viewer's code: public, holds no data.
      metrics.request("viewer");
      return asset;
    }
    let grant: Grant | null = null;
    const tokens = ctx.tokens;
    if (tokens) {
      const a = authenticate(ctx, req, url, upgrade, remote, tokens);
      if (a instanceof Response) return a;
      grant = a;
    }
    if (post) {
      metrics.request("publish");
      return handlePublishPost(ctx, req, splitPath(url.pathname)!.name, grant, remote);
    }
    if (upgrade) {
      metrics.request("upgrade");
      const r = splitPath(url.pathname);
      if (r && r.rest === "publish") {
        return handlePublishSocket(ctx, req, url, r.name, grant, remote);
      }
      return handleSubscribe(ctx, req, url, grant, remote);
    }
    const mayRead = (name: string) => !grant || grant.mayRead(name);
    const publishable = (s: Stream) => isPublishable(ctx, s);
    if (path === "/_/metrics") {
      metrics.request("metrics");
      if (grant && !grant.all) {
        return deny(ctx, forbidden({ route: "/_/metrics" }), "forbidden", {
          route: "/_/metrics",
          token_name: grant.name,
          remote,
        });
      }
      return metricsResponse(metrics.registry);
    }
    if (path === "/_/streams") {
      metrics.request("streams");
      return streamsResponse(streams.values(), mayRead, publishable);
    }
    const r = splitPath(path);
    if (!r) {
      return json({ error: "bad_request", detail: "path is not valid percent-encoding" }, 400);
    }
    if (r.rest === "" && r.name === "") {
      metrics.request("viewer");
      return viewerPageResponse(readableHeads(streams.values(), mayRead, publishable));
    }
    // Denied before looking the stream up: a 404 would say which names exist.
    if (grant && !grant.mayRead(r.name)) return denyStream(ctx, r.name, grant, remote);
    if (r.rest === "" && streams.has(r.name)) {
      metrics.request("viewer");
      return viewerPageResponse(readableHeads(streams.values(), mayRead, publishable));
    }
    const stream = streams.get(r.name);
    if (!stream) return notFound(`no stream ${JSON.stringify(r.name)}`);
    if (r.rest === "head") {
      metrics.request("head");
      return headResponse(stream, publishable(stream));
    }
    if (r.rest === "at") {
      metrics.request("at");
      return atResponse(stream, url);
    }
    if (r.rest === "manifest") {
      metrics.request("manifest");
      return manifestResponse(stream);
    }
    const chunk = chunkResponse(req, stream, r.rest);
    if (chunk) {
      metrics.request("chunk");
      return chunk;
    }
    const dictionary = dictionaryResponse(req, stream, r.rest); // compress=zstd-dict (§16)
    if (dictionary) {
      metrics.request("dictionary");
      return dictionary;
    }
    return notFound(`no such path ${path}`);
  }
}

// Whether `path` is a stream's own path (`/{name}`, `/` for the unnamed one): where a POST publishes.
function isStreamPath(path: string): boolean {
  const r = splitPath(path);
  return r !== null && r.rest === "" && !path.startsWith("/_/");
}
