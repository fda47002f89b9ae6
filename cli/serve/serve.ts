/**
 * `cli.ts serve`: declare streams, feed them from stdin or upstream
 * WebSockets, and serve them over HTTP and WebSocket on one port.
 *
 * ```text
 * deno run -A cli.ts serve --stream trades=trades.json --stdin trades < trades.ndjson
 * deno run -A cli.ts serve --config streamcast.json --port 9000
 * ```
 *
 * What it prints on stderr, and nothing else of its own: `listening on
 * http://HOST:PORT` (https with `--tls-cert`) once ready, always, as plain
 * text; then one line per event at or above `--log-level` (info: the ingest
 * lines — rejects with their line number, end of stdin, upstream connects and
 * disconnects —, subscribes, refusals, drops, archive errors, one line when
 * shutting down), as text or, with `--log-format json`, as one JSON object per
 * line — among them, at start, a warning when the open-files limit leaves
 * room for fewer connections than `--max-connections` (both numbers), and
 * an error at most once a second while accepts fail for lack of
 * descriptors; or one plain `streamcast serve: …` line saying why it cannot
 * start.
 * Never a token (see docs/CLI.md).
 *
 * With `--tokens`, `--jwt-keys` or `--jwt-secret-file`, SIGHUP reloads those
 * files for the requests that follow (subscriptions already open stay, each
 * until its own signed token expires); a file that cannot be read or checked
 * keeps what was loaded from it in force, and says why in one error line.
 *
 * Exit codes: 0 after SIGINT/SIGTERM; 2 for anything wrong in the command
 * line or the config (a flag, a key, a schema or handler file); 1 when the
 * machine says no (port busy, log locked or corrupt, an ingest failure that
 * is not a bad row). See docs/CLI.md.
 *
 * The parts, each a file of this folder: `settings.ts` (the settings table:
 * usage, flags, config keys, with its groups in `follow_settings.ts`,
 * `cluster_settings.ts`, `publish_settings.ts`, `send_settings.ts` and
 * `iceberg_settings.ts`), `values.ts` (reading each kind of value),
 * `run_settings.ts` (what serve runs with), `config.ts` (the config file, and
 * the flags over it), `streams.ts` (schemas and logs), `cluster.ts` (a
 * cluster's node and its streams), `ingest.ts` (stdin and upstreams),
 * `tokens_reloader.ts` (SIGHUP), `fatal.ts` (one-line failures); SIGINT and
 * SIGTERM are `../_signals.ts`, shared with `demo`. This file starts them in
 * order and runs the command.
 *
 * @module
 */

import { Logger } from "../../common/logger.ts";
import { batchedStderr, stderrLines } from "../../common/stderr_lines.ts";
import { TokenTable } from "../../server/auth.ts";
import type { FrameHandler } from "../../server/ingest/mod.ts";
import { serve, type ServedStream, type Server } from "../../server/serve.ts";
import {
  DEFAULT_MALLOC_TRIM_EVERY_S,
  DEFAULT_MMAP_THRESHOLD_BYTES,
  pinMmapThreshold,
  trimMallocEvery,
} from "../../server/allocator.ts";
import { Stream } from "../../server/stream/stream.ts";
import {
  connectionBound,
  descriptorsInUse,
  openFilesLimit,
  raiseOpenFilesLimit,
} from "../../server/open_files.ts";
import { DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_REPLAY_READERS } from "../../server/limits.ts";
import { parse, UsageError } from "../_args.ts";
import { settingsFrom } from "./config.ts";
import { Fatal, fileError, oneLine } from "./fatal.ts";
import { type Ingest, loadHandlers, startIngest } from "./ingest.ts";
import { SERVE_FLAGS, SERVE_USAGE } from "./settings.ts";
import type { Settings } from "./run_settings.ts";
import { onSignals } from "../_signals.ts";
import { tokensReloader } from "./tokens_reloader.ts";
import {
  DEFAULT_MAX_TOKEN_BYTES,
  SignedTokens,
  type SignedTokensFiles,
} from "../../server/access/signed_tokens.ts";
import { loadSchemas, openMirrors, openStreams } from "./streams.ts";
import { joinCluster } from "./cluster.ts";
import { ClusterStreamAdmin } from "./cluster_streams.ts";
import {
  attachAdmin,
  createdAdmin,
  declaredDefinitions,
  loadCreated,
  openCreated,
} from "./created_streams.ts";
import type { Mirror } from "../../server/mirror/mirror.ts";

interface Running extends Ingest {
  server: Server;
  streams: Stream[];
  mirrors: Mirror[];
  /** Stops this node's cluster nodes and removes its record (nothing without `--cluster`). */
  leaveCluster(): Promise<void>;
  /** Stops following the cluster's stream definitions (nothing without `--cluster`). */
  stopDefinitions(): Promise<void>;
}

