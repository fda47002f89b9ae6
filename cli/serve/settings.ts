/**
 * The settings of `cli.ts serve`, in one table: each setting's flag, config
 * key, how its value is read, its default, its line(s) in `--help` and its
 * meaning in docs/CLI.md. The usage text ({@linkcode SERVE_USAGE}), the
 * `parseArgs` options ({@linkcode SERVE_FLAGS}) and the config file's keys
 * ({@linkcode CONFIG_KEYS}) are all made from it.
 *
 * @module
 */

import { FOLLOW_SETTINGS } from "./follow_settings.ts";
import { CLUSTER_SETTINGS } from "./cluster_settings.ts";
import { DEFAULT_SEAL_EVERY_MS, DEFAULT_SEGMENT_BYTES } from "../../log/mod.ts";
import { DEFAULT_S3_TIMEOUT_MS } from "../../common/s3.ts";
import { S3_TIMEOUT_MAX_S } from "../_s3_flags.ts";
import {
  DEFAULT_MAX_BACKLOG,
  DEFAULT_MAX_REPLAY,
  DEFAULT_STALL_TIMEOUT_MS,
} from "../../server/stream/stream_options.ts";
import { DEFAULT_HOST, DEFAULT_PING_INTERVAL_S, DEFAULT_PORT } from "../../server/serve_options.ts";
import { DEFAULT_MALLOC_TRIM_EVERY_S } from "../../server/allocator.ts";
import {
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_REPLAY_READERS,
  DEFAULT_MAX_ROW_BYTES,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_SUBSCRIBERS,
  DEFAULT_MAX_URL_BYTES,
} from "../../server/limits.ts";
import {
  bool,
  integer,
  LIMITS_GROUP,
  logFormat,
  logLevel,
  maxReplay,
  nonEmpty,
  path,
  type Reader,
  s3Uri,
  seconds,
  stallSeconds,
  streamName,
  text,
} from "./values.ts";
import { PUBLISH_LIMIT_SETTINGS, PUBLISH_STREAM_SETTINGS } from "./publish_settings.ts";
import { SEND_SETTINGS } from "./send_settings.ts";
import { JWT_SETTINGS } from "./jwt_settings.ts";
import { ICEBERG_LIMIT_SETTINGS, ICEBERG_STREAM_SETTINGS } from "./iceberg_settings.ts";
import { KEY_LIMIT_SETTINGS, KEY_STREAM_SETTINGS } from "./key_settings.ts";
import { DISK_LIMIT_SETTINGS, RETENTION_SETTINGS } from "./disk_settings.ts";

/** The largest `--max-row-bytes`: a record's length field is 32 bits (the log checks it too). */
const MAX_ROW_BYTES_CAP = 0xffff_ffff - 64;

// ---- the table ----

/**
 * One setting of `serve`.
 */
export interface Setting {
  /** The flag, without `--`. */
  flag: string;
  /** The config file's key, if the config can set it. */
  key?: string;
  /** The flag's type for `parseArgs`. */
  type: "string" | "boolean";
  /** The flag may be repeated. */
  multiple?: boolean;
  /**
   * How a value is read, from the config and (unless `multiple`) from the
   * flag. Absent: the setting has its own rules (streams, upstreams).
   */
  read?: Reader;
  /** A flag's value, when it is not `read` of the flag's string (`--no-fsync`: false). */
  flagValue?: unknown;
  /** The value when neither the flag nor the config gives one. */
  default?: unknown;
  /** The usage text's group. */
  group: string;
  /**
   * The usage lines: each `[left column, help text]`; the left column
   * defaults to `--flag`. `{default}` in the text shows the default.
   */
  usage: [string, string][];
  /** Its meaning, as docs/CLI.md's flags table says it. */
  docs: string;
}

/**
 * Every setting of `serve`, in the order of `--help`.
 */
