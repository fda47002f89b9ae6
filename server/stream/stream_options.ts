/**
 * The options of a {@linkcode Stream} (`Stream.open`, `Stream.ephemeral`,
 * `Stream.restore`), their defaults, and their checks at the call.
 *
 * @module
 */

import { isStreamName, STREAM_NAME_RULE } from "../../wire/stream_name.ts";
import type { ArchiveOptions, LogOptions } from "../../log/mod.ts";
import { DEFAULT_MAX_SUBSCRIBERS } from "../limits.ts";
import { checkKeys, OptionCheck, shown } from "../option_check.ts";
import { checkIcebergOptions, type IcebergOptions } from "../../iceberg/options.ts";
import { checkTableColumns } from "../../iceberg/schema.ts";
import { DEFAULT_MAX_KEYS } from "./key_index.ts";
import { DEFAULT_MIN_FREE_BYTES } from "./disk_gate.ts";

/** Default `maxBacklog`: frames queued for one live subscriber. */
export const DEFAULT_MAX_BACKLOG = 8192;
/** Default `maxReplay`: rows a subscribe may ask to replay. */
export const DEFAULT_MAX_REPLAY = 100_000;
/** Default `stallTimeoutMs`. */
export const DEFAULT_STALL_TIMEOUT_MS = 30_000;

/**
 * Options of {@linkcode Stream.open} and {@linkcode Stream.ephemeral}.
 */
export interface StreamOptions {
  /** The JSON Schema of the rows (see docs/SPEC.md for what is accepted). */
  schema: Record<string, unknown>;
  /**
   * Folder holding the logs: the stream's log is `ROOT/NAME` (`ROOT/_` for the
   * unnamed stream). Without `root` the stream is ephemeral.
   */
  root?: string;
  /** Options for the log opened under `root` (chunks are on unless `chunks: false`). */
  logOptions?: LogOptions;
  /** Frames queued for one live subscriber before it must catch up from the log. @default 8192 */
  maxBacklog?: number;
  /** Most rows a subscribe may ask to replay; `null`: no bound. @default 100000 */
  maxReplay?: number | null;
  /** Close a subscriber whose socket accepts nothing for this long. @default 30000 */
  stallTimeoutMs?: number;
  /**
   * Subscribers at once; one more is refused with close code 1013 ("try again
   * later") and no greeting.
   * @default 5000
   */
  maxSubscribers?: number;
  /**
   * Archive chunks and the manifest to S3: an `s3://bucket/prefix` URI, or
   * the URI with an endpoint and path-style addressing for S3-compatible
   * stores. Named (the URI only, never credentials) in greetings and `/head`.
   * @default null
   */
  archive?: string | ArchiveOptions | null;
  /** Serve offsets the local tier no longer holds from the archive. @default false */
  replayArchive?: boolean;
  /**
   * Free space on the disk of the log under which the stream takes no rows
   * (`DiskFullError`) until it is back (0: only a write that fails for lack
   * of space stops it). Durable streams only. @default 64 MiB
   */
  minFreeBytes?: number;
  /**
   * Keep an Apache Iceberg table of the log's sealed rows, at
   * `ARCHIVE/NAME/iceberg/` with an archive, else `ROOT/NAME/iceberg/`
   * (`true`, or its options). Durable streams only. @default false
   */
  iceberg?: boolean | IcebergOptions;
  /**
   * The key columns of a keyed stream: the server keeps each key's latest
   * row, for snapshots (`?snapshot=1`, `GET /NAME/latest`). Each must be a
   * non-nullable string, integer or boolean column. Durable streams only.
   * @default null
   */
  key?: readonly string[] | null;
  /** Keys a keyed stream keeps at most; past it new keys are not added. @default 1000000 */
  maxKeys?: number;
}

/**
 * Options of {@linkcode Stream.restore}: those of a stream, with `root` and
 * `archive` required.
 */
export interface StreamRestoreOptions extends StreamOptions {
  /** Folder holding the logs (the log is rebuilt at `ROOT/NAME`). */
  root: string;
  /** Where the archive is. */
  archive: string | ArchiveOptions;
  /** Download the chunks too (true), or the last N of them; else only the manifest. */
  hydrate?: boolean | number;
  /** Told about each step. */
  progress?: (message: string) => void;
}

/** Options a stream keeps, checked, with defaults applied. */
export interface StreamSettings {
  maxBacklog: number;
  maxReplay: number | null;
  stallTimeoutMs: number;
  maxSubscribers: number;
  archive: string | ArchiveOptions | null;
  replayArchive: boolean;
  minFreeBytes: number;
  root: string | undefined;
  logOptions: LogOptions | undefined;
  iceberg: IcebergOptions | null;
  key: readonly string[] | null;
  maxKeys: number;
}

const KEYS = [
  "schema",
  "root",
  "logOptions",
  "maxBacklog",
  "maxReplay",
  "stallTimeoutMs",
  "maxSubscribers",
  "archive",
  "replayArchive",
  "minFreeBytes",
  "iceberg",
  "key",
  "maxKeys",
] as const;

const RESTORE_KEYS = [...KEYS, "hydrate", "progress"] as const;

