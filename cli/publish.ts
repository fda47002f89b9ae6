/**
 * `cli.ts publish URL`: NDJSON rows from stdin into a stream, over its
 * publish socket, pipelined, acknowledged once durable (docs/SPEC.md §9).
 *
 * ```text
 * deno run -A cli.ts publish ws://127.0.0.1:8765/trades --producer feed-1 < trades.ndjson
 * ```
 *
 * Frames are numbered by stdin line: a frame's seq is the line number of its
 * last row. With `--producer ID`, a rerun over the same input skips the
 * lines the server says are stored (its `last_seq`) and sends the rest; a
 * reconnect resends what was not acknowledged, from `last_seq + 1`. Either
 * way no row is stored twice. Given several URLs (a cluster's nodes), it
 * finds the node that takes the publish itself (client/publisher.ts).
 *
 * @module
 */

import { MAX_URLS, parse, tokenSourceOf, UsageError } from "./_args.ts";
import {
  DEFAULT_DISK_FULL_TIMEOUT_MS,
  DISK_FULL_HOLD_MAX_MS,
  DISK_FULL_HOLD_MIN_MS,
  type Published,
  publisher,
  PublishError,
} from "../client/publisher.ts";
import { nodeUrls } from "../client/node_urls.ts";

const USAGE =
  `usage: deno run -A cli.ts publish URL[,URL…] [URL…] [--producer ID] [--batch N] [--acks] [--token TOKEN | --token-command CMD]

Reads NDJSON rows from stdin (one JSON object per line; blank lines are
skipped) and publishes them to the stream at URL (ws://HOST:PORT/NAME, or
http://…; ws://HOST:PORT/ for the unnamed stream) over its publish socket,
pipelined. The server must be started with --publish NAME.

Several URLs (separated by commas, or as several arguments) are the stream
on the nodes of a cluster: publish finds the leader itself — it follows a
follower's redirect (at most --max-redirects hops), and when a node answers
503 (no_leader, not_enough_replicas) or cannot be reached it tries the next,
with backoff, resending what was not acknowledged (never stored twice with
--producer).

  --producer ID   the producer's name (1-128 printable ASCII, no space). Frames
                  are numbered by stdin line (a frame's seq is the line number
                  of its last row), so a rerun with the same ID over the same
                  input skips the first last_seq lines (already stored) and
                  sends the rest: no row is stored twice. Default: a random
                  name for this run (retries within the run are still safe).
  --batch N       rows per frame, at most [100]; a frame also goes as soon as
                  stdin has nothing more buffered.
  --acks          print one line per acknowledged frame on stdout:
                  {"seq":S,"first":F,"last":L}.
  --token TOKEN   a bearer token with a "publish" grant (or STREAMCAST_TOKEN).
  --token-command CMD
                  run CMD (sh -c) before each connect; its output, trimmed,
                  is the token (a fresh signed token each time: when one
                  expires, publish reconnects on the next).
  --no-reconnect  exit 1 when the connection drops, instead of reconnecting
                  with backoff and resending what was not acknowledged.
  --retry-timeout-ms MS
                  give up (exit 1, naming each URL and what it answered last)
                  after MS milliseconds without a node that takes the publish
                  [60000].
  --max-redirects N
                  most redirects followed from one URL [5].
  --disk-full-timeout-ms MS
                  a frame the server refuses for a full disk is held and sent
                  again with backoff (${DISK_FULL_HOLD_MIN_MS} ms doubling to ${
    DISK_FULL_HOLD_MAX_MS / 1000
  } s) for at most MS
                  milliseconds, then refused (exit 1); 0: refused at once
                  [60000].

A frame whose answer was lost across a reconnect, after which the server
had stored later lines, is named on stderr and the rest is sent: its lines
are stored unless one was refused, and a rerun with the same --producer
sends only the lines after the server's last_seq.

Exit status: 0 once every row is acknowledged; 1 when a row is refused (the
message names its stdin line; frames sent before the refusal answer may
still be stored), a frame's answer was lost as above, or the connection
fails; 2 on a bad command line.`;

const MAX_OUTSTANDING = 1024;

// An integer flag from `min` to `max`, or `fallback` when absent.
function intFlag(
  values: Record<string, unknown>,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const text = values[name] as string | undefined;
  if (text === undefined) return fallback;
  const n = /^\d{1,9}$/.test(text) ? Number(text) : NaN;
  if (!(n >= min && n <= max)) {
    throw new UsageError(`--${name} must be an integer ${min}-${max}, got ${JSON.stringify(text)}`);
  }
  return n;
}

/**
 * Runs `publish`; resolves with the exit code.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { cmdPublish } from "./publish.ts";
 * equal(await cmdPublish(["--help"]), 0); // after printing the usage on stdout
 * ```
 */
