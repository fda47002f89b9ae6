/**
 * The HTTP and WebSocket front of a set of streams, on one port: the binding
 * of the portable handler (`http/handler.ts`; its routes are declared in
 * `http/routes.ts`) to `Deno.serve` and `Deno.upgradeWebSocket`, with TLS,
 * the listening line, the archive watch and shutdown. `Deno.serve` runs
 * through `listener.ts`, which listens again when an accept fails for lack
 * of descriptors. The options are in
 * `serve_options.ts`, the limits in `limits.ts`, the tokens in `auth.ts`.
 *
 * @module
 */

import { CloseCode } from "../wire/close_reason.ts";
import { stderrLines } from "../common/stderr_lines.ts";
import type { TokenTable, TokenVerifier } from "./auth.ts";
import type { Registry } from "./metrics.ts";
import { Stream } from "./stream/stream.ts";
import { PRIMARY, type StreamRole } from "./role.ts";
import { checkServeOptions, type ServeOptions } from "./serve_options.ts";
import type { WebSocketUpgrader } from "./http/context.ts";
import { HttpHandler } from "./http/handler.ts";
import { shown } from "./option_check.ts";
import { useVectoredWrites } from "./vectored_writes.ts";
import { type Listening, serveListening } from "./listener.ts";

/** How often the archive's last error is looked at, for the log. */
const ARCHIVE_WATCH_MS = 1000;

/** Deno's WebSocket upgrade, for the portable handler. */
const DENO_UPGRADER: WebSocketUpgrader = {
  upgrade: (req, o) =>
    Deno.upgradeWebSocket(req, {
      idleTimeout: o.idleTimeoutS,
      ...(o.protocol !== undefined ? { protocol: o.protocol } : {}),
    }),
};

export type { ServeOptions } from "./serve_options.ts";

/**
 * A stream given to {@linkcode serve} with the role it plays there: a
 * mirror's replica (`mirror/`) or a cluster member's copy (`member/`). A
 * stream given alone is a primary.
 */
export interface ServedStream {
  /** The stream. */
  readonly stream: Stream;
  /** Its role on this server. */
  readonly role: StreamRole;
}

const ROLE_KINDS: readonly string[] = ["primary", "mirror", "member"];

// The stream and role of `entry` (`what` names it in an error).
function servedOf(entry: unknown, what: string): { stream: Stream; role: StreamRole } {
  if (entry instanceof Stream) return { stream: entry, role: PRIMARY };
  const e = entry as Partial<ServedStream> | null;
  if (typeof e !== "object" || e === null || !("stream" in e)) {
    throw new TypeError(`serve: ${what} must be a Stream, got ${shown(entry)}`);
  }
  if (!(e.stream instanceof Stream)) {
    throw new TypeError(`serve: ${what}.stream must be a Stream, got ${shown(e.stream)}`);
  }
  const role = e.role;
  if (typeof role !== "object" || role === null || !ROLE_KINDS.includes(role.kind)) {
    throw new TypeError(`serve: ${what}.role must be a StreamRole, got ${shown(role)}`);
  }
  if (role.kind === "member" && e.stream.log?.replication == null) {
    throw new TypeError(`stream "${e.stream.name}": a cluster needs a replicated log`);
  }
  return { stream: e.stream, role };
}

/**
 * A running server.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { serve, Stream, TokenTable } from "../mod.ts";
 * const stream = Stream.ephemeral("ticks", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const tokens = (t: string) => TokenTable.parse({ tokens: [{ token: t, streams: ["*"] }] });
 * const server = serve([stream], { port: 0, onListen: () => {}, tokens: tokens("a".repeat(16)) });
 * const head = (t: string) =>
 *   fetch(`${server.url}/ticks/head`, { headers: { authorization: `Bearer ${t}` } })
 *     .then(async (res) => (await res.body?.cancel(), res.status));
 * equal(await head("a".repeat(16)), 200);
 * server.setTokens(tokens("b".repeat(16))); // e.g. on SIGHUP, after re-reading the file
 * equal(await head("a".repeat(16)), 401);
 * equal(await head("b".repeat(16)), 200);
 * await server.shutdown();
 * ```
 */
