/**
 * The rows of `serve`'s settings table for network publishing (docs/SPEC.md §9),
 * kept in a file of their own and spliced into `SETTINGS`
 * (`settings.ts`), which types them.
 *
 * @module
 */

import { DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_IN_FLIGHT_BYTES } from "../../wire/publish.ts";
import { DEFAULT_MAX_PRODUCER_HOLDERS, DEFAULT_MAX_PRODUCERS } from "../../log/mod.ts";
import {
  DEFAULT_MAX_PUBLISH_BYTES,
  DEFAULT_MAX_PUBLISH_SERVER_BYTES,
  DEFAULT_PUBLISH_BODY_TIMEOUT_S,
  MAX_PUBLISH_BODY_TIMEOUT_S,
} from "../../server/limits.ts";
import { integer, LIMITS_GROUP, type Reader, stallSeconds } from "./values.ts";

const bodyTimeout: Reader = (v, what) => {
  const n = stallSeconds(v, what);
  if (n > MAX_PUBLISH_BODY_TIMEOUT_S) {
    throw new RangeError(
      `${what} must be at most ${MAX_PUBLISH_BODY_TIMEOUT_S} seconds, got ${JSON.stringify(v)}`,
    );
  }
  return n;
};

/**
 * The publishing rows, in the order of `--help`: `--publish` with the
 * streams, the limits with the limits.
 */
export const PUBLISH_STREAM_SETTINGS = [
  {
    flag: "publish",
    type: "string" as const,
    multiple: true,
    group: "streams",
    usage: [
      ["--publish NAME", "open that stream for network publishing: POST /NAME and"],
      ["", "the /NAME/publish socket (repeatable; durable streams)"],
    ] as [string, string][],
    docs: "opens that declared (durable) stream for network publishing: `POST /NAME` and the " +
      "`ws://…/NAME/publish` socket, acknowledged once durable. Repeatable " +
      '(`--publish ""` for the unnamed stream); config: `"publish": true` on the stream. See ' +
      "[Publishing](#publishing).",
  },
];

/**
 * The publishing limits.
 */
export const PUBLISH_LIMIT_SETTINGS = [
  {
    flag: "max-publish-bytes",
    key: "maxPublishBytes",
    type: "string" as const,
    read: integer(1),
    group: LIMITS_GROUP,
    usage: [
      ["--max-publish-bytes N", "largest POST body or publish frame; a larger body gets"],
      ["", `413, a frame closes with 1009 [${DEFAULT_MAX_PUBLISH_BYTES}]`],
    ] as [string, string][],
    docs: "largest `POST` body or publish frame, bytes; see [Limits](#limits).",
  },
  {
    flag: "max-in-flight",
    key: "maxInFlight",
    type: "string" as const,
    read: integer(1, 1 << 20),
    group: LIMITS_GROUP,
    usage: [
      ["--max-in-flight N", "frames a publish socket may have awaiting their ack; more"],
      ["", `wait, unread [${DEFAULT_MAX_IN_FLIGHT}]`],
    ] as [string, string][],
    docs: "frames a publish socket may have awaiting their ack; see [Limits](#limits).",
  },
  {
    flag: "max-publish-inflight-bytes",
    key: "maxPublishInflightBytes",
    type: "string" as const,
    read: integer(1),
    group: LIMITS_GROUP,
    usage: [
      ["--max-publish-inflight-bytes N", "bytes of frames a publish socket may have"],
      ["", `awaiting their ack; more wait, unread [${DEFAULT_MAX_IN_FLIGHT_BYTES}]`],
    ] as [string, string][],
    docs: "bytes of frames a publish socket may have awaiting their ack (one frame always may); " +
      "see [Limits](#limits).",
  },
  {
    flag: "max-publish-server-bytes",
    key: "maxPublishServerBytes",
    type: "string" as const,
    read: integer(1),
    group: LIMITS_GROUP,
    usage: [
      ["--max-publish-server-bytes N", "bytes of publish frames and POST bodies the"],
      ["", `server holds at once; more wait, unread [${DEFAULT_MAX_PUBLISH_SERVER_BYTES}]`],
    ] as [string, string][],
    docs: "bytes of publish frames and `POST` bodies the server holds at once, all sockets " +
      "together; see [Limits](#limits).",
  },
  {
    flag: "publish-body-timeout",
    key: "publishBodyTimeout",
    type: "string" as const,
    read: bodyTimeout,
    group: LIMITS_GROUP,
    usage: [
      ["--publish-body-timeout SECONDS", "cut a POST body with 408 when no byte of it"],
      ["", `arrives for this long [${DEFAULT_PUBLISH_BODY_TIMEOUT_S}]`],
    ] as [string, string][],
    docs: "answer 408 `body_timeout` to a `POST` whose body sends no byte for this long " +
      "(> 0), freeing what it held; see [Limits](#limits).",
  },
  {
    flag: "max-producers",
    key: "maxProducers",
    type: "string" as const,
    read: integer(1),
    group: LIMITS_GROUP,
    usage: [
      ["--max-producers N", "producers remembered per stream (and per token holder with"],
      ["", "--tokens) for idempotent publishing; the least recently used is"],
      ["", `forgotten first [${DEFAULT_MAX_PRODUCERS}]`],
    ] as [string, string][],
    docs: "producers remembered per stream, and per token holder with `--tokens` (oldest " +
      "publish forgotten first); see [Limits](#limits).",
  },
  {
    flag: "max-producer-holders",
    key: "maxProducerHolders",
    type: "string" as const,
    read: integer(1),
    group: LIMITS_GROUP,
    usage: [
      ["--max-producer-holders N", "token holders whose producers are remembered per"],
      ["", "stream; past it the holder whose last publish is oldest is"],
      ["", `forgotten whole [${DEFAULT_MAX_PRODUCER_HOLDERS}]`],
    ] as [string, string][],
    docs: "token holders (tokens-file names, signed tokens' `sub`) whose producers are " +
      "remembered per stream (oldest publish forgotten first, all its producers); see " +
      "[Limits](#limits).",
  },
];
