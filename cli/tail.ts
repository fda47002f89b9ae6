/**
 * `cli.ts tail`.
 *
 * ```text
 * deno run -A cli.ts tail URL[,URL…] [URL…] [--offset N|earliest | --since T] [--cursor FILE]
 * ```
 *
 * `tail` prints every row as the NDJSON line `[offset,msg]`, byte for byte as
 * the server sent it, on stdout; status goes to stderr. It exits 0 on SIGINT
 * and SIGTERM and when stdout is closed (`| head -n 5`), 1 on a refusal.
 *
 * @module
 */

import { MAX_URLS, parse, tokenSourceOf, UsageError } from "./_args.ts";
import { Progress } from "./_progress.ts";
import { S3_FLAGS, s3FlagOptions } from "./_s3_flags.ts";
import { connect, type ReconnectEvent, type Subscription } from "../client/connect.ts";
import { SubscriptionError } from "../client/errors.ts";
import { FileCursor } from "../client/file_cursor.ts";
import type { CursorStore } from "../client/cursor.ts";
import { headUrl } from "../client/head.ts";
import { parseSince } from "../wire/since.ts";
import { nodeUrls } from "../client/node_urls.ts";

const TAIL_USAGE =
  `usage: deno run -A cli.ts tail URL[,URL…] [URL…] [--offset N|earliest | --since T | --snapshot] [--cursor FILE] [--no-reconnect]

Prints the stream at URL (ws://HOST:PORT/NAME, ws://HOST:PORT/ for the unnamed
stream; http:// works too) as NDJSON: one [offset,msg] line per row, exactly as
the server sent it. Status messages go to stderr.

Several URLs (separated by commas, or as several arguments) are the stream on
several nodes — a cluster, or a primary and its followers: every node serves
reads, so tail moves to the next URL when one cannot be reached or its
connection drops, and resumes after the last row printed. Every node must
serve the same stream (stream_id); one that serves another is an error.

  --offset N|earliest  start at offset N (inclusive; 0 = the stream's first) or at
                       the earliest offset still served. Default: live, from the
                       next row.
  --since T            start at the first row appended at or after time T: RFC 3339
                       (2026-12-01T09:30:00Z) or µs since the epoch. Not with
                       --offset; a --cursor FILE that exists wins over it.
  --snapshot           a keyed stream's latest row of each key first (in offset
                       order), then every row after them, live. Not with
                       --offset or --since; a --cursor FILE that exists wins
                       over it.
  --cursor FILE        resume from FILE and keep it up to date (the next offset to
                       print, and the stream id). When FILE exists it wins over
                       --offset. A row counts as printed once written to stdout; the
                       file is saved every 10000 rows or 1 s, and on exit.
  --reconnect          after a server restart, a dropped connection or a too-slow
                       drop, reconnect with backoff and resume after the last row
                       printed. ON BY DEFAULT for tail.
  --no-reconnect       exit 1 on those instead.
  --catch-up           when the server refuses to replay that far back (too_old),
                       read the gap from its chunks over HTTP first, then
                       subscribe where they end
  --archive s3://BUCKET/PREFIX
                       with --catch-up: read rows the server no longer holds
                       (evicted) from its archive (AWS credentials from the
                       SDK's chain; --s3-endpoint URL and --s3-path-style for
                       S3-compatible stores; --s3-timeout S, default 60: a
                       request waiting that long fails)
  --token TOKEN        a bearer token for a server started with --tokens or
                       signed tokens (or the STREAMCAST_TOKEN environment
                       variable)
  --token-command CMD  run CMD (sh -c) before each connect; its output,
                       trimmed, is the token (a fresh signed token each time:
                       when one expires, tail reconnects on the next)
  --cursor-uri s3://BUCKET/KEY
                       keep a copy of the --cursor in S3, used only when FILE
                       does not exist (a new machine)
  --where JSON         only the rows this filter matches, e.g.
                       '{"symbol":["BTC-USD","ETH-USD"],"size":{"gte":1}}'
                       (equality, a list of values, gt/gte/lt/lte, prefix, null;
                       AND across columns). Offsets skip the rows left out; the
                       server refuses a filter that does not fit its columns.
  --compress           ask for zstd-compressed frames (compress=zstd: compressed
                       once by the server for every subscriber; fewer bytes on
                       the wire) and exit 1 if the server does not offer them.
                       By default tail asks for the compressed stream
                       (compress=zstd-stream: one zstd stream per group of
                       subscribers, the fewest bytes a live row), falling back
                       to frames with the stream's dictionary (zstd-dict), to
                       plain zstd and to text on a server that does not know them.
  --no-compress        ask for text frames.

Exit status: 0 on Ctrl-C (SIGINT), SIGTERM, or when stdout is closed (e.g.
| head -n 5); 1 when the server refuses the subscribe (the message says why and
what to do next) or the connection fails; 2 on a bad command line.`;

const utf8 = new TextEncoder();

/** Buffered stdout: lines are pushed, then written in one write per flush. */
class Output {
  #chunks: string[] = [];
  #size = 0;
  #chain: Promise<void> = Promise.resolve();

