/**
 * Sizes and durations as operators write them: `500MB`, `2GiB` or a number
 * of bytes; `90s`, `15m`, `24h`, `7d` or a number of seconds. One reader
 * for each, shared by the command line, the config file and the admin API.
 *
 * @module
 */

const SIZE_UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

const DURATION_UNITS: Record<string, number> = { "": 1, s: 1, m: 60, h: 3600, d: 86_400 };

/**
 * The number of bytes `v` says: a whole number (bytes), or a number and a
 * unit — `B`, `KB`/`MB`/`GB`/`TB` (powers of 1000), `KiB`/`MiB`/`GiB`/`TiB`
 * (powers of 1024), in any case. Throws `RangeError` naming `what` for
 * anything else, or for less than one byte.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { parseBytes } from "./units.ts";
 * equal(parseBytes("500MB", "--retain-bytes"), 500_000_000);
 * equal(parseBytes("2GiB", "--retain-bytes"), 2 * 1024 ** 3);
 * equal(parseBytes(4096, '"retainBytes"'), 4096);
 * throws(() => parseBytes("2 parsecs", "--retain-bytes"), /--retain-bytes must be/);
 * ```
 */
export function parseBytes(v: unknown, what: string): number {
  const n = bytesOf(v);
  if (!Number.isFinite(n) || Math.round(n) < 1 || Math.round(n) > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(
      `${what} must be a size like 500MB, 2GiB or a number of bytes (>= 1), got ${
        JSON.stringify(v)
      }`,
    );
  }
  return Math.round(n);
}

/**
 * The number of bytes `v` says, unrounded and unchecked: NaN when it is not
 * a number or a number and a size unit (see {@linkcode parseBytes}).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { bytesOf } from "./units.ts";
 * equal(bytesOf("1.5KB"), 1500);
 * equal(bytesOf("lots"), NaN);
 * ```
 */
export function bytesOf(v: unknown): number {
  const m = typeof v === "string" ? /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(v) : null;
  const unit = m ? SIZE_UNITS[m[2].toLowerCase()] : undefined;
  return typeof v === "number" ? v : m && unit !== undefined ? Number(m[1]) * unit : NaN;
}

/**
 * The number of seconds `v` says: a number (seconds), or a number and a
 * unit — `s`, `m`, `h`, `d`. Throws `RangeError` naming `what` for anything
 * else, or for a duration that is not above zero.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { parseDuration } from "./units.ts";
 * equal(parseDuration("15m", "--retain-age"), 900);
 * equal(parseDuration("7d", "--retain-age"), 604_800);
 * equal(parseDuration("90", "--retain-age"), 90);
 * throws(() => parseDuration("soon", "--retain-age"), /--retain-age must be/);
 * ```
 */
export function parseDuration(v: unknown, what: string): number {
  const m = typeof v === "string" ? /^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$/.exec(v) : null;
  const n = typeof v === "number" ? v : m ? Number(m[1]) * DURATION_UNITS[m[2]] : NaN;
  if (!Number.isFinite(n) || n <= 0) {
    throw new RangeError(
      `${what} must be a duration like 90s, 15m, 24h, 7d or a number of seconds (> 0), got ${
        JSON.stringify(v)
      }`,
    );
  }
  return n;
}
