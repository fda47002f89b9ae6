/**
 * Reading the values of `serve`'s settings, from flags (strings) or the
 * config file (JSON values): each reader checks one kind of value and names
 * the flag or key in its error.
 *
 * @module
 */

import { resolve } from "node:path";
import { isStreamName, STREAM_NAME_RULE } from "../../wire/stream_name.ts";
import { isLogFormat, isLogLevel, type LogFormat, type LogLevel } from "../../common/logger.ts";

/**
 * The usage text's group of every limit (each has its row in docs/CLI.md's table).
 */
export const LIMITS_GROUP = "limits (docs/CLI.md has the table)";

/**
 * Reads one value: `what` names it in errors (`--port` or `"port"`); `base`
 * is the config file's folder (relative paths resolve against it), or null
 * for a flag. Throws `RangeError` or `TypeError` naming `what`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { Reader } from "./values.ts";
 * const even: Reader = (v, what) => {
 *   if (Number(v) % 2 !== 0) throw new RangeError(`${what} must be even, got ${v}`);
 *   return Number(v);
 * };
 * equal(even("4", "--n", null), 4);
 * ```
 */

export type Reader = (v: unknown, what: string, base: string | null) => unknown;

function integerValue(
  v: unknown,
  what: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const n = typeof v === "string" && /^\d+$/.test(v.trim()) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `${min}-${max}`;
    throw new RangeError(
      `${what} must be an integer ${range}, got ${JSON.stringify(v)}`,
    );
  }
  return n;
}

/**
 * An integer reader: `min` up to `max` (default: any safe integer).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { integer } from "./values.ts";
 * equal(integer(0, 65535)("8765", "--port", null), 8765);
 * ```
 */
export function integer(min: number, max?: number): Reader {
  return (v, what) => integerValue(v, what, min, max);
}

/**
 * Seconds ≥ 0, a fraction allowed.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { seconds } from "./values.ts";
 * equal(seconds("1.5", "--seal-every"), 1.5);
 * ```
 */
export function seconds(v: unknown, what: string): number {
  const n = typeof v === "string" && /^\d+(\.\d+)?$/.test(v.trim()) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0) {
    throw new RangeError(`${what} must be a number of seconds >= 0, got ${JSON.stringify(v)}`);
  }
  return n;
}

/**
 * A stall timeout: seconds > 0.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { stallSeconds } from "./values.ts";
 * equal(stallSeconds("30", "--stall-timeout"), 30);
 * ```
 */
export function stallSeconds(v: unknown, what: string): number {
  const n = seconds(v, what);
  if (n <= 0) {
    throw new RangeError(`${what} must be a number of seconds > 0, got ${JSON.stringify(v)}`);
  }
  return n;
}

/**
 * A replay bound: an integer ≥ 0, or `none` (`null` in the config) for no bound.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { maxReplay } from "./values.ts";
 * equal(maxReplay("none", "--max-replay"), null);
 * equal(maxReplay(10, '"maxReplay"'), 10);
 * ```
 */
export function maxReplay(v: unknown, what: string): number | null {
  if (v === null || v === "none") return null;
  return integerValue(v, `${what} (or none)`, 0);
}

/**
 * A log level: `error`, `warn`, `info` or `debug`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { logLevel } from "./values.ts";
 * equal(logLevel("debug", "--log-level"), "debug");
 * ```
 */
export function logLevel(v: unknown, what: string): LogLevel {
  if (!isLogLevel(v)) {
    throw new RangeError(`${what} must be error, warn, info or debug, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * A log format: `text` or `json`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { logFormat } from "./values.ts";
 * equal(logFormat("json", "--log-format"), "json");
 * ```
 */
export function logFormat(v: unknown, what: string): LogFormat {
  if (!isLogFormat(v)) {
    throw new RangeError(`${what} must be text or json, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * A config value that must be a non-empty string (`what` is the quoted key).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { nonEmpty } from "./values.ts";
 * equal(nonEmpty("data", '"root"'), "data");
 * ```
 */
export function nonEmpty(v: unknown, what: string): string {
  if (typeof v !== "string" || v === "") {
    throw new TypeError(`${what} must be a non-empty string, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * Checks a stream name; `what` says where it was given.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { streamName } from "./values.ts";
 * equal(streamName("trades", "--stdin"), "trades");
 * ```
 */
export function streamName(name: string, what: string): string {
  if (!isStreamName(name)) {
    throw new RangeError(
      `invalid stream name ${JSON.stringify(name)} in ${what}: ${STREAM_NAME_RULE}`,
    );
  }
  return name;
}

/**
 * Checks an upstream URL: ws, wss, http or https.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { upstreamUrl } from "./values.ts";
 * equal(upstreamUrl("wss://feed.example/v1", "--upstream"), "wss://feed.example/v1");
 * ```
 */
export function upstreamUrl(url: string, what: string): string {
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

/**
 * An archive URI: `s3://bucket/prefix`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { s3Uri } from "./values.ts";
 * equal(s3Uri("s3://my-bucket/streams", "--archive"), "s3://my-bucket/streams");
 * ```
 */
export function s3Uri(v: string, where: string): string {
  if (!/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/.test(v)) {
    throw new TypeError(`${where} must be s3://bucket/prefix, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * A flag's string as given; in the config a non-empty string.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { text } from "./values.ts";
 * equal(text("0.0.0.0", "--host", null), "0.0.0.0");
 * ```
 */
export const text: Reader = (v, what, base) => base === null ? v : nonEmpty(v, what);
/**
 * A path: in the config, relative to the file's folder.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { path } from "./values.ts";
 * equal(path("data", '"root"', "/etc/streamcast"), "/etc/streamcast/data");
 * ```
 */
export const path: Reader = (v, what, base) => base === null ? v : resolve(base, nonEmpty(v, what));
/**
 * A boolean flag (present: true); in the config `true` or `false`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { bool } from "./values.ts";
 * equal(bool(true, '"fsync"'), true);
 * ```
 */
export function bool(v: unknown, what: string): boolean {
  if (typeof v !== "boolean") {
    throw new TypeError(`${what} must be true or false, got ${JSON.stringify(v)}`);
  }
  return v;
}
