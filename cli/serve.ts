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
 * line; or one plain `streamcast serve: …` line saying why it cannot start.
 * Never a token (see docs/CLI.md).
 *
 * With `--tokens`, SIGHUP reloads the tokens file for the requests that
 * follow (subscriptions already open stay); a file that cannot be read or
 * checked keeps the tokens in force, and says why in one error line.
 *
 * Exit codes: 0 after SIGINT/SIGTERM; 2 for anything wrong in the command
 * line or the config (a flag, a key, a schema or handler file); 1 when the
 * machine says no (port busy, log locked or corrupt, an ingest failure that
 * is not a bad row). See docs/CLI.md.
 *
 * @module
 */

import { dirname, join, resolve } from "node:path";
import { isStreamName } from "../client/wire.ts";
import { TokenTable } from "../server/auth.ts";
import {
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_REPLAY_READERS,
  DEFAULT_MAX_ROW_BYTES,
  DEFAULT_MAX_SUBSCRIBERS,
  DEFAULT_MAX_URL_BYTES,
} from "../server/limits.ts";
import {
  isLogFormat,
  isLogLevel,
  type LogFormat,
  Logger,
  type LogLevel,
} from "../common/logger.ts";
import {
  type ArchiveOptions,
  LogCorruptError,
  LogLockedError,
  type LogOptions,
} from "../log/mod.ts";
import {
  type FrameHandler,
  ingestLines,
  ingestUpstream,
  loadHandler,
  MAX_LINE_BYTES,
  type RejectFile,
  rejectFile,
  type RejectRecord,
  type RejectSink,
} from "../server/ingest.ts";
import { compileSchema } from "../schema/compile.ts";
import { SchemaError } from "../schema/schema_error.ts";
import { serve, type Server } from "../server/serve.ts";
import { Stream } from "../server/stream.ts";
import { parse, UsageError } from "./_args.ts";

const USAGE = `usage: deno run -A cli.ts serve --stream NAME=SCHEMA.json ... [options]

Captures feeds into durable streams and serves them over WebSocket and HTTP.

streams:
  --stream NAME=SCHEMA.json  declare a stream with its JSON Schema (repeatable;
                             "=SCHEMA.json" declares the unnamed stream, served at /)
  --ephemeral NAME           that stream keeps no log: offsets are null, no replay
                             (repeatable)
feeds:
  --stdin NAME               each stdin line is a JSON row for stream NAME
  --upstream NAME=URL        each text frame of the WebSocket at URL is a row for
                             stream NAME; reconnects with backoff (repeatable)
  --handler MODULE.ts        its default export turns a frame into a row, an array
                             of rows, or null (skip); applies to every upstream
  --handler NAME=MODULE.ts   the handler for the upstream of stream NAME only
where and how:
  --root DIR                 the logs live in DIR/NAME (DIR/_ for the unnamed
                             stream), with rejects.ndjson beside them [./data]
  --host HOST                address to listen on [127.0.0.1]
  --port PORT                port to listen on (0: any free port) [8765]
  --max-backlog N            frames queued per live subscriber before it catches
                             up from the log [8192]
  --max-replay N|none        most rows a subscribe may replay [100000]
  --segment-bytes N          roll the active segment at this size [67108864]
  --seal-every SECONDS       roll the active segment when its first row is this
                             old (0: never) [60]
  --no-fsync                 write to the OS before broadcast without syncing:
                             survives a process crash, not a power loss
  --ping-interval SECONDS    ping idle subscribers this often (0: never) [30]
  --config FILE.json         the same settings as JSON (see docs/CLI.md); flags win
  --archive s3://BUCKET/PREFIX  archive every durable stream's chunks and
                             manifest there (credentials and region from the
                             AWS SDK's chain: AWS_ACCESS_KEY_ID, ...)
  --replay-archive           serve offsets the local disk dropped from the archive
  --s3-endpoint URL          an S3-compatible store (or AWS_ENDPOINT_URL_S3)
  --s3-path-style            path-style addressing (most S3-compatible stores)
limits (docs/CLI.md has the table):
  --max-connections N        WebSocket connections at once; one more upgrade is
                             answered HTTP 503 [${DEFAULT_MAX_CONNECTIONS}]
  --max-subscribers N        subscribers per stream; one more is closed with 1013
                             (try again later) [${DEFAULT_MAX_SUBSCRIBERS}]
  --max-url-bytes N          longest request URL; a longer one gets 414 [${DEFAULT_MAX_URL_BYTES}]
  --max-row-bytes N          largest row as stored (its JSON); a bigger input row
                             is a reject [${DEFAULT_MAX_ROW_BYTES}]
  --max-replay-readers N     log reads for catching-up subscribers at once; more
                             wait their turn [${DEFAULT_MAX_REPLAY_READERS}]
  --stall-timeout SECONDS    drop a subscriber whose socket accepts nothing for
                             this long, with 4429 [30]
access and transport:
  --tokens FILE.json         bearer tokens granting read access per stream; without
                             it anyone may read (format in docs/CLI.md); SIGHUP
                             reloads it (a bad file keeps the tokens in force)
  --tls-cert FILE.pem        serve https:// and wss://: the certificate chain (PEM)
  --tls-key FILE.pem         and its private key (PEM)
logs:
  --log-level LEVEL          error, warn, info or debug [info]
  --log-format FORMAT        text, or json: one JSON object per line [text]

Prints "listening on http://HOST:PORT" on stderr once ready. SIGINT or SIGTERM
stops ingest, closes subscribers with 1001, flushes the logs and exits 0.`;

