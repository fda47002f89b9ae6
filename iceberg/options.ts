/**
 * The options of a stream's Iceberg table (`StreamOptions.iceberg`), checked,
 * with their defaults.
 *
 * @module
 */

import type { Logger } from "../common/logger.ts";

/**
 * The default of {@linkcode IcebergOptions.maxCommitBytes}: 64 MiB of
 * rows (as stored) per commit at most, the default segment's size, so a
 * chunk of a default log is one commit.
 */
export const DEFAULT_MAX_COMMIT_BYTES = 64 << 20;

/**
 * Options of a stream's Iceberg table (`StreamOptions.iceberg`, `IcebergTable.start`).
 */
export interface IcebergOptions {
  /**
   * Rows (bytes as stored) per commit at most: a chunk larger than this is
   * committed as several snapshots. From 1 MiB to 1 GiB. @default 64 MiB
   */
  maxCommitBytes?: number;
  /** How often the log's manifest is looked at for a new chunk, ms. @default 250 */
  pollMs?: number;
  /** Where a failed commit is reported (once per distinct failure). @default warnings on stderr */
  logger?: Logger;
}

/**
 * Checks {@linkcode IcebergOptions}: a `TypeError` for a wrong shape, a
 * `RangeError` for a value out of range.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { checkIcebergOptions } from "./options.ts";
 * throws(() => checkIcebergOptions({ maxCommitBytes: 1 }), RangeError);
 * throws(() => checkIcebergOptions({ colour: "red" }), TypeError);
 * ```
 */
export function checkIcebergOptions(o: unknown): IcebergOptions {
  if (o === true || o === undefined) return {};
  if (typeof o !== "object" || o === null || Array.isArray(o)) {
    throw new TypeError(`iceberg must be true or an object of options, got ${JSON.stringify(o)}`);
  }
  const opts = o as Record<string, unknown>;
  for (const k of Object.keys(opts)) {
    if (k !== "maxCommitBytes" && k !== "pollMs" && k !== "logger") {
      throw new TypeError(`iceberg: unknown option ${JSON.stringify(k)}`);
    }
  }
  const m = opts.maxCommitBytes;
  if (
    m !== undefined &&
    (!Number.isSafeInteger(m) || (m as number) < 1 << 20 || (m as number) > 1 << 30)
  ) {
    throw new RangeError(`iceberg.maxCommitBytes must be an integer from 1 MiB to 1 GiB, got ${m}`);
  }
  const p = opts.pollMs;
  if (p !== undefined && (typeof p !== "number" || !(p >= 10 && p <= 60_000))) {
    throw new RangeError(`iceberg.pollMs must be from 10 to 60000, got ${p}`);
  }
  return opts as IcebergOptions;
}