/**
 * Checks a stream's name: `RangeError` unless it follows the wire contract's rule.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { checkStreamName } from "./stream_options.ts";
 * try {
 *   checkStreamName("Stream.open", "_x");
 * } catch (err) {
 *   equal(err instanceof RangeError, true);
 * }
 * ```
 */
export function checkStreamName(where: string, name: unknown): string {
  if (typeof name !== "string") {
    throw new TypeError(`${where}: the stream name must be a string, got ${shown(name)}`);
  }
  if (!isStreamName(name)) {
    throw new RangeError(`${where}: invalid stream name ${shown(name)}: ${STREAM_NAME_RULE}`);
  }
  return name;
}

/**
 * Checks a stream's options at the call (`where` names it), applying the
 * defaults; `restore` accepts the keys of {@linkcode StreamRestoreOptions}.
 * The schema itself is checked when it is compiled.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { checkStreamOptions } from "./stream_options.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * equal(checkStreamOptions("Stream.open", { schema }).maxBacklog, 8192);
 * throws(() => checkStreamOptions("Stream.open", { schema, maxBacklog: "8" }), {
 *   name: "TypeError",
 *   message: 'Stream.open: options.maxBacklog must be an integer >= 1, got "8"',
 * });
 * ```
 */
export function checkStreamOptions(
  where: string,
  options: unknown,
  restore = false,
): StreamSettings {
  if (options === undefined) {
    throw new TypeError(`${where}: options with a schema are required, got undefined`);
  }
  const o = new OptionCheck(where, checkKeys(where, options, restore ? RESTORE_KEYS : KEYS));
  const schema = o.get("schema");
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) {
    o.typeError("schema", "a JSON Schema object");
  }
  const root = o.string("root", undefined);
  const logOptions = o.object("logOptions") as LogOptions | undefined;
  const max = Number.MAX_SAFE_INTEGER;
  const archive = o.get("archive") ?? null;
  if (archive !== null && typeof archive !== "string") {
    if (typeof archive !== "object" || Array.isArray(archive)) {
      o.typeError("archive", "an s3:// URI, an object with uri, or null");
    }
    if (typeof (archive as { uri?: unknown }).uri !== "string") {
      o.typeError("archive", "an s3:// URI, an object with uri, or null");
    }
  }
  if (restore) {
    if (root === undefined) o.typeError("root", "a folder");
    if (archive === null) o.typeError("archive", "an s3:// URI or an object with uri");
    const hydrate = o.get("hydrate");
    if (hydrate !== undefined && typeof hydrate !== "boolean") o.int("hydrate", 0, max, 0);
    o.fn("progress");
  }
  return {
    maxBacklog: o.int("maxBacklog", 1, max, DEFAULT_MAX_BACKLOG),
    maxReplay: o.int("maxReplay", 0, max, DEFAULT_MAX_REPLAY, true),
    stallTimeoutMs: o.number("stallTimeoutMs", 0, false, DEFAULT_STALL_TIMEOUT_MS),
    maxSubscribers: o.int("maxSubscribers", 1, max, DEFAULT_MAX_SUBSCRIBERS),
    archive: archive as string | ArchiveOptions | null,
    replayArchive: o.bool("replayArchive", false),
    minFreeBytes: o.int("minFreeBytes", 0, max, DEFAULT_MIN_FREE_BYTES),
    root,
    logOptions,
    iceberg: icebergSetting(o.get("iceberg"), root, schema as Record<string, unknown>, where),
    key: keySetting(o.get("key"), root, where),
    maxKeys: o.int("maxKeys", 1, max, DEFAULT_MAX_KEYS),
  };
}

// The `key` option checked as a list of names (the columns are checked
// against the compiled schema): null when none; a durable stream's only.
function keySetting(v: unknown, root: string | undefined, where: string): string[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v) || v.some((c) => typeof c !== "string")) {
    throw new TypeError(`${where}: options.key must be an array of column names, got ${shown(v)}`);
  }
  if (root === undefined) {
    throw new TypeError(`${where}: options.key is for a durable stream (one with root)`);
  }
  return [...v];
}

// The `iceberg` option checked: null when off; a durable stream's only.
function icebergSetting(
  v: unknown,
  root: string | undefined,
  schema: Record<string, unknown>,
  where: string,
): IcebergOptions | null {
  if (v === undefined || v === false) return null;
  if (root === undefined) {
    throw new TypeError(`${where}: options.iceberg is for a durable stream (one with root)`);
  }
  checkTableColumns(schema);
  try {
    return checkIcebergOptions(v);
  } catch (err) {
    (err as Error).message = `${where}: options.${(err as Error).message}`;
    throw err;
  }
}

/**
 * The log options a stream's archive settings ask for (none without an archive).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { archiveLogOptions } from "./stream_options.ts";
 * deepStrictEqual(archiveLogOptions({ archive: "s3://b/p" } as never).archive, { uri: "s3://b/p" });
 * ```
 */
export function archiveLogOptions(settings: StreamSettings): LogOptions {
  const a = settings.archive;
  if (!a) return {};
  return {
    archive: typeof a === "string" ? { uri: a } : a,
    replayArchive: settings.replayArchive,
  };
}