const FLAGS = {
  root: { type: "string" },
  host: { type: "string" },
  port: { type: "string" },
  stream: { type: "string", multiple: true },
  ephemeral: { type: "string", multiple: true },
  stdin: { type: "string" },
  upstream: { type: "string", multiple: true },
  handler: { type: "string", multiple: true },
  "max-backlog": { type: "string" },
  "max-replay": { type: "string" },
  "segment-bytes": { type: "string" },
  "seal-every": { type: "string" },
  "no-fsync": { type: "boolean" },
  "ping-interval": { type: "string" },
  config: { type: "string" },
  archive: { type: "string" },
  "replay-archive": { type: "boolean" },
  "s3-endpoint": { type: "string" },
  "s3-path-style": { type: "boolean" },
  "max-connections": { type: "string" },
  "max-subscribers": { type: "string" },
  "max-url-bytes": { type: "string" },
  "max-row-bytes": { type: "string" },
  "max-replay-readers": { type: "string" },
  "stall-timeout": { type: "string" },
  tokens: { type: "string" },
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "log-level": { type: "string" },
  "log-format": { type: "string" },
} as const;

const NAME_RULE = "1-64 of A-Z a-z 0-9 . _ -, not starting with _ or .";

/** The largest `--max-row-bytes`: a record's length field is 32 bits (the log checks it too). */
const MAX_ROW_BYTES_CAP = 0xffff_ffff - 64;

/** A reason to stop before or while serving: one line on stderr, and an exit code. */
class Fatal extends Error {
  readonly code: number;
  constructor(message: string, code: number) {
    super(message);
    this.name = "Fatal";
    this.code = code;
  }
}

/** A stream's schema: the path of its file, or an inline schema from the config. */
type SchemaSource = { path: string } | { inline: Record<string, unknown>; where: string };

interface StreamDecl {
  schema: SchemaSource;
  ephemeral: boolean;
}

interface UpstreamDecl {
  url: string;
  /** This upstream's own handler module, or null for the default one. */
  handler: string | null;
}

/** Everything `serve` runs with, after the config file and the flags are merged. */
interface Settings {
  root: string;
  host: string;
  port: number;
  streams: Map<string, StreamDecl>;
  stdin: string | null;
  upstreams: Map<string, UpstreamDecl>;
  handler: string | null;
  maxBacklog?: number;
  maxReplay?: number | null;
  segmentBytes?: number;
  sealEveryS?: number;
  fsync: boolean;
  pingIntervalS?: number;
  archive: ArchiveOptions | null;
  replayArchive: boolean;
  maxConnections?: number;
  maxSubscribers?: number;
  maxUrlBytes?: number;
  maxRowBytes?: number;
  maxReplayReaders?: number;
  stallTimeoutS?: number;
  /** The tokens file, or null for no access control. */
  tokens: string | null;
  tlsCert: string | null;
  tlsKey: string | null;
  logLevel: LogLevel;
  logFormat: LogFormat;
}

/** Settings as a config file gives them: every field optional. */
type FileSettings =
  & Omit<
    Settings,
    | "root"
    | "host"
    | "port"
    | "fsync"
    | "stdin"
    | "handler"
    | "archive"
    | "replayArchive"
    | "tokens"
    | "tlsCert"
    | "tlsKey"
    | "logLevel"
    | "logFormat"
  >
  & {
    root?: string;
    host?: string;
    port?: number;
    fsync?: boolean;
    stdin?: string;
    handler?: string;
    archive?: string;
    replayArchive?: boolean;
    s3Endpoint?: string;
    s3PathStyle?: boolean;
    tokens?: string;
    tlsCert?: string;
    tlsKey?: string;
    logLevel?: LogLevel;
    logFormat?: LogFormat;
  };

function show(name: string): string {
  return name === "" ? "the unnamed stream" : `stream "${name}"`;
}

/** An error's message on one line (runtime errors may span several). */
function oneLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  // Module errors quote the source under the message; the location line says enough.
  const line = text.split("\n").map((l) => l.trim())
    .filter((l) => l !== "" && !/^(\d+\s*)?\|/.test(l)).join(" ");
  return line.length > 400 ? line.slice(0, 397) + "..." : line;
}

function fileError(err: unknown): string {
  if (err instanceof Deno.errors.NotFound) return "no such file";
  if (err instanceof Deno.errors.PermissionDenied) return "permission denied";
  if (err instanceof Deno.errors.IsADirectory) return "it is a directory";
  return oneLine(err);
}

// ---- numbers, from flags (strings) or the config (JSON values) ----

function integer(v: unknown, what: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = typeof v === "string" && /^\d+$/.test(v.trim()) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `${min}-${max}`;
    throw new RangeError(
      `${what} must be an integer ${range}, got ${JSON.stringify(v)}`,
    );
  }
  return n;
}