export const SETTINGS: readonly Setting[] = [
  {
    flag: "stream",
    key: "streams",
    type: "string",
    multiple: true,
    group: "streams",
    usage: [
      ["--stream NAME=SCHEMA.json", "declare a stream with its JSON Schema (repeatable;"],
      ["", '"=SCHEMA.json" declares the unnamed stream, served at /)'],
    ],
    docs: "declares a stream and its JSON Schema. Repeatable. `=SCHEMA.json` (empty name) " +
      "declares the unnamed stream, served at `/`. Names: 1–64 of `A-Z a-z 0-9 . _ -`, not " +
      "starting with `_` or `.`. With none declared (and none followed) the server starts " +
      "empty and serves the streams created at runtime (`PUT /_/streams/NAME`).",
  },
  {
    flag: "ephemeral",
    type: "string",
    multiple: true,
    group: "streams",
    usage: [
      ["--ephemeral NAME", "that stream keeps no log: offsets are null, no replay"],
      ["", "(repeatable)"],
    ],
    docs: "that declared stream keeps no log: offsets are `null`, nothing replays. Repeatable " +
      '(`--ephemeral ""` for the unnamed stream).',
  },
  ...PUBLISH_STREAM_SETTINGS,
  ...ICEBERG_STREAM_SETTINGS,
  ...KEY_STREAM_SETTINGS,
  {
    flag: "stdin",
    key: "stdin",
    type: "string",
    read: (v, what) => {
      if (typeof v !== "string") {
        throw new TypeError(`${what} must be a stream name, got ${JSON.stringify(v)}`);
      }
      return streamName(v, what);
    },
    default: null,
    group: "feeds",
    usage: [["--stdin NAME", "each stdin line is a JSON row for stream NAME"]],
    docs: "each stdin line is a JSON row for stream NAME.",
  },
  {
    flag: "upstream",
    key: "upstreams",
    type: "string",
    multiple: true,
    group: "feeds",
    usage: [
      ["--upstream NAME=URL", "each text frame of the WebSocket at URL is a row for"],
      ["", "stream NAME; reconnects with backoff (repeatable)"],
    ],
    docs: "each text frame of the WebSocket at URL (`ws`, `wss`, `http`, `https`) is a row for " +
      "stream NAME; reconnects with capped exponential backoff. Repeatable, one per stream.",
  },
  {
    flag: "handler",
    key: "handler",
    type: "string",
    multiple: true,
    read: path,
    default: null,
    group: "feeds",
    usage: [
      ["--handler MODULE.ts", "its default export turns a frame into a row, an array"],
      ["", "of rows, or null (skip); applies to every upstream"],
      ["--handler NAME=MODULE.ts", "the handler for the upstream of stream NAME only"],
    ],
    docs: "the module's default export turns each upstream frame into a row, an array of rows " +
      "(stored in order), or `null` (skip); it applies to every upstream.",
  },
  {
    flag: "root",
    key: "root",
    type: "string",
    read: path,
    default: "./data",
    group: "where and how",
    usage: [
      ["--root DIR", "the logs live in DIR/NAME (DIR/_ for the unnamed"],
      ["", "stream), with rejects.ndjson beside them [{default}]"],
    ],
    docs: "the log of stream NAME is `DIR/NAME` (`DIR/_` for the unnamed stream); rejected " +
      "input goes to `rejects.ndjson` beside it.",
  },
  {
    flag: "host",
    key: "host",
    type: "string",
    read: text,
    default: DEFAULT_HOST,
    group: "where and how",
    usage: [["--host HOST", "address to listen on [{default}]"]],
    docs: "address to listen on.",
  },
  {
    flag: "port",
    key: "port",
    type: "string",
    read: integer(0, 65535),
    default: DEFAULT_PORT,
    group: "where and how",
    usage: [["--port PORT", "port to listen on (0: any free port) [{default}]"]],
    docs: "port to listen on; `0` picks a free one (the `listening on` line says which).",
  },
  {
    flag: "max-backlog",
    key: "maxBacklog",
    type: "string",
    read: integer(1),
    group: "where and how",
    usage: [
      ["--max-backlog N", "frames queued per live subscriber before it catches"],
      ["", `up from the log [${DEFAULT_MAX_BACKLOG}]`],
    ],
    docs: "frames queued for a live subscriber before it goes back to catching up from the log " +
      "(dropped with 4429 on an ephemeral stream).",
  },
  {
    flag: "max-replay",
    key: "maxReplay",
    type: "string",
    read: maxReplay,
    group: "where and how",
    usage: [["--max-replay N|none", `most rows a subscribe may replay [${DEFAULT_MAX_REPLAY}]`]],
    docs: "most rows a subscribe may ask to replay; `none`: no bound.",
  },
  {
    flag: "segment-bytes",
    key: "segmentBytes",
    type: "string",
    read: integer(1),
    group: "where and how",
    usage: [[
      "--segment-bytes N",
      `roll the active segment at this size [${DEFAULT_SEGMENT_BYTES}]`,
    ]],
    docs: "roll the active segment at this size.",
  },
  {
    flag: "seal-every",
    key: "sealEvery",
    type: "string",
    read: seconds,
    group: "where and how",
    usage: [
      ["--seal-every SECONDS", "roll the active segment when its first row is this"],
      ["", `old (0: never) [${DEFAULT_SEAL_EVERY_MS / 1000}]`],
    ],
    docs: "roll the active segment once its first row is this old (`0`: never).",
  },
  ...RETENTION_SETTINGS,
  {
    flag: "no-fsync",
    key: "fsync",
    type: "boolean",
    read: bool,
    flagValue: false,
    default: true,
    group: "where and how",
    usage: [
      ["--no-fsync", "write to the OS before broadcast without syncing:"],
      ["", "survives a process crash, not a power loss"],
    ],
    docs: "write each commit to the OS before broadcast without syncing it: survives a crash " +
      "of the process, not a power loss. Refused with `--cluster` (a cluster counts a row as " +
      "held only once it is synced).",
  },
  {
    flag: "ping-interval",
    key: "pingInterval",
    type: "string",
    read: seconds,
    group: "where and how",
    usage: [[
      "--ping-interval SECONDS",
      `ping idle subscribers this often (0: never) [${DEFAULT_PING_INTERVAL_S}]`,
    ]],
    docs: "ping idle subscribers this often and drop those that do not answer (`0`: never).",
  },
  {
    flag: "malloc-trim-every",
    key: "mallocTrimEvery",
    type: "string",
    read: seconds,
    group: "where and how",
    usage: [
      ["--malloc-trim-every S", "give malloc's free memory back to the system"],
      ["", `this often (0: never) [${DEFAULT_MALLOC_TRIM_EVERY_S}]`],
    ],
    docs: "give the free memory glibc's malloc holds back to the system this often " +
      "(`malloc_trim`; Linux with glibc and the `ffi` permission; `0`: never).",
  },
  {
    flag: "config",
    type: "string",
    group: "where and how",
    usage: [["--config FILE.json", "the same settings as JSON (see docs/CLI.md); flags win"]],
    docs: "read the settings below from a file; flags given too win over it.",
  },
  {
    flag: "archive",
    key: "archive",
    type: "string",
    read: (v, what, base) => s3Uri(base === null ? v as string : nonEmpty(v, what), what),
    group: "where and how",
    usage: [
      ["--archive s3://BUCKET/PREFIX", "archive every durable stream's chunks and"],
      ["", "manifest there (credentials and region from the"],
      ["", "AWS SDK's chain: AWS_ACCESS_KEY_ID, ...)"],
    ],
    docs: "archive every durable stream's chunks and manifest there (credentials and region " +
      "from the AWS SDK's chain).",
  },
  {
    flag: "replay-archive",
    key: "replayArchive",
    type: "boolean",
    read: bool,
    default: false,
    group: "where and how",
    usage: [["--replay-archive", "serve offsets the local disk dropped from the archive"]],
    docs: "serve offsets the local disk dropped from the archive (needs `--archive`).",
  },
  {
    flag: "s3-endpoint",
    key: "s3Endpoint",
    type: "string",
    read: text,
    group: "where and how",
    usage: [["--s3-endpoint URL", "an S3-compatible store (or AWS_ENDPOINT_URL_S3)"]],
    docs: "an S3-compatible store (or `AWS_ENDPOINT_URL_S3`), path-style addressing " +
      "(need `--archive`).",
  },
  {
    flag: "s3-path-style",
    key: "s3PathStyle",
    type: "boolean",
    read: bool,
    default: false,
    group: "where and how",
    usage: [["--s3-path-style", "path-style addressing (most S3-compatible stores)"]],
    docs: "an S3-compatible store (or `AWS_ENDPOINT_URL_S3`), path-style addressing " +
      "(need `--archive`).",
  },
  {
    flag: "s3-timeout",
    key: "s3Timeout",
    type: "string",
    read: integer(1, S3_TIMEOUT_MAX_S),
    default: DEFAULT_S3_TIMEOUT_MS / 1000,
    group: "where and how",
    usage: [["--s3-timeout S", "an S3 request waiting this long fails, tried later [{default}]"]],
    docs: "an S3 request that waits this long to connect, or for its next byte, fails and is " +
      "tried again later (a store that stopped answering does not hold uploads, and the " +
      "retention that waits for them, for as long as TCP takes to give up); whole seconds " +
      "1–3600 (needs `--archive`).",
  },
  {
    flag: "max-connections",
    key: "maxConnections",
    type: "string",
    read: integer(1),
    group: LIMITS_GROUP,
    usage: [
      ["--max-connections N", "WebSocket connections at once; one more upgrade is"],
      ["", `answered HTTP 503 [${DEFAULT_MAX_CONNECTIONS}; fewer when the open-files`],
      ["", "limit leaves room for fewer, said at start]"],
    ],
    docs: "WebSocket connections open at once (fewer when the open-files limit leaves room for " +
      "fewer: see [Descriptors](#descriptors)); see [Limits](#limits).",
  },
  {
    flag: "max-streams",
    key: "maxStreams",
    type: "string",
    read: integer(1),
    group: LIMITS_GROUP,
    usage: [
      ["--max-streams N", "streams served at once, declared and created; one more"],
      ["", `PUT /_/streams/NAME is answered 409 [${DEFAULT_MAX_STREAMS}]`],
    ],
    docs: "streams served at once (declared and created while serving); see [Limits](#limits).",
  },
  {
    flag: "max-subscribers",
    key: "maxSubscribers",
    type: "string",
    read: integer(1),
    group: LIMITS_GROUP,
    usage: [
      ["--max-subscribers N", "subscribers per stream; one more is closed with 1013"],
      ["", `(try again later) [${DEFAULT_MAX_SUBSCRIBERS}]`],
    ],
    docs: "subscribers of one stream at once; see [Limits](#limits).",
  },
  {
    flag: "max-url-bytes",
    key: "maxUrlBytes",
    type: "string",
    read: integer(64),
    group: LIMITS_GROUP,
    usage: [
      [
        "--max-url-bytes N",
        `longest request URL; a longer one gets 414 [${DEFAULT_MAX_URL_BYTES}]`,
      ],
    ],
    docs: "longest request URL (≥ 64); see [Limits](#limits).",
  },
  {
    flag: "max-row-bytes",
    key: "maxRowBytes",
    type: "string",
    read: integer(1, MAX_ROW_BYTES_CAP),
    group: LIMITS_GROUP,
    usage: [
      ["--max-row-bytes N", "largest row as stored (its JSON); a bigger input row"],
      ["", `is a reject [${DEFAULT_MAX_ROW_BYTES}]`],
    ],
    docs: "largest row as stored (its JSON); see [Limits](#limits).",
  },
  {
    flag: "max-replay-readers",
    key: "maxReplayReaders",
    type: "string",
    read: integer(1),
    group: LIMITS_GROUP,
    usage: [
      ["--max-replay-readers N", "log reads for catching-up subscribers at once; more"],
      ["", `wait their turn [${DEFAULT_MAX_REPLAY_READERS}]`],
    ],
    docs: "log reads for catching-up subscribers at once; see [Limits](#limits).",
  },
  ...SEND_SETTINGS,
  {
    flag: "stall-timeout",
    key: "stallTimeout",
    type: "string",
    read: stallSeconds,
    group: LIMITS_GROUP,
    usage: [
      ["--stall-timeout SECONDS", "drop a subscriber whose socket accepts nothing for"],
      ["", `this long, with 4429 [${DEFAULT_STALL_TIMEOUT_MS / 1000}]`],
    ],
    docs: "drop with 4429 a subscriber whose socket accepts nothing for this long (> 0).",
  },
  ...PUBLISH_LIMIT_SETTINGS,
  ...ICEBERG_LIMIT_SETTINGS,
  ...KEY_LIMIT_SETTINGS,
  ...DISK_LIMIT_SETTINGS,
  {
    flag: "tokens",
    key: "tokens",
    type: "string",
    read: path,
    default: null,
    group: "access and transport",
    usage: [
      ["--tokens FILE.json", "bearer tokens granting read access per stream; without"],
      ["", "it anyone may read (format in docs/CLI.md); SIGHUP"],
      ["", "reloads it (a bad file keeps the tokens in force)"],
    ],
    docs: "bearer tokens granting read access per stream; SIGHUP reloads the file; see " +
      "[Access control](#access-control-tokens).",
  },
  ...JWT_SETTINGS,
  {
    flag: "tls-cert",
    key: "tlsCert",
    type: "string",
    read: path,
    default: null,
    group: "access and transport",
    usage: [["--tls-cert FILE.pem", "serve https:// and wss://: the certificate chain (PEM)"]],
    docs: "serve `https://` and `wss://` with this certificate chain and private key (PEM); " +
      "both or neither. See [TLS](#tls).",
  },
  {
    flag: "tls-key",
    key: "tlsKey",
    type: "string",
    read: path,
    default: null,
    group: "access and transport",
    usage: [["--tls-key FILE.pem", "and its private key (PEM)"]],
    docs: "serve `https://` and `wss://` with this certificate chain and private key (PEM); " +
      "both or neither. See [TLS](#tls).",
  },
  {
    flag: "log-level",
    key: "logLevel",
    type: "string",
    read: logLevel,
    default: "info",
    group: "logs",
    usage: [["--log-level LEVEL", "error, warn, info or debug [{default}]"]],
    docs: "`error`, `warn`, `info` or `debug`; see [Logs](#what-it-prints-logs-and-exit-codes).",
  },
  {
    flag: "log-format",
    key: "logFormat",
    type: "string",
    read: logFormat,
    default: "text",
    group: "logs",
    usage: [["--log-format FORMAT", "text, or json: one JSON object per line [{default}]"]],
    docs: "`text` or `json` (one JSON object per line); see " +
      "[Logs](#what-it-prints-logs-and-exit-codes).",
  },
  // Mirrors (--follow): their own file.
  ...FOLLOW_SETTINGS,
  // A cluster (--cluster): its own file.
  ...CLUSTER_SETTINGS,
];

