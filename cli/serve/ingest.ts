/**
 * `serve`'s ingest: the handler modules loaded before the start
 * ({@linkcode loadHandlers}), then stdin and every upstream fed into their
 * streams ({@linkcode startIngest}), their events written through the
 * server's logger, their rejects counted and appended to
 * `ROOT/NAME/rejects.ndjson`.
 *
 * @module
 */

import { join } from "node:path";
import type { Logger } from "../../common/logger.ts";
import {
  type FrameHandler,
  type IngestEvent,
  ingestLines,
  ingestUpstream,
  loadHandler,
  MAX_LINE_BYTES,
  type RejectFile,
  rejectFile,
  type RejectRecord,
  type RejectSink,
} from "../../server/ingest/mod.ts";
import type { Server } from "../../server/serve.ts";
import { type LeadingNode, whileLeading } from "../../server/member/while_leading.ts";
import { Fatal, oneLine, show } from "./fatal.ts";
import type { Settings } from "./run_settings.ts";

/**
 * Every handler module the upstreams use, by path, loaded before anything is
 * opened; a {@linkcode Fatal} (exit 2) for one that does not load.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { loadHandlers } from "./ingest.ts";
 * import { settingsFrom } from "./config.ts";
 * const s = await settingsFrom({ stream: ["t=t.json"] });
 * equal((await loadHandlers(s)).size, 0); // no upstream, no handler
 * ```
 */
export async function loadHandlers(s: Settings): Promise<Map<string, FrameHandler>> {
  const loaded = new Map<string, FrameHandler>();
  for (const up of s.upstreams.values()) {
    const path = up.handler ?? s.handler;
    if (path === null || loaded.has(path)) continue;
    try {
      loaded.set(path, await loadHandler(path));
    } catch (err) {
      throw new Fatal(oneLine(err), 2);
    }
  }
  return loaded;
}

/**
 * A reject sink appending to `path`, opened at the first reject so that a
 * clean feed leaves no empty file behind.
 */
function lazyRejects(path: string): RejectSink & { close(): Promise<void> } {
  let file: Promise<RejectFile> | undefined;
  const sink = (rec: RejectRecord): Promise<void> =>
    (file ??= rejectFile(path)).then((f) => f(rec));
  const close = async (): Promise<void> => {
    // A file that failed to open has failed its ingest, which said so.
    const opened = await file?.catch(() => undefined);
    await opened?.close();
  };
  return Object.assign(sink, { close });
}

/**
 * The ingest tasks of a running `serve`.
 */
export interface Ingest {
  /** Stops every ingest; resolves once each has settled what it sent. */
  stopIngest(): Promise<void>;
  /** Resolves with a message when an ingest fails for a reason other than a bad row. */
  failed: Promise<string>;
  /** The first ingest failure, or null. */
  failure(): string | null;
  /** Closes the rejects files. */
  closeRejects(): Promise<void>;
}

/**
 * Writes an ingest's events as `serve`'s log events: `ingest_reject` (warn;
 * in text the ingest's own line, and at debug `ingest_reject_input` with the
 * raw input; in JSON the fields, the raw input only at debug), and `ingest`
 * (info, the line as `msg`) for the rest.
 */
function logEvents(
  logger: Logger,
  stream: string,
  source: "stdin" | "upstream",
): (e: IngestEvent) => void {
  return (e) => {
    if (e.event !== "reject") {
      logger.info("ingest", {}, e.msg);
    } else if (logger.format === "json") {
      logger.warn("ingest_reject", {
        stream,
        source,
        line: e.line,
        error: e.error,
        // The raw input only at debug: it may be anything, of any size.
        input: logger.enabled("debug") ? e.input : undefined,
      });
    } else {
      logger.warn("ingest_reject", {}, e.msg);
      if (logger.enabled("debug")) {
        logger.debug("ingest_reject_input", { stream, source, line: e.line, input: e.input });
      }
    }
  };
}

/**
 * Starts feeding stdin and the upstreams into `server`'s streams; the
 * upstream of a stream a cluster node runs (`nodes`) only while that node
 * leads it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { startIngest } from "./ingest.ts";
 * import { settingsFrom } from "./config.ts";
 * import { Logger } from "../../common/logger.ts";
 * import { serve, Stream } from "../../mod.ts";
 * const stream = Stream.ephemeral("t", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * const s = await settingsFrom({ stream: ["t=t.json"] }); // no --stdin, no --upstream
 * const ingest = startIngest(s, server, new Map(), Logger.silent());
 * await ingest.stopIngest();
 * equal(ingest.failure(), null);
 * await server.shutdown();
 * ```
 */
export function startIngest(
  s: Settings,
  server: Server,
  handlers: Map<string, FrameHandler>,
  logger: Logger,
  nodes?: ReadonlyMap<string, LeadingNode>,
): Ingest {
  const stop = new AbortController();
  const tasks: Promise<void>[] = [];
  let first: string | null = null;
  let resolveFailed!: (message: string) => void;
  const failed = new Promise<string>((resolve) => (resolveFailed = resolve));
  const fail = (message: string) => {
    first ??= message;
    resolveFailed(first);
  };
  const rejects = server.metrics.counter(
    "streamcast_ingest_rejects_total",
    "Input lines and upstream frames rejected (not JSON, too big, refused by the schema or " +
      "the handler).",
  );
  const files = new Map<string, ReturnType<typeof lazyRejects>>();
  const onReject = (name: string, source: "stdin" | "upstream"): RejectSink => {
    const labels = { stream: name, source };
    rejects.inc(labels, 0);
    let file = files.get(name);
    if (!file) {
      file = lazyRejects(join(s.root, name === "" ? "_" : name, "rejects.ndjson"));
      files.set(name, file);
    }
    const f = file;
    return (rec) => {
      rejects.inc(labels);
      return f(rec);
    };
  };
  const watch = (what: string, task: Promise<unknown>) => {
    tasks.push(task.then(
      () => {},
      (err) => fail(`${what} failed: ${oneLine(err)}`),
    ));
  };
  if (s.stdin !== null) {
    const stream = server.streams.get(s.stdin)!;
    watch(
      `ingest from stdin into ${show(s.stdin)}`,
      // Read into one buffer, reused: no chunk allocated a read.
      ingestLines(Deno.stdin, stream, {
        // A line longer than any row could be is refused before it is parsed.
        maxLineBytes: Math.max(MAX_LINE_BYTES, s.maxRowBytes ?? 0),
        onReject: onReject(s.stdin, "stdin"),
        onEvent: logEvents(logger, s.stdin, "stdin"),
        signal: stop.signal,
      }),
    );
  }
  for (const [name, up] of s.upstreams) {
    const handlerPath = up.handler ?? s.handler;
    const sink = onReject(name, "upstream");
    const run = (signal: AbortSignal) =>
      ingestUpstream(up.url, server.streams.get(name)!, {
        handler: handlerPath === null ? undefined : handlers.get(handlerPath),
        onReject: sink,
        onEvent: logEvents(logger, name, "upstream"),
        signal,
      });
    // A cluster's stream: only its leader connects the upstream.
    const node = nodes?.get(name);
    watch(
      `ingest from the upstream of ${show(name)}`,
      node ? whileLeading(node, run, stop.signal) : run(stop.signal),
    );
  }
  return {
    async stopIngest() {
      stop.abort();
      await Promise.all(tasks);
    },
    failed,
    failure: () => first,
    async closeRejects() {
      await Promise.all([...files.values()].map((f) => f.close()));
    },
  };
}
