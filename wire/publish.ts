/**
 * The publishing half of the wire contract (docs/SPEC.md §9): producer names
 * and their header, the publish greeting, frames and answers, the in-flight
 * defaults, and the publish URL. Pure, like all of `wire/`: the server, the Deno
 * client and the browser client import the one definition.
 *
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { parseSeq } from "./publish.ts";
 * equal(parseSeq("7"), 7);
 * ```
 *
 * @module
 */

import type { PROTOCOL_VERSION } from "./subscribe.ts";

/**
 * Producer names: 1–128 printable ASCII characters, no space (they travel in a header).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { PRODUCER_PATTERN } from "./publish.ts";
 * deepStrictEqual(["feed-1", "a b"].map((p) => PRODUCER_PATTERN.test(p)), [true, false]);
 * ```
 */
export const PRODUCER_PATTERN: RegExp = /^[\x21-\x7e]{1,128}$/;

/** {@linkcode PRODUCER_PATTERN} in words, for error messages. */
export const PRODUCER_RULE = "1-128 printable ASCII characters, no space";

/** The HTTP header naming the producer of a `POST /{name}`. */
export const PRODUCER_HEADER = "streamcast-producer";
/** The HTTP header giving the sequence number of a `POST /{name}`. */
export const SEQ_HEADER = "streamcast-seq";
/** The query parameters a publish upgrade accepts. */
export const PUBLISH_PARAMS: readonly string[] = ["producer", "access_token"];

/** Default most frames a WebSocket publisher may have awaiting their ack. */
export const DEFAULT_MAX_IN_FLIGHT = 64;
/** Default most bytes of frame text awaiting their ack (one frame always may): 16 MiB. */
export const DEFAULT_MAX_IN_FLIGHT_BYTES = 16 << 20;

/**
 * The server's first frame on a publish socket.
 */
export interface PublishGreeting {
  /** The protocol version. */
  streamcast: typeof PROTOCOL_VERSION;
  /** The stream's name. */
  stream: string;
  /** The stream's id. */
  stream_id: string;
  /** Always true: this is a publish socket. */
  publish: true;
  /** The producer named in the URL, or null (at-least-once publishing). */
  producer: string | null;
  /** The producer's last committed seq (0: none). */
  last_seq: number;
  /** Frames that may await their ack at once. */
  max_in_flight: number;
  /** Bytes of frame text that may await their ack (one frame always may); older servers: absent. */
  max_in_flight_bytes?: number;
}

/**
 * A publisher's frame: rows to store in one commit, as sequence `seq`.
 */
export interface PublishFrame {
  /** The sequence number (≥ 1; increasing per producer). */
  seq: number;
  /** The rows. */
  rows: unknown[];
}

/**
 * The answer to a frame (or, without `seq`, to a `POST`): stored rows'
 * offsets, or why nothing was stored.
 */
export type PublishAnswer =
  | { seq: number; first: number; last: number; duplicate?: true }
  | { seq: number; error: "invalid_row"; index: number; detail: string }
  | { seq: number; error: "forbidden"; index: number; detail: string }
  | { seq: number; error: "stale_seq"; last_seq: number }
  | { seq: number; error: "write_failed"; detail: string }
  // The stream takes no rows while its disk is full: send it again later.
  | { seq: number; error: "disk_full"; detail: string };

/**
 * Parses a sequence number: an integer 1..2^53-1 in decimal, else null.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { parseSeq } from "./publish.ts";
 * deepStrictEqual([parseSeq("12"), parseSeq("0"), parseSeq("1e3")], [12, null, null]);
 * ```
 */
export function parseSeq(text: string): number | null {
  if (!/^[1-9][0-9]{0,15}$/.test(text)) return null;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : null;
}

/**
 * The publish socket URL of a stream's subscribe URL (`ws://H/trades` →
 * `ws://H/trades/publish`, `ws://H/` → `ws://H/_/publish`), with `producer`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { publishUrl } from "./publish.ts";
 * equal(publishUrl("ws://h:1/trades?offset=3", "p1"), "ws://h:1/trades/publish?producer=p1");
 * equal(publishUrl("http://h:1/", null), "ws://h:1/_/publish");
 * ```
 */
export function publishUrl(streamUrl: string, producer: string | null): string {
  const u = new URL(streamUrl);
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  const token = u.searchParams.get("access_token");
  u.search = "";
  const path = u.pathname.replace(/\/+$/, "");
  u.pathname = path === "" ? "/_/publish" : `${path}/publish`;
  if (producer !== null) u.searchParams.set("producer", producer);
  if (token !== null) u.searchParams.set("access_token", token);
  return u.toString();
}
