/**
 * The options of {@linkcode serve}, their defaults, and their checks at the
 * call: a wrong type is a `TypeError`, a wrong value a `RangeError`, an
 * unknown key a `TypeError`, each naming the option and the value seen.
 *
 * @module
 */

import { Logger } from "../common/logger.ts";
import { TokenTable, type TokenVerifier } from "./auth.ts";
import {
  DEFAULT_FANOUT_TURN_BYTES,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_PUBLISH_BYTES,
  DEFAULT_MAX_PUBLISH_SERVER_BYTES,
  DEFAULT_MAX_REPLAY_READERS,
  DEFAULT_MAX_REPLICA_LINKS,
  DEFAULT_MAX_URL_BYTES,
  DEFAULT_PUBLISH_BODY_TIMEOUT_S,
  DEFAULT_SEND_BUFFER_BYTES,
  MAX_PUBLISH_BODY_TIMEOUT_S,
  MIN_SEND_BUFFER_BYTES,
} from "./limits.ts";
import { DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_IN_FLIGHT_BYTES } from "../wire/publish.ts";
import { checkKeys, OptionCheck, shown } from "./option_check.ts";
import type { StreamAdmin } from "./stream_admin.ts";

/** Address a server listens on by default (the CLI's `--host`). */
export const DEFAULT_HOST = "127.0.0.1";
/** Port a server listens on by default (the CLI's `--port`). */
export const DEFAULT_PORT = 8765;
/** Default `pingIntervalS`: idle sockets are pinged this often (seconds). */
export const DEFAULT_PING_INTERVAL_S = 30;

/**
 * Options of {@linkcode serve}.
 */
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
   * WebSocket connections the process's open-files limit leaves room for
   * (`connectionBound` in `open_files.ts`); when lower than `maxConnections`
   * it bounds them instead, and its refusals name `open_files`. `serve`
   * does not look at the limit itself (`cli.ts serve` does).
   * @default null (no such bound)
   */
  openFilesBound?: number | null;
  /**
   * Log reads in flight at once for catching-up subscribers, across every
   * stream of the server; a read beyond it waits its turn (first come, first
   * served): nobody is refused.
   * @default 16
   */
  maxReplayReaders?: number;
  /**
   * Bytes that all subscribers' sockets may hold together, handed to `send`
   * and not yet written (Deno copies each frame per socket). Each socket gets
   * an equal share, between 16 KiB and 1 MiB; a subscriber over its share
   * falls behind (it queues references to the shared frames, up to
   * `maxBacklog` rows, then catches up from the log) instead of being handed
   * more copies. Smallest: 1 MiB.
   * @default 67108864 (64 MiB)
   */
  sendBufferBytes?: number;
  /**
   * Bytes of live frames handed to the subscribers' sockets in one turn of
   * the event loop; the rest of a commit's fan-out waits for the next turn, by
   * when the runtime has written most of those copies and freed them (see
   * server/fanout/fanout_pacer.ts). 0: one synchronous pass, however big.
   * @default 8388608 (8 MiB)
   */
  fanoutTurnBytes?: number;
  /**
   * compress=zstd-stream: the text one group's zstd frame carries before the
   * next commit starts a new frame (docs/SPEC.md §2.6.1); a subscriber that
   * joins mid-frame receives self-contained frames until then. From 4 KiB to
   * 64 MiB (`COMPRESS_FRAME_BYTES`, server/frames/zstd_stream.ts, where the
   * server checks the range).
   * @default 1048576 (1 MiB)
   */
  compressFrameBytes?: number;
  /**
   * Bearer tokens granting read access per stream (see `auth.ts`); checked
   * before the upgrade and on every route but `/_/health` and the viewer's
   * scripts. `null`: no access control.
   * @default null
   */
  tokens?: TokenTable | null;
  /**
   * The keys signed tokens (JWTs) are checked against (see
   * `access/signed_tokens.ts`); with `tokens` too, a token with two dots is
   * checked here, any other against `tokens`. `null`: no signed tokens.
   * @default null
   */
  signedTokens?: TokenVerifier | null;
  /**
   * Cluster replication sockets (`/{name}/replicate`) open at once; past it
   * HTTP 503 before the upgrade. They do not count against `maxConnections`.
   * @default 1024
   */
  maxReplicaLinks?: number;
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
  /**
   * The streams opened for network publishing (`POST /{name}`, the
   * `/{name}/publish` socket; docs/SPEC.md §9), by name; each must be durable.
   * @default [] (none)
   */
  publish?: readonly string[];
  /** Largest `POST` body or publish frame, bytes (413 / close 1009 past it). @default 16 MiB */
  maxPublishBytes?: number;
  /** Frames a publish socket may have awaiting their ack. @default 64 */
  maxInFlight?: number;
  /**
   * Bytes of frames (their text) a publish socket may have awaiting their
   * ack; one frame always may. @default 16 MiB
   */
  maxPublishInflightBytes?: number;
  /**
   * Bytes of publishing (frames taken, `POST` bodies) the server holds at
   * once; past it frames wait unread and bodies unread. @default 64 MiB
   */
  maxPublishServerBytes?: number;
  /**
   * Most time between two pieces of a `POST` body, seconds; a body that
   * stalls longer is cut with 408 and what it held is freed. @default 30
   */
  publishBodyTimeoutS?: number;
  /**
   * Creates and deletes streams while serving (`PUT`/`DELETE
   * /_/streams/{name}`; see `admin/stream_admin.ts`); absent: those routes
   * answer 405.
   * @default null
   */
  streamAdmin?: StreamAdmin | null;
}

