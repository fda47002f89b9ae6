/**
 * `serve`'s settings of a mirror, the `--follow` read replica (docs/SPEC.md
 * §10), spliced into the settings table of `settings.ts` (kept apart so
 * that the table stays one screenful per concern): `--follow NAME=URL` and
 * what tunes it.
 *
 * @module
 */

import {
  DEFAULT_MIRROR_MAX_MANIFEST_BYTES,
  DEFAULT_MIRROR_POLL_MS,
  DEFAULT_MIRROR_RETRY_MAX_MS,
  DEFAULT_MIRROR_TIMEOUT_MS,
} from "../../server/mirror/mirror.ts";
import { integer, type Reader, seconds, stallSeconds, text } from "./values.ts";

/** One mirror setting: the shape of `Setting` in `settings.ts`. */
export interface FollowSetting {
  /** The flag, without `--`. */
  flag: string;
  /** The config file's key. */
  key: string;
  /** The flag's type for `parseArgs`. */
  type: "string";
  /** The flag may be repeated. */
  multiple?: boolean;
  /** How a value is read (absent: `--follow`'s own rules). */
  read?: Reader;
  /** The value when neither the flag nor the config gives one. */
  default?: unknown;
  /** The usage text's group. */
  group: string;
  /** The usage lines. */
  usage: [string, string][];
  /** Its meaning in docs/CLI.md. */
  docs: string;
}

/** Default wait for the primary when a mirror has no replica yet, seconds. */
export const DEFAULT_FOLLOW_START_WAIT_S = 30;

const GROUP = "mirrors (docs/SCALING.md)";

/**
 * The mirror settings, in the order of `--help`.
 */
export const FOLLOW_SETTINGS: readonly FollowSetting[] = [
  {
    flag: "follow",
    key: "follow",
    type: "string",
    multiple: true,
    group: GROUP,
    usage: [
      ["--follow NAME=URL", "serve a replica of the stream at URL (ws://HOST:PORT/NAME"],
      ["", "of a primary or another mirror) as stream NAME; no"],
      ["", "schema: it comes from the primary (repeatable)"],
    ],
    docs: "serve a replica of the stream at URL (`ws://HOST:PORT/NAME` of a primary or of " +
      "another mirror) as stream NAME: same `stream_id`, offsets, bytes and chunks; the " +
      "schema comes from the primary, so NAME takes no `--stream`. Repeatable. A followed " +
      "stream takes no rows (`--stdin`, `--upstream` naming it are refused). Config: " +
      '`"follow": {"NAME": "URL"}`. See docs/SCALING.md.',
  },
  {
    flag: "follow-token",
    key: "followToken",
    type: "string",
    read: text,
    default: null,
    group: GROUP,
    usage: [[
      "--follow-token TOKEN",
      "bearer token for guarded primaries (else the URL's access_token)",
    ]],
    docs: "bearer token the mirror presents to its primaries (else the URL's `access_token`); " +
      "never shown in logs or `/head`.",
  },
  {
    flag: "follow-poll",
    key: "followPoll",
    type: "string",
    read: stallSeconds,
    default: DEFAULT_MIRROR_POLL_MS / 1000,
    group: GROUP,
    usage: [[
      "--follow-poll SECONDS",
      "how often the primary's manifest and head are read [{default}]",
    ]],
    docs: "how often a mirror reads its primary's `/manifest` (new chunks to adopt) and " +
      "`/head` (for `lag_rows`), seconds > 0.",
  },
  {
    flag: "follow-retry-max",
    key: "followRetryMax",
    type: "string",
    read: stallSeconds,
    default: DEFAULT_MIRROR_RETRY_MAX_MS / 1000,
    group: GROUP,
    usage: [["--follow-retry-max SECONDS", "cap of the reconnect backoff [{default}]"]],
    docs: "cap of the capped exponential backoff (from 0.25 s, with jitter) between " +
      "reconnects to a primary that went away, seconds > 0.",
  },
  {
    flag: "follow-timeout",
    key: "followTimeout",
    type: "string",
    read: stallSeconds,
    default: DEFAULT_MIRROR_TIMEOUT_MS / 1000,
    group: GROUP,
    usage: [
      ["--follow-timeout SECONDS", "longest silence of a manifest or chunk request to the"],
      ["", "primary: its answer, then each piece of its body [{default}]"],
    ],
    docs: "longest silence of one request a mirror makes for its primary's history " +
      "(`/manifest`, a chunk, its time index): the answer's headers, then each piece of its " +
      "body, must come within it, seconds > 0 — a large chunk at a modest bandwidth takes as " +
      "long as it needs; past it the request fails and is retried with the reconnect backoff.",
  },
  {
    flag: "follow-max-manifest-bytes",
    key: "followMaxManifestBytes",
    type: "string",
    read: integer(1024),
    default: DEFAULT_MIRROR_MAX_MANIFEST_BYTES,
    group: GROUP,
    usage: [[
      "--follow-max-manifest-bytes N",
      "largest primary manifest a mirror reads [{default}]",
    ]],
    docs: "largest `/manifest` a mirror reads from its primary, bytes ≥ 1024; a larger one " +
      "fails the request once that many bytes have come (logged, retried). A chunk is read up " +
      "to its manifest entry's `bytes` and a time index up to what the entry's rows can take.",
  },
  {
    flag: "follow-start-wait",
    key: "followStartWait",
    type: "string",
    read: seconds,
    default: DEFAULT_FOLLOW_START_WAIT_S,
    group: GROUP,
    usage: [[
      "--follow-start-wait SECONDS",
      "with no replica yet, wait this long for the primary [{default}]",
    ]],
    docs: "with no replica on disk yet, how long `serve` waits for the primary to answer before " +
      "it exits 1 (a replica already on disk is served at once, the primary retried).",
  },
];
