/**
 * The portable HTTP side of a server: one `Request → Response` handler over
 * the route table (routes.ts), with the WebSocket upgrade the only runtime
 * piece, injected ({@linkcode WebSocketUpgrader}). `../serve.ts` binds it to
 * `Deno.serve`; a test can drive it with plain `Request` objects.
 *
 * Every request is checked in this order, each check answering before the
 * next runs: URL length (414); the route (405 for a path whose routes take
 * other methods); public routes answer now; with tokens or signed tokens,
 * the bearer token (400, 401); for an upgrade the connection limit (503); the route's grant
 * (403, before any stream is looked up, so that a 404 does not say which
 * names exist; creating and deleting streams needs an admin grant, or
 * without tokens a loopback client); a path with no route (404; an upgrade:
 * 4400 after it, and 400 for a path that is not valid percent-encoding); the
 * stream the path names (404, looked up in the live set of `stream_set.ts`:
 * streams come and go while serving); then the route, counted once under its
 * name. The routes check the rest (subscribe.ts, publish_post.ts,
 * publish_socket.ts, streams_admin.ts).
 *
 * @module
 */

import { CloseCode } from "../../wire/close_reason.ts";
import { type Grant, TokenTable, type TokenVerifier } from "../auth.ts";
import { Registry } from "../metrics.ts";
import type { ServeSettings } from "../serve_options.ts";
import { OptionCheck } from "../option_check.ts";
import { COMPRESS_FRAME_BYTES } from "../frames/zstd_stream.ts";
import type { Stream } from "../stream/stream.ts";
import { Gate } from "../fanout/replay_gate.ts";
import { SendBudget } from "../fanout/send_budget.ts";
import type { Serving } from "../fanout/serving.ts";
import { PRIMARY, type StreamRole } from "../role.ts";
import { PublishBudget } from "../publish/budget.ts";
import { PublishMetrics } from "../publish/publish_metrics.ts";
import { authenticate, denyAdmin, denyRoute } from "./access.ts";
import type { HttpContext, WebSocketUpgrader } from "./context.ts";
import { ServerMetrics } from "./metrics.ts";
import { type Match, matchRoute } from "./router.ts";
import { ROUTES } from "./routes.ts";
import { refuseSubscribePath } from "./subscribe.ts";
import { refuseWhenFull } from "./upgrade.ts";
import { json, notFound, streamMissing } from "./_respond.ts";
import { StreamSet } from "./stream_set.ts";

// What a route that names no stream is handed as `RouteRequest.stream` (it never reads it).
const NO_STREAM = undefined as unknown as Stream;

/**
 * Answers the requests of a server serving `streams` with `settings`:
 * registers the server's series in `registry` (made when not given) and
 * includes each stream's until {@linkcode HttpHandler.release}; the
 * subscribers it starts take turns through its replay gate and share its
 * send buffer.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { checkServeOptions } from "../serve_options.ts";
 * import { Stream } from "../stream/stream.ts";
 * import { HttpHandler } from "./handler.ts";
 * const s = Stream.ephemeral("ticks", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const handler = new HttpHandler(new Map([[s.name, s]]), checkServeOptions({}), {
 *   upgrade: () => {
 *     throw new Error("no sockets here");
 *   },
 * });
 * const res = await handler.handle(new Request("http://x/ticks/head"), "127.0.0.1:1");
 * equal(res.status, 200);
 * equal((await res.json()).stream, "ticks");
 * handler.release();
 * ```
 */