function listenError(s: Settings, err: unknown): Fatal {
  const where = `${s.host}:${s.port}`;
  if (err instanceof Deno.errors.AddrInUse) {
    return new Fatal(`cannot listen on ${where}: the address is in use (another server?)`, 1);
  }
  return new Fatal(`cannot listen on ${where}: ${oneLine(err)}`, 1);
}

async function loadTokens(path: string): Promise<TokenTable> {
  try {
    return await TokenTable.load(path);
  } catch (err) {
    if (err instanceof TypeError) throw new Fatal(err.message, 2);
    throw new Fatal(`cannot read tokens file ${path}: ${fileError(err)}`, 2);
  }
}

// The key files of signed tokens, as SignedTokens.load reads them; null: not served.
function jwtFiles(s: Settings): SignedTokensFiles | null {
  if (s.jwtKeys === null && s.jwtSecretFile === null) return null;
  return {
    keys: s.jwtKeys,
    secret: s.jwtSecretFile,
    issuer: s.jwtIssuer,
    audience: s.jwtAudience,
    maxTokenBytes: s.maxTokenBytes ?? DEFAULT_MAX_TOKEN_BYTES,
  };
}

async function loadSignedTokens(files: SignedTokensFiles | null): Promise<SignedTokens | null> {
  if (files === null) return null;
  try {
    return await SignedTokens.load(files);
  } catch (err) {
    if (err instanceof TypeError) throw new Fatal(err.message, 2);
    const names = [files.keys, files.secret].filter((f) => f !== null).join(", ");
    throw new Fatal(`cannot read ${names}: ${fileError(err)}`, 2);
  }
}

async function loadTls(s: Settings): Promise<{ cert: string; key: string } | null> {
  if (s.tlsCert === null || s.tlsKey === null) return null;
  const read = async (path: string, what: string) => {
    try {
      return await Deno.readTextFile(path);
    } catch (err) {
      throw new Fatal(`cannot read ${what} ${path}: ${fileError(err)}`, 2);
    }
  };
  const tls = { cert: await read(s.tlsCert, "--tls-cert"), key: await read(s.tlsKey, "--tls-key") };
  // A certificate and key that do not parse, or do not match, stop the start here.
  try {
    Deno.listenTls({ hostname: "127.0.0.1", port: 0, ...tls }).close();
  } catch (err) {
    throw new Fatal(`--tls-cert ${s.tlsCert} / --tls-key ${s.tlsKey}: ${oneLine(err)}`, 2);
  }
  return tls;
}

/**
 * Raises the soft open-files limit to the hard one (open_files.ts); when
 * that cannot be done, says why and keeps the limit in force.
 */
async function raiseLimit(logger: Logger): Promise<void> {
  try {
    const { before, after } = await raiseOpenFilesLimit();
    logger.debug("open_files_limit", { before: before.soft, soft: after.soft, hard: after.hard });
  } catch (err) {
    logger.warn(
      "open_files_limit",
      { error: oneLine(err) },
      `streamcast serve: cannot raise the open-files limit: ${oneLine(err)}; ` +
        "serving within the limit in force",
    );
  }
}

/**
 * The WebSocket connections the open-files limit leaves room for, counted
 * once the streams are open (open_files.ts has the reserve's formula); null
 * when the limit or the descriptors in use cannot be read, or it sets no
 * bound. Logs both numbers when it is fewer than `--max-connections`.
 */
async function openFilesBound(
  s: Settings,
  streams: number,
  logger: Logger,
): Promise<number | null> {
  const limit = await openFilesLimit();
  const inUse = await descriptorsInUse();
  if (limit === null || inUse === null) {
    logger.warn(
      "open_files_bound",
      { error: "cannot read the open-files limit or the descriptors in use" },
      "streamcast serve: cannot read the open-files limit or the descriptors in use: " +
        "connections are bounded by --max-connections alone",
    );
    return null;
  }
  if (limit.soft === Infinity) return null;
  const { bound, reserve } = connectionBound({
    softLimit: limit.soft,
    inUse,
    streams,
    maxReplayReaders: s.maxReplayReaders ?? DEFAULT_MAX_REPLAY_READERS,
  });
  const maxConnections = s.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  if (bound < maxConnections) {
    logger.warn(
      "open_files_bound",
      { open_files: limit.soft, hard: limit.hard, reserve, bound, max_connections: maxConnections },
      `streamcast serve: the open-files limit ${limit.soft} (hard ${limit.hard}) leaves room ` +
        `for ${bound} connections (${reserve} descriptors kept for logs, chunks and requests), ` +
        `fewer than --max-connections ${maxConnections}: more are answered 503; ` +
        "raise the hard limit (ulimit -Hn, systemd LimitNOFILE) to accept more",
    );
  }
  return bound;
}

