/**
 * Ingest from an upstream WebSocket (`serve --upstream NAME=URL`): each text
 * frame one row, or the rows a handler makes of it; reconnects with capped
 * exponential backoff plus jitter.
 *
 * @module
 */

import { backoffDelay, sleep } from "../../common/backoff.ts";
import { decodeLine, lossyUtf8 } from "./_decode.ts";
import { errorMessage, eventsTo, Feeder } from "./_feeder.ts";
import type { FrameHandler } from "./handler.ts";
import type { IngestOptions, IngestSink, IngestStats } from "./options.ts";
import { DiskFullError } from "../stream/disk_gate.ts";

/**
 * Options of {@linkcode ingestUpstream}.
 */
export interface UpstreamOptions extends IngestOptions {
  /** Turns each frame into rows; without one, each frame is `JSON.parse`d into one row. */
  handler?: FrameHandler;
  /**
   * The delay before the first reconnect after a connection that delivered frames.
   *
   * @default {250}
   */
  minBackoffMs?: number;
  /**
   * The cap of the doubling reconnect delay.
   *
   * @default {10000}
   */
  maxBackoffMs?: number;
  /** WebSocket subprotocols to offer. */
  protocols?: string[];
  /**
   * Frames received but not yet handled (a slow async handler, a slow sink)
   * beyond which the connection is closed to shed load; the queued frames are
   * still handled, and the reconnect waits until they are.
   *
   * @default {65536}
   */
  maxQueuedFrames?: number;
  /** Called each time a connection opens. */
  onOpen?(): void;
  /** Called each time an open connection closes. */
  onClose?(): void;
}

interface Outcome {
  opened: boolean;
  productive: boolean;
  code: number;
  reason: string;
  error: string | undefined;
}

const SECRET_PARAM = /token|key|secret|pass|auth|sig|cred|session/i;

/** `url` without userinfo, with the values of secret-looking query parameters hidden. */
function redactUrl(url: URL): string {
  const shown = new URL(url.href);
  shown.username = "";
  shown.password = "";
  if ([...shown.searchParams.keys()].some((key) => SECRET_PARAM.test(key))) {
    for (const key of new Set(shown.searchParams.keys())) {
      if (SECRET_PARAM.test(key)) shown.searchParams.set(key, "REDACTED");
    }
  }
  return shown.href;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === "object" && value !== null &&
    typeof (value as { then?: unknown }).then === "function";
}

function checkMs(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(`Cannot ingest with ${name} ${value}: need a finite number ≥ 0`);
  }
  return value;
}

/**
 * Connects to the WebSocket at `url` and sends every frame's rows to `sink`:
 * each text frame (binary frames are decoded as UTF-8) is `JSON.parse`d into
 * one row, or given to `handler`. Bad frames are rejects as in
 * `ingestLines`, numbered across reconnects. On any disconnect it
 * reconnects with capped exponential backoff plus jitter, until `signal`
 * aborts; then it closes the socket, clears its timers, and resolves once sent
 * rows have settled (frames received but not yet handled are dropped and
 * reported). Connects and disconnects are reported as events (see `IngestEvent`), with the URL
 * stripped of credentials. A sink rejection other than `RowError` or
 * `RangeError` (see {@linkcode IngestSink.send}) stops it and is thrown.
 * Throws `TypeError` at once for a URL that is not ws(s) or http(s).
 *
 * @example
 * ```ts
 * import { ingestUpstream } from "./upstream.ts";
 * import { loadHandler } from "./handler.ts";
 * import type { IngestSink } from "./options.ts";
 * import { rejectFile } from "./reject_file.ts";
 *
 * // What `serve --upstream trades=wss://feed.example/v1 --handler ./feed.ts` runs
 * // (needs --allow-net and --allow-read/--allow-write; called by the server):
 * export async function feedTrades(sink: IngestSink, signal: AbortSignal): Promise<void> {
 *   const rejects = await rejectFile("data/trades/rejects.ndjson");
 *   try {
 *     const stats = await ingestUpstream("wss://user:pw@feed.example/v1", sink, {
 *       handler: await loadHandler("./feed.ts"),
 *       onReject: rejects,
 *       signal,
 *     });
 *     console.error(`${stats.accepted} rows from ${stats.lines} frames`);
 *   } finally {
 *     await rejects.close();
 *   }
 * }
 * ```
 */
