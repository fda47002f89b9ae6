/**
 * A mirror's live tail: ONE batched subscription (`frames=batch`) to the
 * primary from the replica's end, with the replica's `stream_id`. Each
 * received frame is parsed into offsets and the rows' JSON exactly as sent
 * (the bytes between `[offset,` and `]`), and handed to `write`, which makes
 * it durable locally before the next frame is taken: one local commit per
 * received frame, so the mirror's own batched frames line up with the
 * primary's — unless frames queue behind a slow commit: those are written as
 * one commit, so a mirror under load does fewer syncs and fan-outs, not
 * more.
 *
 * @module
 */

import { type Greeting, splitBatch } from "../../wire/subscribe.ts";
import { decodeCloseReason } from "../../wire/close_reason.ts";

/** Most rows of queued frames written in one commit. */
export const MAX_GROUP_ROWS = 65_536;

/** How a tail ended. */
export interface TailEnd {
  /** The close code (1006 when the connection failed without one). */
  code: number;
  /** The close reason, decoded (null when none or not JSON). */
  reason: Record<string, unknown> | null;
  /** Whether the greeting arrived (the subscription was accepted). */
  greeted: boolean;
  /** The failure, when the end was ours (a bad frame, a failed write). */
  error?: string;
}

/** What {@linkcode runTail} is given. */
export interface TailOptions {
  /** The primary's `ws://…/NAME` URL, without query. */
  url: string;
  /** The bearer token, passed as `access_token` (a WebSocket cannot set headers everywhere). */
  token: string | null;
  /** The first offset wanted (the replica's end). */
  from: number;
  /** The replica's stream id. */
  streamId: string;
  /** The greeting arrived: false from it stops the tail (a greeting not for this replica). */
  greeted(g: Greeting): boolean;
  /** Makes rows durable (and serves them); awaited before the next frame is taken. */
  write(offsets: number[], jsons: string[]): Promise<void>;
  /** Frames received and not yet written, beyond which the tail is closed and reopened later. */
  maxQueuedFrames: number;
  /** Stops the tail. */
  signal: AbortSignal;
}

const OFFSET_TEXT = /^[1-9][0-9]{0,15}$/;

/**
 * Offsets and JSON of the `[offset,msg]` lines of one batched frame; throws
 * a `TypeError` naming the line unless each offset is written as a decimal
 * integer ≥ 1 (safe) and each `msg` is JSON of an object (a row): a primary
 * that sends anything else is not stored from.
 */
export function parseFrame(text: string): { offsets: number[]; jsons: string[] } {
  const lines = splitBatch(text);
  const offsets: number[] = new Array(lines.length);
  const jsons: string[] = new Array(lines.length);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const comma = line.indexOf(",");
    const digits = line.slice(1, comma);
    const offset = Number(digits);
    if (
      line[0] !== "[" || line[line.length - 1] !== "]" || comma < 2 ||
      !OFFSET_TEXT.test(digits) || !Number.isSafeInteger(offset)
    ) {
      throw new TypeError(`not an [offset,msg] line: ${JSON.stringify(line.slice(0, 80))}`);
    }
    const json = line.slice(comma + 1, line.length - 1);
    let row: unknown;
    try {
      row = JSON.parse(json);
    } catch {
      row = undefined;
    }
    if (row === null || typeof row !== "object" || Array.isArray(row)) {
      throw new TypeError(
        `the row at offset ${offset} is not a JSON object: ${JSON.stringify(json.slice(0, 80))}`,
      );
    }
    offsets[i] = offset;
    jsons[i] = json;
  }
  return { offsets, jsons };
}

/** What is wrong with a greeting of a durable batched subscription, or null. */
function badGreeting(g: unknown): string | null {
  if (g === null || typeof g !== "object" || Array.isArray(g)) return "not a JSON object";
  const x = g as Record<string, unknown>;
  if (typeof x.stream_id !== "string") return `stream_id ${JSON.stringify(x.stream_id)}`;
  if (!Number.isSafeInteger(x.end_offset) || (x.end_offset as number) < 0) {
    return `end_offset ${JSON.stringify(x.end_offset)} is not an integer >= 0`;
  }
  return null;
}

/**
 * Runs one subscription until it closes (or `signal` aborts); resolves with
 * how it ended. Never rejects.
 */
export function runTail(o: TailOptions): Promise<TailEnd> {
  const u = new URL(o.url);
  u.searchParams.set("offset", String(o.from));
  u.searchParams.set("stream_id", o.streamId);
  u.searchParams.set("frames", "batch");
  if (o.token !== null) u.searchParams.set("access_token", o.token);
  return new Promise<TailEnd>((resolve) => {
    let greeted = false;
    let done = false;
    let failure: string | undefined;
    const queue: string[] = [];
    let writing = false;
    let ws: WebSocket;
    const finish = (end: TailEnd) => {
      if (done) return;
      done = true;
      o.signal.removeEventListener("abort", abort);
      resolve(end);
    };
    const stop = (error: string) => {
      failure ??= error;
      try {
        ws.close(1000);
      } catch {
        // already closing
      }
    };
    const abort = () => stop("stopped");
    const drain = async () => {
      if (writing) return;
      writing = true;
      try {
        while (queue.length > 0 && failure === undefined) {
          // One commit per received frame while the disk keeps up; frames that
          // queued behind a commit are written together (group commit), as
          // the primary's own commits group the rows that wait on a sync.
          let { offsets, jsons } = parseFrame(queue.shift()!);
          while (queue.length > 0 && offsets.length < MAX_GROUP_ROWS) {
            const next = parseFrame(queue.shift()!);
            offsets = offsets.concat(next.offsets);
            jsons = jsons.concat(next.jsons);
          }
          await o.write(offsets, jsons);
        }
      } catch (err) {
        stop(err instanceof Error ? err.message : String(err));
      } finally {
        writing = false;
        if (ws.readyState === WebSocket.CLOSED && !done) closed();
      }
    };
    let closeEvent: CloseEvent | null = null;
    const closed = () => {
      // What was received before the close is written first.
      if (writing) return;
      const e = closeEvent;
      finish({
        code: e?.code ?? 1006,
        reason: e?.reason ? decodeCloseReason(e.reason) as Record<string, unknown> | null : null,
        greeted,
        ...(failure !== undefined ? { error: failure } : {}),
      });
    };
    try {
      ws = new WebSocket(u.toString());
    } catch (err) {
      finish({ code: 1006, reason: null, greeted, error: String(err) });
      return;
    }
    o.signal.addEventListener("abort", abort, { once: true });
    ws.onmessage = (e) => {
      if (typeof e.data !== "string") return stop("a binary frame on a batch subscription");
      if (!greeted) {
        greeted = true;
        let g: Greeting;
        try {
          g = JSON.parse(e.data);
        } catch {
          return stop(`the greeting is not JSON: ${JSON.stringify(e.data.slice(0, 80))}`);
        }
        const bad = badGreeting(g);
        if (bad !== null) return stop(`the greeting is refused: ${bad}`);
        if (!o.greeted(g)) stop("greeting refused");
        return;
      }
      if (failure !== undefined) return;
      queue.push(e.data);
      if (queue.length > o.maxQueuedFrames) {
        stop(`more than ${o.maxQueuedFrames} frames wait to be written`);
        queue.length = 0;
        return;
      }
      void drain();
    };
    ws.onclose = (e) => {
      closeEvent = e;
      closed();
    };
    ws.onerror = () => {
      // onclose follows.
    };
  });
}