async function start(s: Settings, logger: Logger): Promise<Running> {
  // Everything that can be checked without side effects first: schemas,
  // handlers, tokens, the certificate.
  const schemas = await loadSchemas(s);
  // Streams created while serving, recorded in ROOT/streams.json (a cluster keeps them in etcd).
  const declared = declaredDefinitions(s, schemas);
  const recorded = s.cluster === null ? await loadCreated(s, declared) : new Map();
  const handlers: Map<string, FrameHandler> = await loadHandlers(s);
  const tokens = s.tokens === null ? null : await loadTokens(s.tokens);
  const signedTokens = await loadSignedTokens(jwtFiles(s));
  const tls = await loadTls(s);
  // A long-running process: keep glibc from growing its heap on big
  // short-lived buffers (see server/allocator.ts).
  if (pinMmapThreshold()) {
    logger.debug("malloc_mmap_threshold", { bytes: DEFAULT_MMAP_THRESHOLD_BYTES });
  }
  // And give back what the threads' arenas hold free (see trimMallocEvery); the
  // timer does not keep the process alive, and it ends with it.
  trimMallocEvery(
    s.mallocTrimEvery ?? DEFAULT_MALLOC_TRIM_EVERY_S,
    (ms) => logger.debug("malloc_trim", { ms: Math.round(ms * 100) / 100 }),
  );
  // Before any log is opened: as many descriptors as this process may have.
  await raiseLimit(logger);
  // Probe the port first, so that a busy one is reported before any log is
  // created; serve() below still handles losing a race for it.
  if (s.port !== 0) {
    try {
      Deno.listen({ hostname: s.host, port: s.port }).close();
    } catch (err) {
      throw listenError(s, err);
    }
  }
  // A cluster's node: its streams are replicas of the cluster's, each with its node.
  const cluster = s.cluster !== null ? await joinCluster(s, schemas, logger, tls !== null) : null;
  const own: (Stream | ServedStream)[] = cluster
    ? cluster.streams
    : await openStreams(s, schemas, logger);
  // Followed streams (--follow): replicas, fed by their mirrors only.
  let followed: Awaited<ReturnType<typeof openMirrors>>;
  let clusterAdmin: ClusterStreamAdmin | null = null;
  const createdPublish = [...recorded].filter(([, d]) => d.publish).map(([name]) => name);
  try {
    if (cluster) {
      // A cluster's created streams: their definitions are in etcd.
      clusterAdmin = await ClusterStreamAdmin.load(cluster, s, declared, logger);
      const defined = await clusterAdmin.openInitial();
      own.push(...defined.served);
      createdPublish.push(...defined.publish);
    } else {
      own.push(...await openCreated(s, recorded, logger));
    }
    followed = await openMirrors(s, logger);
  } catch (err) {
    // A cluster's members stop before their streams close (leave).
    await cluster?.leave();
    await Promise.allSettled(own.map((st) => (st instanceof Stream ? st : st.stream).close()));
    throw err;
  }
  const served: (Stream | ServedStream)[] = [
    ...own,
    ...followed.streams.map((stream, i) => ({
      stream,
      role: { kind: "mirror" as const, mirror: followed.mirrors[i] },
    })),
  ];
  const streams = served.map((st) => st instanceof Stream ? st : st.stream);
  if (streams.length === 0 && clusterAdmin === null) {
    logger.info(
      "no_streams",
      {},
      "streamcast serve: no stream declared: serving none until one is created " +
        "(PUT /_/streams/NAME, or cli.ts streams create)",
    );
  }
  const bound = await openFilesBound(s, streams.length, logger);
  const localAdmin = cluster ? null : createdAdmin(s, declared, recorded, logger);
  let server: Server;
  try {
    server = serve(served, {
      hostname: s.host,
      port: s.port,
      ...(s.pingInterval !== undefined ? { pingIntervalS: s.pingInterval } : {}),
      ...(s.maxConnections !== undefined ? { maxConnections: s.maxConnections } : {}),
      openFilesBound: bound,
      ...(s.maxUrlBytes !== undefined ? { maxUrlBytes: s.maxUrlBytes } : {}),
      ...(s.maxReplayReaders !== undefined ? { maxReplayReaders: s.maxReplayReaders } : {}),
      ...(s.sendBufferBytes !== undefined ? { sendBufferBytes: s.sendBufferBytes } : {}),
      ...(s.fanoutTurnBytes !== undefined ? { fanoutTurnBytes: s.fanoutTurnBytes } : {}),
      ...(s.compressFrameBytes !== undefined ? { compressFrameBytes: s.compressFrameBytes } : {}),
      publish: [
        ...[...s.streams].filter(([, d]) => d.publish).map(([name]) => name),
        ...createdPublish,
      ],
      streamAdmin: clusterAdmin ?? localAdmin,
      ...(s.maxPublishBytes !== undefined ? { maxPublishBytes: s.maxPublishBytes } : {}),
      ...(s.maxInFlight !== undefined ? { maxInFlight: s.maxInFlight } : {}),
      ...(s.maxPublishInflightBytes !== undefined
        ? { maxPublishInflightBytes: s.maxPublishInflightBytes }
        : {}),
      ...(s.maxPublishServerBytes !== undefined
        ? { maxPublishServerBytes: s.maxPublishServerBytes }
        : {}),
      ...(s.publishBodyTimeout !== undefined ? { publishBodyTimeoutS: s.publishBodyTimeout } : {}),
      ...(tls ? { tls } : {}),
      tokens,
      signedTokens,
      ...(s.cluster !== null ? { maxReplicaLinks: s.maxReplicaLinks } : {}),
      logger,
    });
  } catch (err) {
    await cluster?.leave();
    await Promise.allSettled(streams.map((st) => st.close()));
    throw listenError(s, err);
  }
  if (localAdmin) attachAdmin(localAdmin, server);
  for (const f of followed.mirrors) f.start();
  for (const node of cluster?.nodes.values() ?? []) node.start();
  clusterAdmin?.attach(server);
  return {
    server,
    streams,
    mirrors: followed.mirrors,
    leaveCluster: () => cluster?.leave() ?? Promise.resolve(),
    stopDefinitions: () => clusterAdmin?.stop() ?? Promise.resolve(),
    ...startIngest(s, server, handlers, logger, cluster?.nodes),
  };
}

