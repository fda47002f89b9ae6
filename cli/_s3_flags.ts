/**
 * The S3 flags of `restore` and `tail`: `--s3-endpoint URL`, `--s3-path-style`
 * and `--s3-timeout S`, read into the options of the archive's client. `serve`
 * has the same three in its settings table, with this file's timeout range.
 *
 * @example
 * ```ts
 * import { deepEqual, throws } from "node:assert/strict";
 * import { parse } from "./_args.ts";
 * import { S3_FLAGS, s3FlagOptions } from "./_s3_flags.ts";
 * const { values } = parse(["--s3-path-style", "--s3-timeout", "5"], S3_FLAGS, 0);
 * deepEqual(s3FlagOptions(values), { endpoint: undefined, forcePathStyle: true, timeoutMs: 5000 });
 * throws(() => s3FlagOptions({ "s3-timeout": "0" }), /--s3-timeout must be an integer 1-3600/);
 * ```
 *
 * @module
 */

import { type ArchiveOptions, DEFAULT_S3_TIMEOUT_MS } from "../common/s3.ts";
import { UsageError } from "./_args.ts";
import { integer } from "./serve/values.ts";

/** The longest `--s3-timeout`, seconds (an hour: longer is no timeout at all). */
export const S3_TIMEOUT_MAX_S = 3600;

const timeoutSeconds = integer(1, S3_TIMEOUT_MAX_S);

/** The three flags, for `parse`. */
export const S3_FLAGS = {
  "s3-endpoint": { type: "string" },
  "s3-path-style": { type: "boolean" },
  "s3-timeout": { type: "string" },
} as const;

/** The three flags' lines of a command's help, aligned at column 21. */
export const S3_FLAGS_HELP = `  --s3-endpoint URL  an S3-compatible store (or AWS_ENDPOINT_URL_S3)
  --s3-path-style    path-style addressing (most S3-compatible stores)
  --s3-timeout S     an S3 request that waits this long to connect, or for its
                     next byte, fails (whole seconds, 1-${S3_TIMEOUT_MAX_S}) [${
  DEFAULT_S3_TIMEOUT_MS / 1000
}]`;

/** The archive client's options from parsed flags; a bad `--s3-timeout` is a `UsageError`. */
export function s3FlagOptions(values: Record<string, unknown>): Omit<ArchiveOptions, "uri"> {
  let timeoutMs = DEFAULT_S3_TIMEOUT_MS;
  if (values["s3-timeout"] !== undefined) {
    try {
      timeoutMs = (timeoutSeconds(values["s3-timeout"], "--s3-timeout", null) as number) * 1000;
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  return {
    endpoint: values["s3-endpoint"] as string | undefined,
    forcePathStyle: values["s3-path-style"] === true,
    timeoutMs,
  };
}