function seconds(v: unknown, what: string): number {
  const n = typeof v === "string" && /^\d+(\.\d+)?$/.test(v.trim()) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0) {
    throw new RangeError(`${what} must be a number of seconds >= 0, got ${JSON.stringify(v)}`);
  }
  return n;
}

function maxReplay(v: unknown, what: string): number | null {
  if (v === null || v === "none") return null;
  return integer(v, `${what} (or none)`, 0);
}

function streamName(name: string, what: string): string {
  if (!isStreamName(name)) {
    throw new RangeError(`invalid stream name ${JSON.stringify(name)} in ${what}: ${NAME_RULE}`);
  }
  return name;
}

function upstreamUrl(url: string, what: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new RangeError(`${what}: ${JSON.stringify(url)} is not a URL`);
  }
  if (!["ws:", "wss:", "http:", "https:"].includes(u.protocol)) {
    throw new RangeError(
      `${what}: the URL must be ws://, wss://, http:// or https://, got ${u.protocol}`,
    );
  }
  return url;
}

/** Splits `NAME=VALUE` at the first `=`; null when there is none. */
function split(spec: string): [string, string] | null {
  const at = spec.indexOf("=");
  return at === -1 ? null : [spec.slice(0, at), spec.slice(at + 1)];
}

// ---- the config file ----

const CONFIG_KEYS = new Set([
  "root",
  "host",
  "port",
  "streams",
  "stdin",
  "upstreams",
  "handler",
  "maxBacklog",
  "maxReplay",
  "segmentBytes",
  "sealEvery",
  "fsync",
  "pingInterval",
  "archive",
  "replayArchive",
  "s3Endpoint",
  "s3PathStyle",
  "maxConnections",
  "maxSubscribers",
  "maxUrlBytes",
  "maxRowBytes",
  "maxReplayReaders",
  "stallTimeout",
  "tokens",
  "tlsCert",
  "tlsKey",
  "logLevel",
  "logFormat",
]);

/** Checks a `--log-level` value. */
function logLevel(v: unknown, what: string): LogLevel {
  if (!isLogLevel(v)) {
    throw new RangeError(`${what} must be error, warn, info or debug, got ${JSON.stringify(v)}`);
  }
  return v;
}

/** Checks a `--log-format` value. */
function logFormat(v: unknown, what: string): LogFormat {
  if (!isLogFormat(v)) {
    throw new RangeError(`${what} must be text or json, got ${JSON.stringify(v)}`);
  }
  return v;
}

/** A stall timeout: seconds > 0. */
function stallSeconds(v: unknown, what: string): number {
  const n = seconds(v, what);
  if (n <= 0) {
    throw new RangeError(`${what} must be a number of seconds > 0, got ${JSON.stringify(v)}`);
  }
  return n;
}

function s3Uri(v: string, where: string): string {
  if (!/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/.test(v)) {
    throw new TypeError(`${where} must be s3://bucket/prefix, got ${JSON.stringify(v)}`);
  }
  return v;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(v: unknown, key: string): string {
  if (typeof v !== "string" || v === "") {
    throw new TypeError(`"${key}" must be a non-empty string, got ${JSON.stringify(v)}`);
  }
  return v;
}

/** Reads and checks a config file; relative paths in it resolve against its folder. */
async function readConfig(path: string): Promise<FileSettings> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new Fatal(`cannot read config file ${path}: ${fileError(err)}`, 2);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Fatal(`config file ${path} is not JSON: ${oneLine(err)}`, 2);
  }
  try {
    return configSettings(json, dirname(resolve(path)));
  } catch (err) {
    throw new Fatal(`config file ${path}: ${oneLine(err)}`, 2);
  }
}