export async function cmdPublish(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    producer: { type: "string" },
    batch: { type: "string" },
    acks: { type: "boolean" },
    token: { type: "string" },
    "token-command": { type: "string" },
    "no-reconnect": { type: "boolean" },
    "retry-timeout-ms": { type: "string" },
    "max-redirects": { type: "string" },
    "disk-full-timeout-ms": { type: "string" },
  }, MAX_URLS);
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (positionals.length === 0) throw new UsageError("publish takes a URL (or several)");
  const retryTimeoutMs = intFlag(values, "retry-timeout-ms", 60_000, 1, 86_400_000);
  const maxRedirects = intFlag(values, "max-redirects", 5, 0, 100);
  const diskFullTimeoutMs = intFlag(
    values,
    "disk-full-timeout-ms",
    DEFAULT_DISK_FULL_TIMEOUT_MS,
    0,
    86_400_000,
  );
  const batchText = (values.batch as string | undefined) ?? "100";
  const batch = /^\d+$/.test(batchText) ? Number(batchText) : NaN;
  if (!Number.isInteger(batch) || batch < 1 || batch > 1_000_000) {
    throw new UsageError(`--batch must be an integer 1-1000000, got ${JSON.stringify(batchText)}`);
  }
  let urls: string[];
  try {
    urls = nodeUrls(positionals, "publish");
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const token = tokenSourceOf(values);
  const producer = values.producer as string | undefined;
  if (producer !== undefined && !/^[\x21-\x7e]{1,128}$/.test(producer)) {
    throw new UsageError("--producer must be 1-128 printable ASCII characters, no space");
  }
  let pub;
  try {
    pub = await publisher(urls, {
      retryTimeoutMs,
      maxRedirects,
      diskFullTimeoutMs,
      ...(producer !== undefined ? { producer } : {}),
      ...(token ? { token } : {}),
      reconnect: !values["no-reconnect"],
      onReconnect: (last) =>
        console.error(`publish: reconnected; the server holds through seq ${last}`),
    });
  } catch (err) {
    console.error(`streamcast publish: ${err instanceof Error ? err.message : err}`);
    return 1;
  }
  const skip = producer !== undefined ? pub.nextSeq - 1 : 0;
  if (skip > 0) {
    console.error(
      `publish: producer ${producer} holds through line ${skip}; sending the lines after it`,
    );
  }
  const acks = values.acks === true;
  const enc = new TextEncoder();
  let refused: string | null = null;
  let failed: string | null = null;
  let lost = 0;
  const outstanding: Promise<void>[] = [];
  const send = (rows: unknown[], lines: number[]) => {
    const p = pub.publish(rows, lines[lines.length - 1]).then(
      (a: Published) => {
        if (acks) {
          Deno.stdout.writeSync(
            enc.encode(JSON.stringify({ seq: a.seq, first: a.first, last: a.last }) + "\n"),
          );
        }
      },
      (err: unknown) => {
        if (err instanceof PublishError && err.error === "invalid_row" && err.index !== null) {
          refused ??= `line ${lines[err.index]}: ${err.message}`;
        } else if (err instanceof PublishError && err.error === "answer_lost") {
          lost++;
          console.error(
            `publish: lines ${lines[0]}-${lines[lines.length - 1]}: ${err.message}`,
          );
        } else failed ??= err instanceof Error ? err.message : String(err);
      },
    );
    outstanding.push(p);
  };
  let rows: unknown[] = [];
  let lines: number[] = [];
  const flush = () => {
    if (rows.length > 0) send(rows, lines);
    rows = [];
    lines = [];
  };
  const dec = new TextDecoder();
  let carry = "";
  let line = 0;
  const take = (text: string): boolean => {
    line++;
    if (line <= skip) return true;
    const t = text.endsWith("\r") ? text.slice(0, -1) : text;
    if (t.trim() === "") return true;
    let row: unknown;
    try {
      row = JSON.parse(t);
    } catch {
      refused ??= `line ${line}: not JSON`;
      flush();
      return false;
    }
    rows.push(row);
    lines.push(line);
    if (rows.length >= batch) flush();
    return true;
  };
  reading: for await (const chunk of Deno.stdin.readable) {
    const text = carry + dec.decode(chunk, { stream: true });
    const parts = text.split("\n");
    carry = parts.pop()!;
    for (const part of parts) if (!take(part) || refused || failed) break reading;
    flush();
    while (outstanding.length > MAX_OUTSTANDING) await outstanding.shift();
  }
  if (!refused && !failed && carry !== "") take(carry);
  // The rows read before a line that is not JSON are sent; none after it.
  if (!failed) flush();
  await Promise.all(outstanding);
  await pub.close().catch(() => {});
  if (refused) {
    console.error(`streamcast publish: refused at ${refused}`);
    return 1;
  }
  if (failed) {
    console.error(`streamcast publish: ${failed}`);
    return 1;
  }
  if (lost > 0) {
    console.error(
      `streamcast publish: the answers of ${lost} frame(s) were lost across a reconnect ` +
        `(named above); every other row is acknowledged`,
    );
    return 1;
  }
  return 0;
}