export async function ingestUpstream(
  url: string,
  sink: IngestSink,
  options: UpstreamOptions = {},
): Promise<IngestStats> {
  const target = new URL(url);
  const shown = redactUrl(target);
  if (!["ws:", "wss:", "http:", "https:"].includes(target.protocol)) {
    throw new TypeError(
      `Cannot ingest from upstream ${shown}: the URL must be ws://, wss://, http:// or https://`,
    );
  }
  // Runtime error messages may quote the URL; keep the credentials out of logs.
  const hide = (text: string): string => {
    let out = text.replaceAll(url, shown).replaceAll(target.href, shown);
    if (target.password) out = out.replaceAll(target.password, "REDACTED");
    return out;
  };
  const minBackoffMs = checkMs("minBackoffMs", options.minBackoffMs ?? 250);
  const maxBackoffMs = Math.max(
    minBackoffMs,
    checkMs("maxBackoffMs", options.maxBackoffMs ?? 10_000),
  );
  const maxQueuedFrames = options.maxQueuedFrames ?? 65_536;
  if (!Number.isInteger(maxQueuedFrames) || maxQueuedFrames < 1) {
    throw new RangeError(
      `Cannot ingest with maxQueuedFrames ${maxQueuedFrames}: need an integer ≥ 1`,
    );
  }
  const emit = eventsTo(options);
  const handler = options.handler;
  const stream = `stream "${sink.name}"`;

  // Aborted by the caller's signal or by a fatal sink error: stops everything.
  const halt = new AbortController();
  const onAbort = (): void => halt.abort();
  // A full disk: the stream took no rows from `sinceMs` on; the rows it
  // refused are dropped (counted), and the connection is closed until it
  // takes rows again (then reconnected, saying what was missed).
  let paused: { sinceMs: number; rows: number; detail: string } | null = null;
  let closeForDisk: (() => void) | null = null;
  const feeder = new Feeder(sink, options, (n) => `upstream ${shown} frame ${n}`, onAbort, {
    source: "upstream",
    url: shown,
  }, {
    resend: false,
    dropped: (rows, error) => {
      if (paused === null) {
        const detail = error instanceof DiskFullError ? error.detail : errorMessage(error);
        paused = { sinceMs: Date.now(), rows: 0, detail };
        emit({
          event: "upstream_paused",
          stream: sink.name,
          url: shown,
          detail,
          msg: `streamcast: upstream ${shown} for ${stream}: the stream takes no rows (its ` +
            `disk is full: ${detail}); disconnecting until it does`,
        });
        closeForDisk?.();
      }
      paused.rows += rows;
    },
  });
  // Once the stream takes rows again: says what was missed, and reconnects at once.
  const resume = async (): Promise<void> => {
    await Promise.race([sink.ready?.() ?? sleep(1000), halted]);
    // Frames of the last connection first: they are dropped or stored in order.
    if (running !== undefined) await running;
    const p = paused!;
    paused = null;
    if (halt.signal.aborted) return;
    const from = new Date(p.sinceMs).toISOString();
    const to = new Date().toISOString();
    emit({
      event: "upstream_resumed",
      stream: sink.name,
      url: shown,
      missedFrom: from,
      missedTo: to,
      dropped: p.rows,
      msg: `streamcast: upstream ${shown} for ${stream}: the stream takes rows again; ` +
        `reconnecting. Missed the feed from ${from} to ${to} (${p.rows} rows received and ` +
        "not stored, and what the upstream sent while disconnected)",
    });
  };
  options.signal?.addEventListener("abort", onAbort, { once: true });
  if (options.signal?.aborted) onAbort();
  const halted = new Promise<void>((resolve) => {
    if (halt.signal.aborted) resolve();
    halt.signal.addEventListener("abort", () => resolve(), { once: true });
  });

  // Frames received and not yet handled; handled one at a time, in order.
  let frames: (string | ArrayBuffer | undefined)[] = [];
  let head = 0;
  let handling = false;
  let running: Promise<void> | undefined;

  const handleFrames = async (): Promise<void> => {
    handling = true;
    try {
      while (head < frames.length && !halt.signal.aborted) {
        const data = frames[head]!;
        frames[head++] = undefined;
        if (head > 4096 && head * 2 > frames.length) {
          frames = frames.slice(head);
          head = 0;
        }
        const n = ++feeder.stats.lines;
        let text: string;
        if (typeof data === "string") {
          text = data;
        } else {
          const decoded = decodeLine(new Uint8Array(data));
          if (decoded === undefined) {
            feeder.reject(n, lossyUtf8.decode(data), "binary frame is not valid UTF-8");
            continue;
          }
          text = decoded;
        }
        let out: unknown;
        try {
          if (handler === undefined) {
            out = JSON.parse(text);
          } else {
            out = handler(text);
            if (isThenable(out)) out = await out;
          }
        } catch (error) {
          feeder.reject(n, text, (handler ? "handler threw: " : "") + errorMessage(error));
          continue;
        }
        if (handler !== undefined) {
          if (out === null) continue;
          if (out === undefined) {
            feeder.reject(n, text, "handler returned undefined (return null to skip a frame)");
            continue;
          }
          if (Array.isArray(out)) {
            for (const row of out) {
              if (halt.signal.aborted) break;
              feeder.send(n, text, row);
              if (feeder.full) await feeder.room();
            }
            continue;
          }
        }
        feeder.send(n, text, out);
        if (feeder.full) await feeder.room();
      }
    } finally {
      // Reset in the same synchronous step as the loop's last check, so a frame
      // pushed after it starts a new loop rather than waiting behind this one.
      handling = false;
    }
    if (head === frames.length) {
      frames = [];
      head = 0;
    }
  };

  const enqueue = (data: string | ArrayBuffer): void => {
    frames.push(data);
    if (handling) return;
    const run = handleFrames().catch((error) => feeder.fail(error)).finally(() => {
      if (running === run) running = undefined;
    });
    running = run;
  };

  const connectOnce = (): Promise<Outcome> =>
    new Promise((resolve) => {
      let ws: WebSocket;
      try {
        ws = new WebSocket(url, options.protocols);
      } catch (error) {
        // The URL was checked, so this is a bad `protocols`: retrying cannot help.
        feeder.fail(error);
        resolve({ opened: false, productive: false, code: 0, reason: "", error: undefined });
        return;
      }
      ws.binaryType = "arraybuffer";
      let opened = false;
      let productive = false;
      let error: string | undefined;
      const close = (): void => ws.close(1000);
      halt.signal.addEventListener("abort", close, { once: true });
      ws.onopen = () => {
        opened = true;
        closeForDisk = () => ws.close(1000, "disk full");
        if (paused !== null) closeForDisk();
        emit({
          event: "upstream_connected",
          stream: sink.name,
          url: shown,
          msg: `streamcast: upstream ${shown} connected for ${stream}`,
        });
        try {
          options.onOpen?.();
        } catch (error) {
          feeder.fail(error);
        }
      };
      ws.onmessage = (event: MessageEvent<string | ArrayBuffer>) => {
        productive = true;
        enqueue(event.data);
        if (frames.length - head > maxQueuedFrames && ws.readyState === WebSocket.OPEN) {
          const queued = frames.length - head;
          emit({
            event: "upstream_backlog",
            stream: sink.name,
            url: shown,
            queued,
            limit: maxQueuedFrames,
            msg: `streamcast: upstream ${shown} for ${stream}: ${queued} frames ` +
              `queued behind ingest (limit ${maxQueuedFrames}); disconnecting to shed load`,
          });
          ws.close(1000, "ingest backlog");
        }
      };
      ws.onerror = (event) => {
        error = event instanceof ErrorEvent ? hide(event.message) : "error";
      };
      ws.onclose = (event) => {
        halt.signal.removeEventListener("abort", close);
        closeForDisk = null;
        ws.onopen =
          ws.onmessage =
          ws.onerror =
          ws.onclose =
            null;
        if (opened) {
          try {
            options.onClose?.();
          } catch (error) {
            feeder.fail(error);
          }
        }
        resolve({ opened, productive, code: event.code, reason: event.reason, error });
      };
    });

  let failures = 0;
  try {
    while (!halt.signal.aborted) {
      const outcome = await connectOnce();
      if (halt.signal.aborted) break;
      if (paused !== null) {
        await resume();
        failures = 0;
        continue;
      }
      failures = outcome.productive ? 0 : failures + 1;
      const delayMs = Math.max(
        minBackoffMs,
        backoffDelay(failures + 1, minBackoffMs, maxBackoffMs),
      );
      const wait = delayMs < 1000
        ? `${Math.round(delayMs)} ms`
        : `${(delayMs / 1000).toFixed(1)} s`;
      if (outcome.opened) {
        const why = [`code ${outcome.code || 1006}`];
        if (outcome.reason) why.push(JSON.stringify(outcome.reason));
        if (outcome.error) why.push(outcome.error);
        emit({
          event: "upstream_disconnected",
          stream: sink.name,
          url: shown,
          code: outcome.code || 1006,
          reason: outcome.reason,
          error: outcome.error,
          delayMs,
          msg: `streamcast: upstream ${shown} disconnected for ${stream} (${why.join(", ")}); ` +
            `reconnecting in ${wait}`,
        });
      } else {
        emit({
          event: "upstream_connect_failed",
          stream: sink.name,
          url: shown,
          code: outcome.code,
          error: outcome.error,
          delayMs,
          msg: `streamcast: upstream ${shown} for ${stream} failed to connect ` +
            `(${outcome.error ?? `code ${outcome.code}`}); retrying in ${wait}`,
        });
      }
      await sleep(delayMs, halt.signal);
      // Frames of the last connection first: keeps order, and sheds load.
      if (running !== undefined) await running;
    }
  } finally {
    options.signal?.removeEventListener("abort", onAbort);
  }
  if (running !== undefined) await running;
  const dropped = frames.length - head;
  frames = [];
  head = 0;
  if (dropped > 0) {
    emit({
      event: "upstream_frames_dropped",
      stream: sink.name,
      url: shown,
      dropped,
      msg:
        `streamcast: upstream ${shown} for ${stream}: ${dropped} received frames dropped at stop`,
    });
  }
  await feeder.drain();
  const { accepted, rejected } = feeder.stats;
  emit({
    event: "upstream_stopped",
    stream: sink.name,
    url: shown,
    accepted,
    rejected,
    msg: `streamcast: upstream ${shown} stopped for ${stream} ` +
      `(${accepted} rows accepted, ${rejected} rejected)`,
  });
  return { ...feeder.stats };
}