function configSettings(json: unknown, base: string): FileSettings {
  if (!isObject(json)) throw new TypeError("the top level must be a JSON object");
  for (const key of Object.keys(json)) {
    if (!CONFIG_KEYS.has(key)) throw new TypeError(`unknown key "${key}"`);
  }
  const out: FileSettings = { streams: new Map(), upstreams: new Map() };
  if (json.root !== undefined) out.root = resolve(base, str(json.root, "root"));
  if (json.host !== undefined) out.host = str(json.host, "host");
  if (json.port !== undefined) out.port = integer(json.port, '"port"', 0, 65535);
  if (json.maxBacklog !== undefined) out.maxBacklog = integer(json.maxBacklog, '"maxBacklog"', 1);
  if (json.maxReplay !== undefined) out.maxReplay = maxReplay(json.maxReplay, '"maxReplay"');
  if (json.segmentBytes !== undefined) {
    out.segmentBytes = integer(json.segmentBytes, '"segmentBytes"', 1);
  }
  if (json.sealEvery !== undefined) out.sealEveryS = seconds(json.sealEvery, '"sealEvery"');
  if (json.pingInterval !== undefined) {
    out.pingIntervalS = seconds(json.pingInterval, '"pingInterval"');
  }
  if (json.maxConnections !== undefined) {
    out.maxConnections = integer(json.maxConnections, '"maxConnections"', 1);
  }
  if (json.maxSubscribers !== undefined) {
    out.maxSubscribers = integer(json.maxSubscribers, '"maxSubscribers"', 1);
  }
  if (json.maxUrlBytes !== undefined) {
    out.maxUrlBytes = integer(json.maxUrlBytes, '"maxUrlBytes"', 64);
  }
  if (json.maxRowBytes !== undefined) {
    out.maxRowBytes = integer(json.maxRowBytes, '"maxRowBytes"', 1, MAX_ROW_BYTES_CAP);
  }
  if (json.maxReplayReaders !== undefined) {
    out.maxReplayReaders = integer(json.maxReplayReaders, '"maxReplayReaders"', 1);
  }
  if (json.stallTimeout !== undefined) {
    out.stallTimeoutS = stallSeconds(json.stallTimeout, '"stallTimeout"');
  }
  if (json.tokens !== undefined) out.tokens = resolve(base, str(json.tokens, "tokens"));
  if (json.tlsCert !== undefined) out.tlsCert = resolve(base, str(json.tlsCert, "tlsCert"));
  if (json.tlsKey !== undefined) out.tlsKey = resolve(base, str(json.tlsKey, "tlsKey"));
  if (json.logLevel !== undefined) out.logLevel = logLevel(json.logLevel, '"logLevel"');
  if (json.logFormat !== undefined) out.logFormat = logFormat(json.logFormat, '"logFormat"');
  if (json.archive !== undefined) out.archive = s3Uri(str(json.archive, "archive"), '"archive"');
  if (json.s3Endpoint !== undefined) out.s3Endpoint = str(json.s3Endpoint, "s3Endpoint");
  for (const key of ["replayArchive", "s3PathStyle"] as const) {
    if (json[key] !== undefined && typeof json[key] !== "boolean") {
      throw new TypeError(`"${key}" must be true or false, got ${JSON.stringify(json[key])}`);
    }
  }
  if (json.replayArchive !== undefined) out.replayArchive = json.replayArchive as boolean;
  if (json.s3PathStyle !== undefined) out.s3PathStyle = json.s3PathStyle as boolean;
  if (json.fsync !== undefined) {
    if (typeof json.fsync !== "boolean") {
      throw new TypeError(`"fsync" must be true or false, got ${JSON.stringify(json.fsync)}`);
    }
    out.fsync = json.fsync;
  }
  if (json.stdin !== undefined) {
    if (typeof json.stdin !== "string") {
      throw new TypeError(`"stdin" must be a stream name, got ${JSON.stringify(json.stdin)}`);
    }
    out.stdin = streamName(json.stdin, '"stdin"');
  }
  if (json.handler !== undefined) out.handler = resolve(base, str(json.handler, "handler"));
  if (json.streams !== undefined) {
    if (!isObject(json.streams)) {
      throw new TypeError(`"streams" must be an object of streams by name`);
    }
    for (const [name, decl] of Object.entries(json.streams)) {
      const key = `streams.${name}`;
      streamName(name, `"streams"`);
      if (!isObject(decl)) {
        throw new TypeError(`"${key}" must be an object like {"schema": "x.json"}`);
      }
      for (const k of Object.keys(decl)) {
        if (k !== "schema" && k !== "ephemeral") throw new TypeError(`unknown key "${key}.${k}"`);
      }
      let schema: SchemaSource;
      if (typeof decl.schema === "string" && decl.schema !== "") {
        schema = { path: resolve(base, decl.schema) };
      } else if (isObject(decl.schema)) {
        schema = { inline: decl.schema, where: `"${key}.schema"` };
      } else {
        throw new TypeError(`"${key}.schema" must be a file path or an inline JSON Schema object`);
      }
      if (decl.ephemeral !== undefined && typeof decl.ephemeral !== "boolean") {
        throw new TypeError(`"${key}.ephemeral" must be true or false`);
      }
      out.streams.set(name, { schema, ephemeral: decl.ephemeral === true });
    }
  }
  if (json.upstreams !== undefined) {
    if (!isObject(json.upstreams)) {
      throw new TypeError(`"upstreams" must be an object of URLs by stream name`);
    }
    for (const [name, decl] of Object.entries(json.upstreams)) {
      const key = `upstreams.${name}`;
      streamName(name, `"upstreams"`);
      if (typeof decl === "string") {
        out.upstreams.set(name, { url: upstreamUrl(decl, `"${key}"`), handler: null });
        continue;
      }
      if (!isObject(decl)) {
        throw new TypeError(`"${key}" must be a URL or {"url": …, "handler": …}`);
      }
      for (const k of Object.keys(decl)) {
        if (k !== "url" && k !== "handler") throw new TypeError(`unknown key "${key}.${k}"`);
      }
      out.upstreams.set(name, {
        url: upstreamUrl(str(decl.url, `${key}.url`), `"${key}.url"`),
        handler: decl.handler === undefined
          ? null
          : resolve(base, str(decl.handler, `${key}.handler`)),
      });
    }
  }
  return out;
}

// ---- flags, merged over the config ----

