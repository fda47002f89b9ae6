/**
 * The bounds of a retention setting as operators give it (`--retain-age`,
 * `--retain-bytes`, the config's `retainAge`/`retainBytes`, and the same
 * fields of a `PUT /_/streams/NAME` body): the one reader of each, shared by
 * the command line, the config file and the admin API.
 *
 * An age below a second or a size below a kibibyte keeps nothing useful
 * (not one sealed chunk of a few rows); an age over a century or a size over
 * a pebibyte is a typo for "keep all", which leaving the setting out says,
 * and such values overflow the arithmetic on them (`1e300` seconds is no
 * date). The library's `ChunkPolicy` takes any value; these bounds are the
 * operator's.
 *
 * @module
 */

import { bytesOf, parseBytes, parseDuration } from "./units.ts";

/** The shortest retention age, seconds. */
export const MIN_RETAIN_AGE_SECONDS = 1;
/** The longest retention age, seconds: 100 years of 365 days. */
export const MAX_RETAIN_AGE_SECONDS = 100 * 365 * 86_400;
/** The smallest retention size, bytes (1 KiB). */
export const MIN_RETAIN_BYTES = 1024;
/** The largest retention size, bytes (1 PiB). */
export const MAX_RETAIN_BYTES = 2 ** 50;

/**
 * A retention age in seconds, from a duration (`90s`, `15m`, `24h`, `7d`, or
 * seconds); `RangeError` naming `what`, the value and the bound it is past.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { parseRetainAge } from "./retention_bounds.ts";
 * equal(parseRetainAge("7d", "--retain-age"), 604_800);
 * throws(() => parseRetainAge(1e-300, "--retain-age"), /--retain-age must be at least 1 s, got 1e-300/);
 * ```
 */
export function parseRetainAge(v: unknown, what: string): number {
  const s = parseDuration(v, what);
  if (s < MIN_RETAIN_AGE_SECONDS) {
    throw new RangeError(
      `${what} must be at least ${MIN_RETAIN_AGE_SECONDS} s, got ${show(v)} (${s} s)`,
    );
  }
  if (s > MAX_RETAIN_AGE_SECONDS) {
    throw new RangeError(
      `${what} must be at most 100 years (${MAX_RETAIN_AGE_SECONDS} s = 36500d), got ${
        show(v)
      } (${s} s); leave it out to keep all`,
    );
  }
  return s;
}

/**
 * A retention size in bytes, from `500MB`, `2GiB` or bytes; `RangeError`
 * naming `what`, the value and the bound it is past.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { parseRetainBytes } from "./retention_bounds.ts";
 * equal(parseRetainBytes("2GiB", "--retain-bytes"), 2 ** 31);
 * throws(() => parseRetainBytes(100, "--retain-bytes"), /--retain-bytes must be at least 1KiB \(1024 bytes\), got 100/);
 * ```
 */
export function parseRetainBytes(v: unknown, what: string): number {
  // Past the bound before parseBytes, which refuses what is past 2^53 without naming it.
  if (bytesOf(v) > MAX_RETAIN_BYTES) throw tooBig(v, what);
  const n = parseBytes(v, what);
  if (n < MIN_RETAIN_BYTES) {
    throw new RangeError(
      `${what} must be at least 1KiB (${MIN_RETAIN_BYTES} bytes), got ${show(v)}`,
    );
  }
  if (n > MAX_RETAIN_BYTES) throw tooBig(v, what);
  return n;
}

function tooBig(v: unknown, what: string): RangeError {
  return new RangeError(
    `${what} must be at most 1PiB (${MAX_RETAIN_BYTES} bytes), got ${
      show(v)
    }; leave it out to keep all`,
  );
}

// The value as given, for a message: a number as JavaScript writes it, else JSON, cut to 40.
function show(v: unknown): string {
  const text = typeof v === "number" ? String(v) : JSON.stringify(v) ?? String(v);
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}
