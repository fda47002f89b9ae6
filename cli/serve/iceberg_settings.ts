/**
 * The rows of `serve`'s settings table for the streams' Iceberg tables
 * (docs/SPEC.md §12), spliced into `SETTINGS` (`settings.ts`), which types
 * them: `--iceberg NAME` with the streams, the commit bound with the limits.
 *
 * @module
 */

import { DEFAULT_MAX_COMMIT_BYTES } from "../../iceberg/options.ts";
import { integer } from "./values.ts";

const LIMITS = "limits (docs/CLI.md has the table)";

/**
 * `--iceberg NAME`, in the streams' group of `--help`.
 */
export const ICEBERG_STREAM_SETTINGS = [
  {
    flag: "iceberg",
    type: "string" as const,
    multiple: true,
    group: "streams",
    usage: [
      ["--iceberg NAME", "keep an Apache Iceberg table of that stream's sealed rows"],
      ["", "(ARCHIVE/NAME/iceberg, else ROOT/NAME/iceberg; repeatable)"],
    ] as [string, string][],
    docs: "keeps an Apache Iceberg table (format version 2) of that declared (durable) stream's " +
      "sealed rows, at `ARCHIVE/NAME/iceberg/` with `--archive`, else `ROOT/NAME/iceberg/`; a row " +
      'is in it within `--seal-every` + 10 s. Repeatable; config: `"iceberg": true` on the ' +
      "stream. See [Iceberg tables](#iceberg-tables).",
  },
];

/**
 * The commit bound, in the limits' group.
 */
export const ICEBERG_LIMIT_SETTINGS = [
  {
    flag: "iceberg-commit-bytes",
    key: "icebergCommitBytes",
    type: "string" as const,
    read: integer(1 << 20, 1 << 30),
    group: LIMITS,
    usage: [
      ["--iceberg-commit-bytes N", "rows (bytes as stored) per Iceberg commit at most; a"],
      ["", `larger chunk is several snapshots [${DEFAULT_MAX_COMMIT_BYTES}]`],
    ] as [string, string][],
    docs: "rows (bytes as stored) one Iceberg commit takes at most, 1 MiB – 1 GiB; see " +
      "[Limits](#limits).",
  },
];