async function settingsFrom(values: Record<string, unknown>): Promise<Settings> {
  const list = (key: string) => (values[key] as string[] | undefined) ?? [];
  const flag = (key: string) => values[key] as string | undefined;
  const file: FileSettings = flag("config") !== undefined
    ? await readConfig(flag("config")!)
    : { streams: new Map(), upstreams: new Map() };
  try {
    const s = mergeFlags(file, flag, list, values["no-fsync"] === true);
    const uri = flag("archive") !== undefined ? s3Uri(flag("archive")!, "--archive") : file.archive;
    const endpoint = flag("s3-endpoint") ?? file.s3Endpoint;
    const pathStyle = values["s3-path-style"] === true || file.s3PathStyle === true;
    s.replayArchive = values["replay-archive"] === true || file.replayArchive === true;
    if (uri) s.archive = { uri, endpoint, forcePathStyle: pathStyle };
    else if (s.replayArchive || endpoint || pathStyle) {
      throw new RangeError("--replay-archive, --s3-endpoint and --s3-path-style need --archive");
    }
    return s;
  } catch (err) {
    if (err instanceof RangeError || err instanceof TypeError) throw new UsageError(err.message);
    throw err;
  }
}

function mergeFlags(
  file: FileSettings,
  flag: (key: string) => string | undefined,
  list: (key: string) => string[],
  noFsync: boolean,
): Settings {
  const s: Settings = {
    root: flag("root") ?? file.root ?? "./data",
    host: flag("host") ?? file.host ?? "127.0.0.1",
    port: flag("port") !== undefined
      ? integer(flag("port"), "--port", 0, 65535)
      : file.port ?? 8765,
    streams: new Map(file.streams),
    stdin: flag("stdin") !== undefined ? streamName(flag("stdin")!, "--stdin") : file.stdin ?? null,
    upstreams: new Map(file.upstreams),
    handler: file.handler ?? null,
    maxBacklog: flag("max-backlog") !== undefined
      ? integer(flag("max-backlog"), "--max-backlog", 1)
      : file.maxBacklog,
    maxReplay: flag("max-replay") !== undefined
      ? maxReplay(flag("max-replay"), "--max-replay")
      : file.maxReplay,
    segmentBytes: flag("segment-bytes") !== undefined
      ? integer(flag("segment-bytes"), "--segment-bytes", 1)
      : file.segmentBytes,
    sealEveryS: flag("seal-every") !== undefined
      ? seconds(flag("seal-every"), "--seal-every")
      : file.sealEveryS,
    fsync: noFsync ? false : file.fsync ?? true,
    pingIntervalS: flag("ping-interval") !== undefined
      ? seconds(flag("ping-interval"), "--ping-interval")
      : file.pingIntervalS,
    archive: null,
    replayArchive: false,
    maxConnections: flag("max-connections") !== undefined
      ? integer(flag("max-connections"), "--max-connections", 1)
      : file.maxConnections,
    maxSubscribers: flag("max-subscribers") !== undefined
      ? integer(flag("max-subscribers"), "--max-subscribers", 1)
      : file.maxSubscribers,
    maxUrlBytes: flag("max-url-bytes") !== undefined
      ? integer(flag("max-url-bytes"), "--max-url-bytes", 64)
      : file.maxUrlBytes,
    maxRowBytes: flag("max-row-bytes") !== undefined
      ? integer(flag("max-row-bytes"), "--max-row-bytes", 1, MAX_ROW_BYTES_CAP)
      : file.maxRowBytes,
    maxReplayReaders: flag("max-replay-readers") !== undefined
      ? integer(flag("max-replay-readers"), "--max-replay-readers", 1)
      : file.maxReplayReaders,
    stallTimeoutS: flag("stall-timeout") !== undefined
      ? stallSeconds(flag("stall-timeout"), "--stall-timeout")
      : file.stallTimeoutS,
    tokens: flag("tokens") ?? file.tokens ?? null,
    tlsCert: flag("tls-cert") ?? file.tlsCert ?? null,
    tlsKey: flag("tls-key") ?? file.tlsKey ?? null,
    logLevel: flag("log-level") !== undefined
      ? logLevel(flag("log-level"), "--log-level")
      : file.logLevel ?? "info",
    logFormat: flag("log-format") !== undefined
      ? logFormat(flag("log-format"), "--log-format")
      : file.logFormat ?? "text",
  };
  if ((s.tlsCert === null) !== (s.tlsKey === null)) {
    throw new RangeError("--tls-cert and --tls-key go together: give both or neither");
  }
  if (s.host === "") throw new RangeError("--host must not be empty");
  const declared = new Set<string>();
  for (const spec of list("stream")) {
    const kv = split(spec);
    if (!kv || kv[1] === "") {
      throw new RangeError(`--stream wants NAME=SCHEMA.json, got ${JSON.stringify(spec)}`);
    }
    const name = streamName(kv[0], "--stream");
    if (declared.has(name)) throw new RangeError(`--stream declares ${show(name)} twice`);
    declared.add(name);
    // A flag replaces the config's declaration, ephemeral included.
    s.streams.set(name, { schema: { path: kv[1] }, ephemeral: false });
  }
  if (s.streams.size === 0) {
    throw new RangeError(
      `no stream declared: give --stream NAME=SCHEMA.json (or "streams" in --config)`,
    );
  }
  const undeclared = (name: string, what: string) => {
    if (!s.streams.has(name)) {
      const known = [...s.streams.keys()].map((n) => JSON.stringify(n)).join(", ");
      throw new RangeError(
        `${what} names ${show(name)}, which is not declared (declared: ${known})`,
      );
    }
  };
  for (const name of list("ephemeral")) {
    streamName(name, "--ephemeral");
    undeclared(name, "--ephemeral");
    s.streams.get(name)!.ephemeral = true;
  }
  if (s.stdin !== null) undeclared(s.stdin, flag("stdin") !== undefined ? "--stdin" : '"stdin"');
  for (const spec of list("upstream")) {
    const kv = split(spec);
    if (!kv || !isStreamName(kv[0]) || kv[1] === "") {
      throw new RangeError(`--upstream wants NAME=URL, got ${JSON.stringify(spec)}`);
    }
    const old = s.upstreams.get(kv[0]);
    s.upstreams.set(kv[0], {
      url: upstreamUrl(kv[1], "--upstream"),
      handler: old?.handler ?? null,
    });
  }
  for (const name of s.upstreams.keys()) undeclared(name, `the upstream of ${show(name)}`);
  let defaultHandlers = 0;
  for (const spec of list("handler")) {
    const kv = split(spec);
    // NAME=MODULE names a stream; a module path or URL never looks like a stream name.
    if (kv && isStreamName(kv[0]) && kv[1] !== "") {
      const up = s.upstreams.get(kv[0]);
      if (!up) throw new RangeError(`--handler ${spec}: ${show(kv[0])} has no upstream`);
      up.handler = kv[1];
    } else {
      if (++defaultHandlers > 1) {
        throw new RangeError(`--handler MODULE is given twice (use NAME=MODULE for one stream)`);
      }
      s.handler = spec;
    }
  }
  if (s.handler !== null && s.upstreams.size === 0) {
    throw new RangeError(`a handler is given but no --upstream: handlers apply to upstream frames`);
  }
  return s;
}