export interface Server {
  /** The address it listens on. */
  readonly addr: Deno.NetAddr;
  /** `http://HOST:PORT`. */
  readonly url: string;
  /** The streams by name, now (see {@linkcode Server.addStream}, {@linkcode Server.removeStream}). */
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
  /**
   * Serves one more stream from the next request on (`publish`: it takes
   * network publishes; it must be durable). A `TypeError` when one of its
   * name is served.
   */
  addStream(stream: Stream | ServedStream, options?: { publish?: boolean }): void;
  /**
   * Stops serving stream `name`: the next request does not find it; its
   * subscribers and publishers are closed with `code` and `reason` (other
   * streams' are not touched). With `reopening` (why), the stream is to be
   * added again: until then a request for it is answered 503 `unavailable`
   * (a subscribe: closed with 1013), not 404. Returns the stream, not closed
   * (closing it is the caller's), or null when none of that name is served.
   */
  removeStream(name: string, code: number, reason: string, reopening?: string): Stream | null;
  /**
   * Replaces the keys every later signed token is checked against (reloaded
   * key files). Open subscriptions stay, each until its own token expires.
   */
  setSignedTokens(keys: TokenVerifier): void;
}

/**
 * Serves `streams` over HTTP and WebSocket on one port, each a primary or
 * given with the role it plays here ({@linkcode ServedStream}). Every option is
 * checked first (see `serve_options.ts`): a wrong type is a `TypeError`, a
 * wrong value a `RangeError`, naming the option and the value seen.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { serve, Stream } from "../mod.ts";
 * const stream = Stream.ephemeral("ticks", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * const head = await (await fetch(`${server.url}/ticks/head`)).json();
 * equal(head.stream, "ticks");
 * await server.shutdown();
 * ```
 */