export class HttpHandler {
  /** The server's series (the registry renders them first). */
  readonly metrics: ServerMetrics;
  /** What the subscribers this handler starts are given (replay gate, logger, send buffer). */
  readonly serving: Required<Serving>;
  /** The streams served now: add and remove them while serving. */
  readonly streams: StreamSet;
  readonly #ctx: HttpContext & {
    tokens: TokenTable | null;
    signedTokens: TokenVerifier | null;
    shuttingDown: boolean;
  };
  // How a tracked socket is closed by the server, when its session closes it (see SocketSession.close).
  readonly #closers = new Map<WebSocket, (code: number, reason: string) => void>();

  /**
   * A handler over `streams`, with `settings` as `checkServeOptions` made
   * them; `roles`: the role each stream plays here, by name (none: a primary).
   */
  constructor(
    streams: ReadonlyMap<string, Stream>,
    settings: ServeSettings,
    upgrader: WebSocketUpgrader,
    roles: ReadonlyMap<string, StreamRole> = new Map(),
    registry: Registry = new Registry(),
  ) {
    const gate = new Gate(settings.maxReplayReaders);
    const sendBudget = new SendBudget(settings.sendBufferBytes, settings.fanoutTurnBytes);
    const { min, max, default: fallback } = COMPRESS_FRAME_BYTES;
    const compressFrameBytes = new OptionCheck("serve", { ...settings })
      .int("compressFrameBytes", min, max, fallback);
    this.serving = { gate, logger: settings.logger, sendBudget, compressFrameBytes };
    this.metrics = new ServerMetrics(registry, gate, sendBudget);
    const set = this.streams = new StreamSet(registry);
    for (const s of streams.values()) {
      set.add(s, {
        publish: settings.publish.includes(s.name),
        role: roles.get(s.name) ?? PRIMARY,
      });
    }
    const sockets = new Set<WebSocket>();
    const closers = this.#closers;
    const metrics = this.metrics;
    const publishBudget = new PublishBudget(settings.maxPublishServerBytes);
    this.#ctx = {
      streams: set.streams,
      streamsAtStart: set.streams.size,
      roles: set.roles,
      publish: set.publish,
      reopening: set.reopening,
      admin: settings.streamAdmin,
      serving: this.serving,
      settings,
      logger: settings.logger,
      metrics,
      publishMetrics: new PublishMetrics(
        registry,
        { [Symbol.iterator]: () => set.streams.values() },
        publishBudget,
      ),
      publishBudget,
      upgrader,
      tokens: settings.tokens,
      signedTokens: settings.signedTokens,
      shuttingDown: false,
      sockets,
      track(socket, close, stream) {
        sockets.add(socket);
        if (close) closers.set(socket, close);
        if (stream !== undefined) {
          set.track(stream, socket, close ?? ((code, reason) => socket.close(code, reason)));
        }
        metrics.connections(sockets.size);
      },
      untrack(socket, stream) {
        sockets.delete(socket);
        closers.delete(socket);
        if (stream !== undefined) set.untrack(stream, socket);
        metrics.connections(sockets.size);
      },
    };
  }

  /** WebSocket connections open (subscribers, publishers, and refused ones still closing). */
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

  /** Replaces the keys signed tokens are checked against, for the requests that follow. */
  setSignedTokens(keys: TokenVerifier): void {
    if (typeof keys?.verify !== "function") {
      throw new TypeError(
        `setSignedTokens wants a SignedTokens, got ${keys === null ? "null" : typeof keys}`,
      );
    }
    this.#ctx.signedTokens = keys;
  }

  /** From now on, `/_/health` answers 503 and an opening socket is closed with 1001. */
  startShutdown(): void {
    this.#ctx.shuttingDown = true;
  }

  /** Gives the streams back (their series leave the registry): they may be served anew. */
  release(): void {
    this.streams.release();
  }

  /** Closes every open socket with 1001 (those not closed by their stream already). */
  closeSockets(): void {
    for (const sock of this.#ctx.sockets) {
      try {
        const close = this.#closers.get(sock);
        if (close) close(CloseCode.GoingAway, "");
        else sock.close(CloseCode.GoingAway, "");
      } catch {
        // Already closing.
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
    const maxUrlBytes = ctx.settings.maxUrlBytes;
    if (req.url.length > maxUrlBytes) {
      ctx.metrics.limitRefusal("max_url_bytes");
      ctx.logger.info("refused", {
        status: 414,
        limit: "max_url_bytes",
        url_bytes: req.url.length,
        remote,
      });
      return json({ error: "uri_too_long", max_bytes: maxUrlBytes }, 414);
    }
    const url = new URL(req.url);
    const upgrade = req.headers.get("upgrade")?.toLowerCase() === "websocket";
    const match = matchRoute(ROUTES, req.method, upgrade, url.pathname);
    if (match.kind === "bad_method") {
      const allow = match.allow;
      return json({ error: "method_not_allowed", allow }, 405, { allow });
    }
    const route = match.kind === "route" ? match.route : null;
    const params = match.kind === "route" ? match.params : {};
    if (route?.access === "public") {
      ctx.metrics.request(route.name);
      return route.handle(ctx, { req, url, remote, grant: null, params, stream: NO_STREAM });
    }
    const next = (grant: Grant | null) =>
      this.#granted({ req, url, remote, upgrade, match }, grant);
    // The replicate route checks the cluster's credential itself (replicate.ts).
    if ((ctx.tokens || ctx.signedTokens) && route?.access !== "cluster") {
      const a = authenticate(ctx, req, url, upgrade, remote, ctx.tokens, ctx.signedTokens);
      if (a instanceof Response) return a;
      // A signed token's check is asynchronous (WebCrypto).
      if (a instanceof Promise) return a.then((g) => g instanceof Response ? g : next(g));
      return next(a);
    }
    return next(null);
  }

  // The rest of a request once its token (if any) is checked: `grant` null without access control.
  #granted(
    r: {
      req: Request;
      url: URL;
      remote: string;
      upgrade: boolean;
      match: Exclude<Match, { kind: "bad_method" }>;
    },
    grant: Grant | null,
  ): Response | Promise<Response> {
    const ctx = this.#ctx;
    const { req, url, remote, upgrade, match } = r;
    const route = match.kind === "route" ? match.route : null;
    const params = match.kind === "route" ? match.params : {};
    // A cluster follower's replication socket is never refused for a crowd of
    // subscribers: replication links have a limit of their own (replicate.ts).
    if (upgrade && route?.name !== "replicate") {
      const full = refuseWhenFull(ctx, remote);
      if (full) return full;
    }
    const name = route ? params.name ?? null : match.kind === "no_route" ? match.name : null;
    const denied = route?.access === "admin"
      ? denyAdmin(ctx, grant, route.pattern, remote)
      : grant &&
        denyRoute(
          ctx,
          grant,
          route?.access ?? "read",
          name,
          route?.pattern ?? url.pathname,
          remote,
        );
    if (denied) return denied;
    if (route === null) {
      if (upgrade) return refuseSubscribePath(ctx, req, url, match.kind === "bad_path", remote);
      if (match.kind === "bad_path") {
        return json({ error: "bad_request", detail: "path is not valid percent-encoding" }, 400);
      }
      return notFound(`no such path ${url.pathname}`);
    }
    let stream = NO_STREAM;
    if (route.stream) {
      const s = ctx.streams.get(params.name);
      if (!s) return streamMissing(ctx.reopening, params.name);
      stream = s;
    }
    ctx.metrics.request(route.name);
    return route.handle(ctx, { req, url, remote, grant, params, stream });
  }
}
