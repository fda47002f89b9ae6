/**
 * The rows of `serve`'s settings table for the disk (docs/SPEC.md, "A
 * service you can leave running"): how much local history each durable
 * stream keeps (`--retain-age`, `--retain-bytes`; a stream's own config
 * keys win), and the free space under which streams stop taking rows
 * (`--min-free-bytes`). Spliced into `SETTINGS` (`settings.ts`), which
 * types them.
 *
 * @module
 */

import { parseBytes } from "../../common/units.ts";
import { parseRetainAge, parseRetainBytes } from "../../common/retention_bounds.ts";
import { DEFAULT_MIN_FREE_BYTES } from "../../server/stream/disk_gate.ts";
import { LIMITS_GROUP, type Reader } from "./values.ts";

/**
 * A retention age: a duration (`90s`, `15m`, `24h`, `7d`, or seconds), in
 * seconds, 1 s to 100 years (`retention_bounds.ts`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { retainAge } from "./disk_settings.ts";
 * equal(retainAge("24h", "--retain-age", null), 86_400);
 * ```
 */
export const retainAge: Reader = (v, what) => parseRetainAge(v, what);

/**
 * A retention size: `500MB`, `2GiB`, or bytes, 1 KiB to 1 PiB
 * (`retention_bounds.ts`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { retainBytes } from "./disk_settings.ts";
 * equal(retainBytes("2GiB", "--retain-bytes", null), 2 ** 31);
 * ```
 */
export const retainBytes: Reader = (v, what) => parseRetainBytes(v, what);

// Free space to keep: a size, or 0 (only a failed write stops a stream).
const minFree: Reader = (v, what) => v === 0 || v === "0" ? 0 : parseBytes(v, what);

/**
 * The retention rows, with the streams' settings in `--help`.
 */
export const RETENTION_SETTINGS = [
  {
    flag: "retain-age",
    key: "retainAge",
    type: "string" as const,
    read: retainAge,
    default: null,
    group: "where and how",
    usage: [
      ["--retain-age DURATION", "drop local history older than this (90s, 15m, 24h,"],
      ["", "7d or seconds); per stream: config retainAge"],
    ] as [string, string][],
    docs: "drop each durable stream's sealed local history older than this (`90s`, `15m`, " +
      "`24h`, `7d`, or seconds; 1 s to 100 years), oldest first, whole chunks, within `--seal-every` + 60 s; " +
      "with `--archive` only once archived. A stream's own `retainAge` in the config wins. " +
      "See [Retention](#retention).",
  },
  {
    flag: "retain-bytes",
    key: "retainBytes",
    type: "string" as const,
    read: retainBytes,
    default: null,
    group: "where and how",
    usage: [
      ["--retain-bytes SIZE", "keep at most this much local history per stream"],
      ["", "(500MB, 2GiB or bytes); per stream: config retainBytes"],
    ] as [string, string][],
    docs: "keep at most this much sealed local history per durable stream (`500MB`, `2GiB`, " +
      "or bytes; 1 KiB to 1 PiB; the active segment aside), dropping the oldest whole chunks; with " +
      "`--archive` only once archived. A stream's own `retainBytes` in the config wins. " +
      "See [Retention](#retention).",
  },
];

/**
 * The free-space floor, with the limits.
 */
export const DISK_LIMIT_SETTINGS = [
  {
    flag: "min-free-bytes",
    key: "minFreeBytes",
    type: "string" as const,
    read: minFree,
    default: DEFAULT_MIN_FREE_BYTES,
    group: LIMITS_GROUP,
    usage: [
      ["--min-free-bytes SIZE", "below this free space on ROOT's disk a stream stops"],
      ["", "taking rows (507 disk_full) until it is back [{default}]"],
    ] as [string, string][],
    docs: "free space on the disk of `--root` under which durable streams stop taking rows " +
      "(`507 disk_full`, `--stdin` paused, `--upstream` disconnected) until it is back, " +
      "checked before a commit at most once a second (`0`: only a failed write stops them); " +
      "see [A full disk](#a-full-disk).",
  },
];