export function serve(
  streams: Stream | ServedStream | readonly (Stream | ServedStream)[],
  options: ServeOptions = {},
): Server {
  const list: readonly unknown[] = Array.isArray(streams) ? streams : [streams];
  const byName = new Map<string, Stream>();
  const roles = new Map<string, StreamRole>();
  for (const [i, entry] of list.entries()) {
    const { stream: s, role } = servedOf(
      entry,
      Array.isArray(streams) ? `streams[${i}]` : "streams",
    );
    if (byName.has(s.name)) throw new TypeError(`two streams are named ${JSON.stringify(s.name)}`);
    byName.set(s.name, s);
    roles.set(s.name, role);
  }
  const o = checkServeOptions(options);
  for (const name of o.publish) {
    const s = byName.get(name);
    if (!s) {
      throw new TypeError(
        `serve: options.publish names ${JSON.stringify(name)}, which is not served`,
      );
    }
    if (s.log === null) {
      throw new TypeError(
        `serve: options.publish names ${JSON.stringify(name)}, an ephemeral stream: ` +
          "publishing is acknowledged with offsets, so it needs a durable stream",
      );
    }
  }
  const { logger } = o;
  // Before the first connection: sockets keep no frame-sized write buffer (vectored_writes.ts).
  useVectoredWrites();
  const handler = new HttpHandler(byName, o, DENO_UPGRADER, roles);
  const registry = handler.metrics.registry;
  const scheme = o.tls ? "https" : "http";
  const ac = new AbortController();
  let shuttingDown: Promise<void> | null = null;

  const live = handler.streams;
  // Archive errors happen in the chunk worker; the log keeps the last one.
  const lastArchiveError = new Map<string, string | null>();
  // Streams come and go while serving: the watch looks at those served at each tick.
  const archiveWatch = setInterval(() => {
    for (const s of live.streams.values()) {
      if (s.archive === null || s.log === null) continue;
      const error = s.log!.archive.state?.lastError ?? null;
      const before = lastArchiveError.get(s.name) ?? null;
      if (error === before) continue;
      lastArchiveError.set(s.name, error);
      if (error !== null) logger.error("archive_error", { stream: s.name, error });
      else logger.info("archive_recovered", { stream: s.name });
    }
  }, ARCHIVE_WATCH_MS);
  Deno.unrefTimer(archiveWatch);

  let httpServer: Listening;
  try {
    // Deno.serve, listening again when an accept fails for lack of descriptors (listener.ts).
    httpServer = serveListening(
      {
        hostname: o.hostname,
        port: o.port,
        signal: ac.signal,
        ...(o.tls ? { cert: o.tls.cert, key: o.tls.key } : {}),
        onListen: (addr) => {
          const url = `${scheme}://${addr.hostname}:${addr.port}`;
          if (o.onListen) o.onListen(addr);
          else {
            // After the log lines queued before it (common/stderr_lines.ts).
            stderrLines.flush();
            console.error(`listening on ${url}`);
          }
          // In text format the plain line above is the event.
          if (logger.format === "json") {
            logger.info("listening", {
              url,
              tls: o.tls !== undefined,
              auth: [
                ...(handler.tokens ? ["tokens"] : []),
                ...(o.signedTokens ? ["jwt"] : []),
              ].join("+") || "off",
              streams: [...live.streams.keys()],
            }, `listening on ${url}`);
          }
        },
        onError: (err) => {
          logger.error("request_failed", { error: String(err) });
          return new Response(JSON.stringify({ error: "internal" }) + "\n", {
            status: 500,
            headers: { "content-type": "application/json; charset=utf-8" },
          });
        },
      },
      (req, info) => {
        const r = info.remoteAddr;
        const remote = r.hostname.includes(":")
          ? `[${r.hostname}]:${r.port}`
          : `${r.hostname}:${r.port}`;
        return handler.handle(req, remote);
      },
      logger,
    );
  } catch (err) {
    clearInterval(archiveWatch);
    handler.release();
    throw err;
  }
  const addr = httpServer.addr;

  async function shutdown(): Promise<void> {
    if (shuttingDown) return await shuttingDown;
    handler.startShutdown();
    shuttingDown = (async () => {
      clearInterval(archiveWatch);
      logger.debug("shutdown", { subscribers: handler.sockets.size });
      // New upgrades are now answered with 1001 and /_/health with 503. Let
      // what is pending commit and reach the subscribers, then say goodbye,
      // and give the close frames (queued behind data) time to go out before
      // the listener and its connections are torn down.
      await Promise.all([...live.streams.values()].map((s) => s.log?.flush()));
      for (const s of live.streams.values()) s.closeSubscribers(CloseCode.GoingAway, "");
      handler.closeSockets();
      const deadline = Date.now() + o.closeWaitMs;
      while (handler.sockets.size > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      ac.abort();
      if (o.closeStreams) {
        // A cluster member stops first (a leader resigns: another node takes over at once).
        await Promise.all([...live.streams.values()].map(async (s) => {
          const role = live.roles.get(s.name);
          if (role?.kind === "member") await role.member.close();
          await s.close();
        }));
      } else {
        await Promise.all([...live.streams.values()].map((s) => s.log?.flush()));
      }
      await httpServer.finished;
      handler.release();
    })();
    return await shuttingDown;
  }
  o.signal?.addEventListener("abort", () => void shutdown(), { once: true });

  return {
    addr,
    url: `${scheme}://${addr.hostname}:${addr.port}`,
    streams: live.streams,
    metrics: registry,
    finished: httpServer.finished.then(() => shuttingDown ?? undefined),
    shutdown,
    setTokens(table: TokenTable): void {
      handler.setTokens(table);
    },
    addStream(entry: Stream | ServedStream, options: { publish?: boolean } = {}): void {
      const { stream: s, role } = servedOf(entry, "addStream's stream");
      const publish = options.publish === true;
      if (publish && s.log === null) {
        throw new TypeError(
          `serve: stream ${JSON.stringify(s.name)} is ephemeral: publishing needs a durable stream`,
        );
      }
      live.add(s, { publish, role });
    },
    removeStream(name: string, code: number, reason: string, reopening?: string): Stream | null {
      return live.remove(name, code, reason, reopening);
    },
    setSignedTokens(keys: TokenVerifier): void {
      handler.setSignedTokens(keys);
    },
  };
}