// ---- starting ----

async function loadSchema(name: string, src: SchemaSource): Promise<Record<string, unknown>> {
  let json: unknown;
  let where: string;
  if ("path" in src) {
    where = `schema file ${src.path}`;
    let text: string;
    try {
      text = await Deno.readTextFile(src.path);
    } catch (err) {
      throw new Fatal(`${show(name)}: cannot read schema file ${src.path}: ${fileError(err)}`, 2);
    }
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new Fatal(`${show(name)}: schema file ${src.path} is not JSON: ${oneLine(err)}`, 2);
    }
  } else {
    where = src.where;
    json = src.inline;
  }
  try {
    // Compiled here too, so that a bad schema stops the start before any log is opened.
    compileSchema(json);
  } catch (err) {
    if (!(err instanceof SchemaError)) throw err;
    throw new Fatal(`${show(name)}: ${where} is refused: ${oneLine(err)}`, 2);
  }
  return json as Record<string, unknown>;
}

async function handlerFor(path: string, loaded: Map<string, FrameHandler>): Promise<FrameHandler> {
  const known = loaded.get(path);
  if (known) return known;
  try {
    const handler = await loadHandler(path);
    loaded.set(path, handler);
    return handler;
  } catch (err) {
    throw new Fatal(oneLine(err), 2);
  }
}

async function openStreams(
  s: Settings,
  schemas: Map<string, Record<string, unknown>>,
): Promise<Stream[]> {
  const logOptions: LogOptions = { fsync: s.fsync };
  if (s.segmentBytes !== undefined) logOptions.segmentBytes = s.segmentBytes;
  if (s.maxRowBytes !== undefined) logOptions.maxPayloadBytes = s.maxRowBytes;
  if (s.sealEveryS !== undefined) logOptions.sealEveryMs = Math.round(s.sealEveryS * 1000);
  const opened: Stream[] = [];
  try {
    for (const [name, decl] of s.streams) {
      try {
        opened.push(
          await Stream.open(name, {
            schema: schemas.get(name)!,
            root: decl.ephemeral ? undefined : s.root,
            logOptions,
            ...(s.archive && !decl.ephemeral
              ? { archive: s.archive, replayArchive: s.replayArchive }
              : {}),
            ...(s.maxBacklog !== undefined ? { maxBacklog: s.maxBacklog } : {}),
            ...(s.maxReplay !== undefined ? { maxReplay: s.maxReplay } : {}),
            ...(s.maxSubscribers !== undefined ? { maxSubscribers: s.maxSubscribers } : {}),
            ...(s.stallTimeoutS !== undefined
              ? { stallTimeoutMs: Math.round(s.stallTimeoutS * 1000) }
              : {}),
          }),
        );
      } catch (err) {
        if (err instanceof LogLockedError || err instanceof LogCorruptError) {
          throw new Fatal(`${show(name)}: ${oneLine(err)}`, 1);
        }
        if (err instanceof RangeError) throw new Fatal(`${show(name)}: ${oneLine(err)}`, 2);
        throw new Fatal(`${show(name)}: cannot open its log under ${s.root}: ${oneLine(err)}`, 1);
      }
    }
  } catch (err) {
    await Promise.allSettled(opened.map((st) => st.close()));
    throw err;
  }
  return opened;
}