/** Runs `serve` with its arguments; resolves with the exit code. */
export async function cmdServe(args: string[]): Promise<number> {
  let values: Record<string, unknown>;
  try {
    values = parse(args, SERVE_FLAGS, 0).values;
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    // node:util's messages run on with advice over several lines; keep the first sentence.
    const first = err.message.split("\n")[0].replace(/\. To specify .*$/, "");
    console.error(`streamcast serve: ${first} (see --help)`);
    return 2;
  }
  if (values.help) {
    console.log(SERVE_USAGE);
    return 0;
  }
  // Until the flags are read, events go out at the defaults.
  let logger = new Logger();
  // Listening before the start, so that a signal during it is not the default exit.
  const signals = onSignals(
    Deno.build.os === "windows" ? ["SIGINT", "SIGBREAK"] : ["SIGINT", "SIGTERM"],
    () => logger,
  );
  let reloader: ReturnType<typeof tokensReloader> | null = null;
  try {
    let running: Running;
    try {
      const settings = await settingsFrom(values);
      logger = new Logger({
        level: settings.logLevel,
        format: settings.logFormat,
        write: batchedStderr,
      });
      const jwt = jwtFiles(settings);
      if (settings.tokens !== null || jwt !== null) {
        reloader = tokensReloader({ tokens: settings.tokens, jwt }, () => logger);
      }
      running = await start(settings, logger);
      reloader?.attach(running.server);
    } catch (err) {
      // The log lines of the start go out before the line saying why it failed.
      stderrLines.flush();
      if (err instanceof UsageError) {
        console.error(`streamcast serve: ${err.message} (see --help)`);
        return 2;
      }
      if (!(err instanceof Fatal)) throw err;
      console.error(`streamcast serve: ${err.message}`);
      return err.code;
    }
    const failure = await Promise.race([signals.received.then(() => null), running.failed]);
    if (failure !== null) {
      logger.error(
        "ingest_failed",
        { error: failure },
        `streamcast serve: ${failure}; shutting down`,
      );
    }
    let code = failure !== null ? 1 : 0;
    try {
      await running.stopIngest();
      await Promise.all(running.mirrors.map((f) => f.close()));
      const late = running.failure();
      if (failure === null && late !== null) {
        // An ingest that failed while stopping (e.g. its last rows could not be written).
        logger.error("ingest_failed", { error: late }, `streamcast serve: ${late}`);
        code = 1;
      }
      await running.stopDefinitions();
      await running.server.shutdown();
      await running.leaveCluster();
      await running.closeRejects();
    } catch (err) {
      logger.error(
        "shutdown_failed",
        { error: oneLine(err) },
        `streamcast serve: shutdown failed: ${oneLine(err)}`,
      );
      code = 1;
    }
    return code;
  } finally {
    await reloader?.remove();
    signals.remove();
  }
}
