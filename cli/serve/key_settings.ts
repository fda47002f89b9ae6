/**
 * The rows of `serve`'s settings table for keyed streams (docs/SPEC.md,
 * "The latest row per key"), spliced into `SETTINGS` (`settings.ts`), which
 * types them: `--key NAME=COL[,COL…]` with the streams, `--max-keys` with the
 * limits.
 *
 * @module
 */

import { DEFAULT_MAX_KEYS } from "../../server/stream/key_index.ts";
import { integer } from "./values.ts";

const LIMITS = "limits (docs/CLI.md has the table)";

/**
 * `--key NAME=COL[,COL…]`, in the streams' group of `--help`.
 */
export const KEY_STREAM_SETTINGS = [
  {
    flag: "key",
    type: "string" as const,
    multiple: true,
    group: "streams",
    usage: [
      ["--key NAME=COL[,COL…]", "keep the latest row of each key of that stream, for"],
      ["", "?snapshot=1 and GET /NAME/latest (repeatable, one per stream)"],
    ] as [string, string][],
    docs: "keeps the latest row of each key of that declared (durable) stream — the key is the " +
      "columns given, each a non-nullable string, integer or boolean column of the schema " +
      "(checked at start) — for `?snapshot=1` subscribes and `GET /NAME/latest`. Repeatable, " +
      'one per stream; config: `"key": ["COL", …]` on the stream. See ' +
      "[Keyed streams](#keyed-streams).",
  },
];

/**
 * The key bound, in the limits' group.
 */
export const KEY_LIMIT_SETTINGS = [
  {
    flag: "max-keys",
    key: "maxKeys",
    type: "string" as const,
    read: integer(1),
    group: LIMITS,
    usage: [
      ["--max-keys N", "keys a keyed stream keeps; past it new keys are not added"],
      ["", `and snapshots are refused with 4503 / 503 [${DEFAULT_MAX_KEYS}]`],
    ] as [string, string][],
    docs: "keys one keyed stream keeps at most; past it rows of new keys are not added (a " +
      "warning, once, and `streamcast_keys_refused_total`) and snapshots are refused with " +
      "4503 / 503 `too_many_keys`; see [Limits](#limits).",
  },
];

/**
 * Reads a key's columns: `COL[,COL…]` from a flag, or a config's array of
 * names (or the same comma-separated text); `what` names where it came from.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { keyColumns } from "./key_settings.ts";
 * deepStrictEqual(keyColumns("venue,symbol", "--key"), ["venue", "symbol"]);
 * ```
 */
export function keyColumns(v: unknown, what: string): string[] {
  const names = typeof v === "string" ? v.split(",") : v;
  if (
    !Array.isArray(names) || names.length === 0 ||
    names.some((n) => typeof n !== "string" || n === "")
  ) {
    throw new TypeError(
      `${what} must name the key's columns, COL[,COL…] or an array of names, got ${
        JSON.stringify(v)
      }`,
    );
  }
  return names as string[];
}