/**
 * A reject sink appending to `path`, opened at the first reject so that a
 * clean feed leaves no empty file behind.
 */
function lazyRejects(path: string): RejectSink & { close(): Promise<void> } {
  let file: Promise<RejectFile> | undefined;
  const sink = (rec: RejectRecord): Promise<void> =>
    (file ??= rejectFile(path)).then((f) => f(rec));
  const close = async (): Promise<void> => {
    // A file that failed to open has failed its ingest, which said so.
    const opened = await file?.catch(() => undefined);
    await opened?.close();
  };
  return Object.assign(sink, { close });
}

interface Running {
  server: Server;
  streams: Stream[];
  /** Stops every ingest; resolves once each has settled what it sent. */
  stopIngest(): Promise<void>;
  /** Resolves with a message when an ingest fails for a reason other than a bad row. */
  failed: Promise<string>;
  /** The first ingest failure, or null. */
  failure(): string | null;
  closeRejects(): Promise<void>;
}

/** A reject line of the ingest's own messages (`stdin line 3 for stream …`). */
const REJECT_LINE = /^streamcast: (?:stdin line|upstream \S+ frame) \d+ for /;

function startIngest(
  s: Settings,
  server: Server,
  handlers: Map<string, FrameHandler>,
  logger: Logger,
): Omit<Running, "server" | "streams"> {
  const stop = new AbortController();
  const tasks: Promise<void>[] = [];
  let first: string | null = null;
  let resolveFailed!: (message: string) => void;
  const failed = new Promise<string>((resolve) => (resolveFailed = resolve));
  const fail = (message: string) => {
    first ??= message;
    resolveFailed(first);
  };
  const rejects = server.metrics.counter(
    "streamcast_ingest_rejects_total",
    "Input lines and upstream frames rejected (not JSON, too big, refused by the schema or " +
      "the handler).",
  );
  const files = new Map<string, ReturnType<typeof lazyRejects>>();
  const onReject = (name: string, source: "stdin" | "upstream"): RejectSink => {
    const labels = { stream: name, source };
    rejects.inc(labels, 0);
    let file = files.get(name);
    if (!file) {
      file = lazyRejects(join(s.root, name === "" ? "_" : name, "rejects.ndjson"));
      files.set(name, file);
    }
    const f = file;
    return (rec) => {
      rejects.inc(labels);
      // In text format the ingest's own line (see `log` below) is the event.
      if (logger.format === "json") {
        logger.warn("ingest_reject", {
          stream: name,
          source,
          line: rec.line,
          error: rec.error,
          // The raw input only at debug: it may be anything, of any size.
          input: logger.enabled("debug") ? rec.input : undefined,
        });
      } else if (logger.enabled("debug")) {
        logger.debug("ingest_reject_input", {
          stream: name,
          source,
          line: rec.line,
          input: rec.input,
        });
      }
      return f(rec);
    };
  };
  const watch = (what: string, task: Promise<unknown>) => {
    tasks.push(task.then(
      () => {},
      (err) => fail(`${what} failed: ${oneLine(err)}`),
    ));
  };
  const log = (message: string) => {
    if (!REJECT_LINE.test(message)) logger.info("ingest", {}, message);
    else if (logger.format === "text") logger.warn("ingest_reject", {}, message);
    // In json format the reject sink above logs it, with its fields.
  };
  if (s.stdin !== null) {
    const stream = server.streams.get(s.stdin)!;
    watch(
      `ingest from stdin into ${show(s.stdin)}`,
      ingestLines(Deno.stdin.readable, stream, {
        // A line longer than any row could be is refused before it is parsed.
        maxLineBytes: Math.max(MAX_LINE_BYTES, s.maxRowBytes ?? 0),
        onReject: onReject(s.stdin, "stdin"),
        signal: stop.signal,
        log,
      }),
    );
  }
  for (const [name, up] of s.upstreams) {
    const handlerPath = up.handler ?? s.handler;
    watch(
      `ingest from the upstream of ${show(name)}`,
      ingestUpstream(up.url, server.streams.get(name)!, {
        handler: handlerPath === null ? undefined : handlers.get(handlerPath),
        onReject: onReject(name, "upstream"),
        signal: stop.signal,
        log,
      }),
    );
  }
  return {
    async stopIngest() {
      stop.abort();
      await Promise.all(tasks);
    },
    failed,
    failure: () => first,
    async closeRejects() {
      await Promise.all([...files.values()].map((f) => f.close()));
    },
  };
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

async function start(s: Settings, logger: Logger): Promise<Running> {
  // Everything that can be checked without side effects first: schemas,
  // handlers, tokens, the certificate.
  const schemas = new Map<string, Record<string, unknown>>();
  for (const [name, decl] of s.streams) schemas.set(name, await loadSchema(name, decl.schema));
  const handlers = new Map<string, FrameHandler>();
  for (const up of s.upstreams.values()) {
    const path = up.handler ?? s.handler;
    if (path !== null) await handlerFor(path, handlers);
  }
  const tokens = s.tokens === null ? null : await loadTokens(s.tokens);
  const tls = await loadTls(s);
  // Probe the port first, so that a busy one is reported before any log is
  // created; serve() below still handles losing a race for it.
  if (s.port !== 0) {
    try {
      Deno.listen({ hostname: s.host, port: s.port }).close();
    } catch (err) {
      throw listenError(s, err);
    }
  }
  const streams = await openStreams(s, schemas);
  let server: Server;
  try {
    server = serve(streams, {
      hostname: s.host,
      port: s.port,
      ...(s.pingIntervalS !== undefined ? { pingIntervalS: s.pingIntervalS } : {}),
      ...(s.maxConnections !== undefined ? { maxConnections: s.maxConnections } : {}),
      ...(s.maxUrlBytes !== undefined ? { maxUrlBytes: s.maxUrlBytes } : {}),
      ...(s.maxReplayReaders !== undefined ? { maxReplayReaders: s.maxReplayReaders } : {}),
      ...(tls ? { tls } : {}),
      tokens,
      logger,
    });
  } catch (err) {
    await Promise.allSettled(streams.map((st) => st.close()));
    throw listenError(s, err);
  }
  return { server, streams, ...startIngest(s, server, handlers, logger) };
}

/**
 * Reloads the tokens file on SIGHUP (not on Windows, which has no SIGHUP).
 * Listening starts at once, so that a SIGHUP during the start is not the
 * default exit; one received before `attach(server)` reloads then. Reloads
 * run one at a time, in signal order. A file that cannot be read or checked
 * keeps the tokens in force and logs why; it never stops the server.
 */
function tokensReloader(
  path: string,
  logger: () => Logger,
): { attach(server: Server): void; remove(): Promise<void> } {
  let server: Server | null = null;
  let pending = false;
  let chain = Promise.resolve();
  const reload = () => {
    chain = chain.then(async () => {
      const log = logger();
      try {
        const table = await TokenTable.load(path);
        server!.setTokens(table);
        log.info(
          "tokens_reloaded",
          { file: path, tokens: table.size },
          `streamcast serve: reloaded ${path}: ${table.size} token${table.size === 1 ? "" : "s"}`,
        );
      } catch (err) {
        // TokenTable.load's own errors name the file and never quote a token.
        const why = err instanceof TypeError
          ? err.message
          : `cannot read tokens file ${path}: ${fileError(err)}`;
        log.error(
          "tokens_reload_failed",
          { file: path, error: why },
          `streamcast serve: SIGHUP: ${why}; the tokens loaded before stay in force`,
        );
      }
    });
  };
  const listener = () => {
    if (server === null) pending = true;
    else reload();
  };
  const listening = Deno.build.os !== "windows";
  if (listening) Deno.addSignalListener("SIGHUP", listener);
  return {
    attach(s) {
      server = s;
      if (pending) reload();
    },
    async remove() {
      if (listening) Deno.removeSignalListener("SIGHUP", listener);
      await chain;
    },
  };
}

/** Resolves with the name of the first of `signals` received; `remove()` stops listening. */
function onSignals(
  signals: Deno.Signal[],
  logger: () => Logger,
): { received: Promise<Deno.Signal>; remove(): void } {
  let resolve!: (sig: Deno.Signal) => void;
  const received = new Promise<Deno.Signal>((r) => (resolve = r));
  let count = 0;
  const listeners = signals.map((sig) => {
    const listener = () => {
      if (++count === 1) {
        // Printed here, not after an await: a second signal may follow at once.
        logger().info(
          "shutdown",
          { signal: sig },
          `streamcast serve: ${sig} received; shutting down`,
        );
        return resolve(sig);
      }
      // A second signal is the way out of a shutdown that hangs (a stuck disk).
      logger().warn(
        "exit",
        { signal: sig, code: 1 },
        `streamcast serve: ${sig} again; exiting without waiting`,
      );
      Deno.exit(1);
    };
    Deno.addSignalListener(sig, listener);
    return [sig, listener] as const;
  });
  return {
    received,
    remove() {
      for (const [sig, listener] of listeners) Deno.removeSignalListener(sig, listener);
    },
  };
}

/** Runs `serve` with its arguments; resolves with the exit code. */
export async function cmdServe(args: string[]): Promise<number> {
  let values: Record<string, unknown>;
  try {
    values = parse(args, FLAGS, 0).values;
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    // node:util's messages run on with advice over several lines; keep the first sentence.
    const first = err.message.split("\n")[0].replace(/\. To specify .*$/, "");
    console.error(`streamcast serve: ${first} (see --help)`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
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
      logger = new Logger({ level: settings.logLevel, format: settings.logFormat });
      if (settings.tokens !== null) reloader = tokensReloader(settings.tokens, () => logger);
      running = await start(settings, logger);
      reloader?.attach(running.server);
    } catch (err) {
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
      const late = running.failure();
      if (failure === null && late !== null) {
        // An ingest that failed while stopping (e.g. its last rows could not be written).
        logger.error("ingest_failed", { error: late }, `streamcast serve: ${late}`);
        code = 1;
      }
      await running.server.shutdown();
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