/** {@linkcode ServeOptions} checked, with the defaults applied. */
export interface ServeSettings {
  hostname: string;
  port: number;
  signal: AbortSignal | undefined;
  pingIntervalS: number;
  maxUrlBytes: number;
  maxConnections: number;
  openFilesBound: number | null;
  maxReplayReaders: number;
  sendBufferBytes: number;
  fanoutTurnBytes: number;
  /** Absent: the default; its range is checked where the frames are (http/handler.ts). */
  compressFrameBytes: number | undefined;
  tokens: TokenTable | null;
  signedTokens: TokenVerifier | null;
  maxReplicaLinks: number;
  logger: Logger;
  onListen: ((addr: Deno.NetAddr) => void) | undefined;
  tls: { cert: string; key: string } | undefined;
  closeStreams: boolean;
  closeWaitMs: number;
  publish: string[];
  maxPublishBytes: number;
  maxInFlight: number;
  maxPublishInflightBytes: number;
  maxPublishServerBytes: number;
  publishBodyTimeoutS: number;
  streamAdmin: StreamAdmin | null;
}

const KEYS = [
  "hostname",
  "port",
  "signal",
  "pingIntervalS",
  "maxUrlBytes",
  "maxConnections",
  "openFilesBound",
  "maxReplayReaders",
  "sendBufferBytes",
  "fanoutTurnBytes",
  "compressFrameBytes",
  "tokens",
  "signedTokens",
  "maxReplicaLinks",
  "logger",
  "onListen",
  "tls",
  "closeStreams",
  "closeWaitMs",
  "publish",
  "maxPublishBytes",
  "maxInFlight",
  "maxPublishInflightBytes",
  "maxPublishServerBytes",
  "publishBodyTimeoutS",
  "streamAdmin",
] as const;

// A timer runs at most 2^31-1 ms: a longer body timeout would fire at once.
function bodyTimeout(s: number): number {
  if (s > MAX_PUBLISH_BODY_TIMEOUT_S) {
    throw new RangeError(
      `serve: options.publishBodyTimeoutS must be at most ${MAX_PUBLISH_BODY_TIMEOUT_S} s, got ${s}`,
    );
  }
  return s;
}

// signedTokens: anything with a verify method (access/signed_tokens.ts's SignedTokens), or null.
function verifier(o: OptionCheck): TokenVerifier | null {
  const v = o.get("signedTokens");
  if (v === undefined || v === null) return null;
  if (typeof (v as Partial<TokenVerifier>).verify !== "function") {
    o.typeError("signedTokens", "a SignedTokens (access/signed_tokens.ts)");
  }
  return v as TokenVerifier;
}

/**
 * Checks {@linkcode serve}'s options and applies their defaults.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { checkServeOptions } from "./serve_options.ts";
 * equal(checkServeOptions({}).port, 8765);
 * throws(() => checkServeOptions({ port: "80" as unknown as number }), {
 *   name: "TypeError",
 *   message: 'serve: options.port must be an integer 0..65535, got "80"',
 * });
 * ```
 */