  get size(): number {
    return this.#size;
  }

  push(line: string): void {
    this.#chunks.push(line, "\n");
    this.#size += line.length + 1;
  }

  /** Writes what was pushed; flushes run one after another, and a failed one fails the rest. */
  flush(): Promise<void> {
    const run = async () => {
      if (this.#chunks.length === 0) return;
      const bytes = utf8.encode(this.#chunks.join(""));
      this.#chunks = [];
      this.#size = 0;
      let done = 0;
      while (done < bytes.length) done += await Deno.stdout.write(bytes.subarray(done));
    };
    this.#chain = this.#chain.then(run);
    return this.#chain;
  }
}

function isBrokenPipe(err: unknown): boolean {
  return err instanceof Deno.errors.BrokenPipe ||
    (err instanceof Error &&
      /broken pipe|EPIPE/i.test(`${(err as { code?: string }).code} ${err.message}`));
}

function parseOffset(v: unknown): number | "earliest" | undefined {
  if (v === undefined) return undefined;
  if (v === "earliest") return "earliest";
  if (typeof v === "string" && /^\d{1,16}$/.test(v) && Number.isSafeInteger(Number(v))) {
    return Number(v);
  }
  throw new UsageError(`--offset must be an integer >= 0 or "earliest", got ${v}`);
}

/** `--where JSON`: the text of a JSON object (its columns are checked by the server). */
function parseWhere(v: unknown): string | undefined {
  if (v === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(String(v));
  } catch {
    throw new UsageError(`--where must be a JSON object, got ${v} (not JSON)`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new UsageError(`--where must be a JSON object, got ${v}`);
  }
  return String(v);
}

// --since T: checked here, so a bad time is a usage error (exit 2).
function parseSinceFlag(v: unknown, offset: unknown): string | undefined {
  if (v === undefined) return undefined;
  if (offset !== undefined) throw new UsageError("give --offset or --since, not both");
  try {
    parseSince(String(v));
  } catch (err) {
    throw new UsageError(`--${(err as Error).message}`);
  }
  return String(v);
}

function describeStart(sub: Subscription): string {
  const g = sub.greeting;
  const name = g.stream === "" ? "the unnamed stream" : `stream "${g.stream}"`;
  if (!g.durable) return `${name} (ephemeral: no offsets, nothing replayable): live`;
  const id = `(stream_id ${g.stream_id})`;
  const only = (g.where ? ` (only rows where ${JSON.stringify(g.where)})` : "") +
    (g.compress ? ` (${g.compress} frames)` : "");
  if (g.snapshot) {
    return `${name} ${id}: the latest row of ${g.snapshot.keys} key(s) below offset ` +
      `${g.snapshot.end}${only}, then from ${g.snapshot.end}, live`;
  }
  if (g.replay) {
    return `${name} ${id}: replaying ${g.replay[0]}..${g.replay[1] - 1}${only}, then live`;
  }
  return `${name} ${id}: live from offset ${g.end_offset}${only}`;
}

function describeReconnect(e: ReconnectEvent): string {
  const at = e.resumeAt !== null
    ? `at offset ${e.resumeAt}`
    : "live (ephemeral stream: rows sent meanwhile are lost)";
  return `streamcast tail: ${e.error.message}\nstreamcast tail: reconnecting in ${e.delayMs} ms ` +
    `${at} (attempt ${e.attempt}) to ${e.url}`;
}

/**
 * Runs `tail` with its arguments; resolves with the exit code.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { cmdTail } from "./tail.ts";
 * import { FileCursor } from "../client/file_cursor.ts";
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("ticks", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * await stream.sendMany([{ v: 1 }, { v: 2 }]);
 * const cursor = new FileCursor(`${root}/ticks.cursor`);
 * const url = `${server.url}/ticks`;
 * const tail = cmdTail([url, "--offset", "1", "--no-reconnect", "--cursor", cursor.path]);
 * // It prints [1,{"v":1}] and [2,{"v":2}] on stdout; the cursor (saved every second) then names 3.
 * while ((await cursor.load())?.offset !== 3) await new Promise((r) => setTimeout(r, 50));
 * await server.shutdown();
 * equal(await tail, 1); // the server went away, and --no-reconnect
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export async function cmdTail(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    offset: { type: "string" },
    since: { type: "string" },
    snapshot: { type: "boolean" },
    cursor: { type: "string" },
    reconnect: { type: "boolean" },
    "no-reconnect": { type: "boolean" },
    "catch-up": { type: "boolean" },
    archive: { type: "string" },
    "cursor-uri": { type: "string" },
    ...S3_FLAGS,
    token: { type: "string" },
    "token-command": { type: "string" },
    where: { type: "string" },
    compress: { type: "boolean" },
    "no-compress": { type: "boolean" },
  }, MAX_URLS);
  if (values.help || positionals.length === 0) {
    console.log(TAIL_USAGE);
    return values.help ? 0 : 2;
  }
  if (values.reconnect && values["no-reconnect"]) {
    throw new UsageError("--reconnect and --no-reconnect contradict each other");
  }
  if (values.compress && values["no-compress"]) {
    throw new UsageError("--compress and --no-compress contradict each other");
  }
  let urls: string[];
  try {
    urls = nodeUrls(positionals, "tail");
    for (const u of urls) headUrl(u); // checks the URL's shape
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const url = urls[0];
  const offset = parseOffset(values.offset);
  const where = parseWhere(values.where);
  const token = tokenSourceOf(values);
  const since = parseSinceFlag(values.since, values.offset);
  const snapshot = values.snapshot === true;
  if (snapshot && (values.offset !== undefined || since !== undefined)) {
    throw new UsageError("--snapshot starts at the snapshot: give no --offset or --since");
  }
  const cursorPath = values.cursor as string | undefined;
  const s3opts = s3FlagOptions(values);
  const archiveUri = values.archive as string | undefined;
  const cursorUri = values["cursor-uri"] as string | undefined;
  if (archiveUri && !values["catch-up"]) throw new UsageError("--archive goes with --catch-up");
  if (cursorUri && cursorPath === undefined) {
    throw new UsageError("--cursor-uri goes with --cursor");
  }
  // The S3 client is loaded only when asked for: the SDK is large.
  const s3 = archiveUri || cursorUri ? await import("../client/s3.ts") : null;
  let cursor: CursorStore | undefined = cursorPath !== undefined
    ? new FileCursor(cursorPath)
    : undefined;
  const remote = cursorUri ? new s3!.S3Cursor(cursorUri, s3opts) : null;
  if (cursor && remote) cursor = new s3!.BackedUpCursor(cursor, remote, { uploadEveryMs: 5000 });
  const stream = new URL(url).pathname.slice(1);
  const archive = archiveUri
    ? new s3!.S3ChunkSource({ uri: archiveUri, ...s3opts }, decodeURIComponent(stream))
    : null;

  const out = new Output();
  const ac = new AbortController();
  const onSignal = () => ac.abort(new DOMException("interrupted by a signal", "AbortError"));
  const signals: Deno.Signal[] = Deno.build.os === "windows" ? ["SIGINT"] : ["SIGINT", "SIGTERM"];
  for (const s of signals) Deno.addSignalListener(s, onSignal);
  let sub: Subscription | null = null;
  let catchingUp: { progress: Progress; rows: number } | null = null;
  try {
    if (cursor) {
      const saved = await cursor.load();
      if (saved) {
        console.error(
          `streamcast tail: resuming from ${cursorPath} at offset ${saved.offset}` +
            (offset !== undefined ? " (the cursor wins over --offset)" : "") +
            (since !== undefined ? " (the cursor wins over --since)" : ""),
        );
      }
    }
    sub = await connect(urls, {
      offset,
      ...(since !== undefined ? { since } : {}),
      ...(snapshot ? { snapshot } : {}),
      cursor,
      reconnect: !values["no-reconnect"],
      signal: ac.signal,
      beforeSave: () => out.flush(),
      onReconnect: (e) => console.error(describeReconnect(e)),
      ...(values["catch-up"] ? { catchUp: { archive } } : {}),
      ...(token ? { token } : {}),
      ...(where !== undefined ? { where } : {}),
      ...(values.compress ? { compress: "zstd" as const } : {}),
      ...(values["no-compress"] ? { compress: false as const } : {}),
    });
    console.error(`streamcast tail: ${describeStart(sub)}`);
    // With --catch-up, the rows up to the head at the start, counted on one
    // redrawn line when stderr is a terminal (never in a pipe or a log).
    const replay = values["catch-up"] ? sub.greeting.replay : null;
    catchingUp = replay ? { progress: new Progress("tail: catching up"), rows: 0 } : null;
    for await (const [, line] of sub.lines()) {
      out.push(line);
      if (catchingUp !== null) {
        const at = sub.lastOffset;
        catchingUp.progress.update({ rows: ++catchingUp.rows, offset: at, total: replay![1] - 1 });
        if (at !== null && at >= replay![1] - 1) {
          if (catchingUp.progress.drawn) catchingUp.progress.done();
          catchingUp = null;
        }
      }
      // Write when nothing more is ready, or in 64 KiB pieces.
      if (sub.buffered === 0 || out.size >= 1 << 16) await out.flush();
    }
    await out.flush();
    return 0;
  } catch (err) {
    if (ac.signal.aborted) {
      await out.flush().catch(() => {});
      return 0;
    }
    if (isBrokenPipe(err)) return 0;
    if (err instanceof SubscriptionError) {
      await out.flush().catch(() => {});
      console.error(`streamcast tail: ${err.message}`);
      return 1;
    }
    if (
      err instanceof TypeError || err instanceof RangeError ||
      err instanceof Deno.errors.PermissionDenied
    ) {
      console.error(`streamcast tail: ${err.message}`);
      return 1;
    }
    throw err;
  } finally {
    if (catchingUp?.progress.drawn) catchingUp.progress.done();
    for (const s of signals) Deno.removeSignalListener(s, onSignal);
    await sub?.close().catch(() => {});
    if (cursor && "close" in cursor) await (cursor as { close(): Promise<void> }).close();
    remote?.close();
    archive?.close();
  }
}