// ---- what the table makes ----

function usageText(): string {
  const lines: string[] = [];
  let group = "";
  for (const s of SETTINGS) {
    if (s.group !== group) {
      group = s.group;
      lines.push(`${group}:`);
    }
    for (const [left, help] of s.usage) {
      const shown = help.replace("{default}", String(s.default));
      lines.push(`  ${left.padEnd(25)}  ${shown}`);
    }
  }
  return `usage: deno run -A cli.ts serve --stream NAME=SCHEMA.json ... [options]

Captures feeds into durable streams and serves them over WebSocket and HTTP.

${lines.join("\n")}

Prints "listening on http://HOST:PORT" on stderr once ready. SIGINT or SIGTERM
stops ingest, closes subscribers with 1001, flushes the logs and exits 0.`;
}

/**
 * `serve --help`.
 */
export const SERVE_USAGE: string = usageText();

/**
 * The `parseArgs` options of `serve` (`--help` is added by `parse`).
 */
export const SERVE_FLAGS: Record<string, { type: "string" | "boolean"; multiple?: boolean }> =
  Object.fromEntries(
    SETTINGS.map((s) => [s.flag, s.multiple ? { type: s.type, multiple: true } : { type: s.type }]),
  );

/**
 * The keys a config file may hold.
 */
export const CONFIG_KEYS: ReadonlySet<string> = new Set(
  SETTINGS.flatMap((s) => s.key === undefined ? [] : [s.key]),
);

/**
 * A setting whose config value is read by its `read`.
 */
export type ReadSetting = Setting & { key: string; read: Reader };

/**
 * The settings whose config values the table reads (not streams and upstreams).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { READ_SETTINGS } from "./settings.ts";
 * const port = READ_SETTINGS.find((s) => s.key === "port")!;
 * equal(port.read("9000", "--port", null), 9000);
 * ```
 */
export const READ_SETTINGS: readonly ReadSetting[] = SETTINGS.filter((s): s is ReadSetting =>
  s.key !== undefined && s.read !== undefined
);
