/**
 * Structured logs: one line per event, filtered by level, written as JSON or
 * as text (stderr unless told otherwise).
 *
 * ```text
 * json  {"ts":"2026-11-29T16:45:20.123Z","level":"info","event":"subscribe","stream":"trades","offset":1200}
 * text  streamcast: subscribe stream=trades offset=1200
 * text  streamcast: end of stdin for stream "trades" (4 rows accepted, 0 rejected); still serving
 * ```
 *
 * A JSON line holds `ts` (ISO 8601, UTC), `level`, `event`, then the event's
 * fields, then `msg` when the event has a sentence. A text line is that
 * sentence when there is one (the lines docs/CLI.md documents, unchanged), else
 * `streamcast: [LEVEL ]EVENT key=value …` (the level is shown for warn and error).
 *
 * The logger does not know what is secret: callers never hand it a secret.
 * (Bearer tokens are hashed when the tokens file is read and never reach it;
 * URLs, which may carry `access_token`, are not logged.)
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Logger } from "./logger.ts";
 * const lines: string[] = [];
 * const log = new Logger({ level: "warn", format: "json", write: (l) => lines.push(l) });
 * log.info("subscribe", { stream: "trades" }); // below the level: dropped
 * log.warn("dropped", { stream: "trades", code: 4429 });
 * equal(JSON.parse(lines[0]).event, "dropped");
 * equal(lines.length, 1);
 * ```
 *
 * @module
 */

/** How important an event is, most important first. */
export type LogLevel = "error" | "warn" | "info" | "debug";

/** Every {@linkcode LogLevel}, most important first. */
export const LOG_LEVELS: readonly LogLevel[] = ["error", "warn", "info", "debug"];

/** How lines are written. */
export type LogFormat = "text" | "json";

/** Every {@linkcode LogFormat}. */
export const LOG_FORMATS: readonly LogFormat[] = ["text", "json"];

/** An event's fields: JSON values (an `Error` is written as its message). */
export type LogFields = Record<string, unknown>;

/**
 * Options of {@linkcode Logger}.
 */
export interface LoggerOptions {
  /** Events below this level are dropped. @default "info" */
  level?: LogLevel;
  /** JSON lines or text lines. @default "text" */
  format?: LogFormat;
  /**
   * Where each line goes (without its newline), with its level. A server
   * process passes `batchedStderr` (`stderr_lines.ts`): one write a turn.
   * @default console.error (stderr)
   */
  write?: (line: string, level: LogLevel) => void;
  /** The clock for `ts`. @default () => new Date() */
  now?: () => Date;
}

/**
 * Whether `v` names a {@linkcode LogLevel}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { isLogLevel } from "./logger.ts";
 * equal(isLogLevel("warn"), true);
 * equal(isLogLevel("verbose"), false);
 * ```
 */
export function isLogLevel(v: unknown): v is LogLevel {
  return typeof v === "string" && (LOG_LEVELS as readonly string[]).includes(v);
}

/**
 * Whether `v` names a {@linkcode LogFormat}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { isLogFormat } from "./logger.ts";
 * equal(isLogFormat("json"), true);
 * equal(isLogFormat("xml"), false);
 * ```
 */
export function isLogFormat(v: unknown): v is LogFormat {
  return typeof v === "string" && (LOG_FORMATS as readonly string[]).includes(v);
}

// Field values a text line shows bare; anything else is JSON-quoted.
const BARE = /^[A-Za-z0-9._:/@+-]+$/;

function jsonValue(_key: string, v: unknown): unknown {
  if (v instanceof Error) return v.message;
  if (typeof v === "bigint") return v.toString();
  return v;
}

function textValue(v: unknown): string {
  if (typeof v === "string") return BARE.test(v) ? v : JSON.stringify(v);
  if (v instanceof Error) return JSON.stringify(v.message);
  if (v === undefined) return "undefined";
  return JSON.stringify(v, jsonValue) ?? String(v);
}

/**
 * Writes events at or above a level, one line each.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Logger } from "./logger.ts";
 * const lines: string[] = [];
 * const log = new Logger({ write: (l) => lines.push(l) });
 * log.info("subscribe", { stream: "trades", offset: 5 });
 * log.info("ingest", { stream: "trades" }, 'streamcast: end of stdin for stream "trades"');
 * deepStrictEqual(lines, [
 *   "streamcast: subscribe stream=trades offset=5",
 *   'streamcast: end of stdin for stream "trades"',
 * ]);
 * ```
 */
export class Logger {
  /** The lowest level written. */
  readonly level: LogLevel;
  /** The line format. */
  readonly format: LogFormat;
  readonly #rank: number;
  readonly #write: (line: string, level: LogLevel) => void;
  readonly #now: () => Date;

  /** Makes a logger; throws `RangeError` for an unknown level or format. */
  constructor(options: LoggerOptions = {}) {
    const level = options.level ?? "info";
    const format = options.format ?? "text";
    if (!isLogLevel(level)) {
      throw new RangeError(`log level must be one of ${LOG_LEVELS.join(", ")}, got ${level}`);
    }
    if (!isLogFormat(format)) {
      throw new RangeError(`log format must be text or json, got ${format}`);
    }
    this.level = level;
    this.format = format;
    this.#rank = LOG_LEVELS.indexOf(level);
    this.#write = options.write ?? ((line) => console.error(line));
    this.#now = options.now ?? (() => new Date());
  }

  /** A logger that writes nothing. */
  static silent(): Logger {
    return new Logger({ level: "error", write: () => {} });
  }

  /** Whether events at `level` are written. */
  enabled(level: LogLevel): boolean {
    return LOG_LEVELS.indexOf(level) <= this.#rank;
  }

  /**
   * Writes one event: `event` is a short snake_case name, `fields` its data,
   * `msg` an optional sentence (the whole line in text format).
   */
  log(level: LogLevel, event: string, fields: LogFields = {}, msg?: string): void {
    if (!this.enabled(level)) return;
    let line: string;
    if (this.format === "json") {
      const record: LogFields = { ts: this.#now().toISOString(), level, event };
      for (const [k, v] of Object.entries(fields)) {
        if (v !== undefined && !(k in record)) record[k] = v;
      }
      if (msg !== undefined) record.msg = msg;
      line = JSON.stringify(record, jsonValue);
    } else if (msg !== undefined) {
      line = msg.replace(/\r?\n/g, " ");
    } else {
      const tag = level === "warn" || level === "error" ? `${level} ` : "";
      let text = `streamcast: ${tag}${event}`;
      for (const [k, v] of Object.entries(fields)) {
        if (v !== undefined) text += ` ${k}=${textValue(v)}`;
      }
      line = text.replace(/\r?\n/g, " ");
    }
    try {
      this.#write(line, level);
    } catch {
      // A closed stderr must not take the server down with it.
    }
  }

  /** Writes an `error` event. */
  error(event: string, fields?: LogFields, msg?: string): void {
    this.log("error", event, fields, msg);
  }

  /** Writes a `warn` event. */
  warn(event: string, fields?: LogFields, msg?: string): void {
    this.log("warn", event, fields, msg);
  }

  /** Writes an `info` event. */
  info(event: string, fields?: LogFields, msg?: string): void {
    this.log("info", event, fields, msg);
  }

  /** Writes a `debug` event. */
  debug(event: string, fields?: LogFields, msg?: string): void {
    this.log("debug", event, fields, msg);
  }
}