export function checkServeOptions(options: unknown): ServeSettings {
  const where = "serve";
  const o = new OptionCheck(where, checkKeys(where, options, KEYS));
  const max = Number.MAX_SAFE_INTEGER;
  const tls = o.object("tls");
  if (tls !== undefined) {
    for (const k of Object.keys(tls)) {
      if (k !== "cert" && k !== "key") {
        throw new TypeError(`serve: unknown option "tls.${k}" (known: tls.cert, tls.key)`);
      }
    }
    for (const k of ["cert", "key"] as const) {
      if (typeof tls[k] !== "string") {
        throw new TypeError(`serve: options.tls.${k} must be a PEM string, got ${shown(tls[k])}`);
      }
    }
  }
  const publish = (options as Record<string, unknown>).publish ?? [];
  if (!Array.isArray(publish) || publish.some((n) => typeof n !== "string")) {
    throw new TypeError(
      `serve: options.publish must be an array of stream names, got ${shown(publish)}`,
    );
  }
  const streamAdmin = (options as Record<string, unknown>).streamAdmin ?? null;
  if (
    streamAdmin !== null &&
    (typeof streamAdmin !== "object" ||
      !["put", "delete", "describe"].every((k) =>
        typeof (streamAdmin as Record<string, unknown>)[k] === "function"
      ))
  ) {
    throw new TypeError(
      `serve: options.streamAdmin must be a StreamAdmin (put, delete, describe), got ${
        shown(streamAdmin)
      }`,
    );
  }
  return {
    streamAdmin: streamAdmin as StreamAdmin | null,
    publish: [...publish],
    maxPublishBytes: o.int("maxPublishBytes", 1, max, DEFAULT_MAX_PUBLISH_BYTES),
    maxInFlight: o.int("maxInFlight", 1, 1 << 20, DEFAULT_MAX_IN_FLIGHT),
    maxPublishInflightBytes: o.int(
      "maxPublishInflightBytes",
      1,
      max,
      DEFAULT_MAX_IN_FLIGHT_BYTES,
    ),
    maxPublishServerBytes: o.int("maxPublishServerBytes", 1, max, DEFAULT_MAX_PUBLISH_SERVER_BYTES),
    publishBodyTimeoutS: bodyTimeout(o.number(
      "publishBodyTimeoutS",
      0,
      false,
      DEFAULT_PUBLISH_BODY_TIMEOUT_S,
    )),
    hostname: o.string("hostname", DEFAULT_HOST),
    port: o.int("port", 0, 65535, DEFAULT_PORT),
    signal: o.instance("signal", AbortSignal) ?? undefined,
    pingIntervalS: o.number("pingIntervalS", 0, true, DEFAULT_PING_INTERVAL_S),
    maxUrlBytes: o.int("maxUrlBytes", 64, max, DEFAULT_MAX_URL_BYTES),
    maxConnections: o.int("maxConnections", 1, max, DEFAULT_MAX_CONNECTIONS),
    openFilesBound: o.int("openFilesBound", 1, max, null, true),
    maxReplayReaders: o.int("maxReplayReaders", 1, max, DEFAULT_MAX_REPLAY_READERS),
    sendBufferBytes: o.int(
      "sendBufferBytes",
      MIN_SEND_BUFFER_BYTES,
      Number.MAX_SAFE_INTEGER,
      DEFAULT_SEND_BUFFER_BYTES,
    ),
    fanoutTurnBytes: o.int(
      "fanoutTurnBytes",
      0,
      Number.MAX_SAFE_INTEGER,
      DEFAULT_FANOUT_TURN_BYTES,
    ),
    compressFrameBytes: o.int("compressFrameBytes", 1, max, null, true) ?? undefined,
    tokens: o.instance("tokens", TokenTable, true) ?? null,
    signedTokens: verifier(o),
    maxReplicaLinks: o.int("maxReplicaLinks", 1, max, DEFAULT_MAX_REPLICA_LINKS),
    logger: o.instance("logger", Logger) ?? new Logger({ level: "warn" }),
    onListen: o.fn<(addr: Deno.NetAddr) => void>("onListen"),
    tls: tls as { cert: string; key: string } | undefined,
    closeStreams: o.bool("closeStreams", true),
    closeWaitMs: o.number("closeWaitMs", 0, true, 2000),
  };
}
