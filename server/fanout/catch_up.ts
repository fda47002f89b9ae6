/**
 * A subscriber's catch-up: reading the log from its next offset and sending
 * the rows at its own pace, until it reaches the log's durable end and joins
 * the live set.
 *
 * - Reads are about what the socket has room for (between
 *   {@linkcode MIN_CATCH_UP_READ_BYTES} and {@linkcode CATCH_UP_READ_BYTES}),
 *   so what a blocked socket holds stays near its share, however long it
 *   stalls; a socket at its share waits until it drains.
 * - The rows are sent in slices, each in its turn of the process's
 *   catch-up pacer (catch_up_pacer.ts): replaying subscribers share the
 *   event loop with live rows and new connections.
 * - It joins the live set in the same synchronous step in which it finds
 *   `next` at the log's end (no await between), so replay and live partition
 *   the stream exactly.
 * - With a `where=` filter only the rows it matches are sent, and `next`
 *   moves past every row read, matched or not: a reader that matches nothing
 *   for long still reaches the live set.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import type { Compression, FrameMode } from "../../wire/subscribe.ts";
import type { Filter } from "../../wire/filter.ts";
import type { RecordBatch } from "../../log/mod.ts";
import type { ArrowFrameEncoder } from "../../arrow/frame_encoder.ts";
import { frameOffset, MAX_BATCH_ROWS, renderBatch } from "../frames/text_frames.ts";
import { CatchUpPacer, FRAME_COST } from "./catch_up_pacer.ts";
import { filterBatch } from "./filtered_frames.ts";
import { type Gate, GatedReader, type ReplayReader } from "./replay_gate.ts";

/** Most bytes read from the log per catch-up step. */
export const CATCH_UP_READ_BYTES = 512 * 1024;
/** Fewest bytes read per catch-up step (when the socket has less room than that). */
export const MIN_CATCH_UP_READ_BYTES = 16 * 1024;
/** Most bytes of frames sent in one slice of a catch-up. */
const SLICE_BYTES = 256 * 1024;
/** Most single frames sent in one slice of a catch-up. */
const SLICE_FRAMES = 256;
/** The event loop's share for catching-up subscribers (per process). */
const pacer = new CatchUpPacer();

/** What a catch-up reads from and reports to: its stream's side. */
export interface CatchUpHost {
  /** Durable end of the log. */
  endOffset(): number;
  /** Opens a log reader at `offset`. */
  reader(offset: number): ReplayReader<RecordBatch>;
  /** Counts frames and bytes sent, and replayed rows. */
  count(frames: number, bytes: number, replayRows: number): void;
  /** The stream's Arrow frame encoder (only asked for by arrow subscribers). */
  arrowEncoder(): ArrowFrameEncoder;
  /** One zstd frame of the text of a catching-up subscriber's slice, counted. */
  compress?(text: string, kind: Compression): Uint8Array;
}

/** What a catch-up needs of its subscriber. */
export interface CatchingUp {
  /** Its socket. */
  readonly socket: { readonly bufferedAmount: number; send(data: string | Uint8Array): void };
  /** Its frame mode. */
  readonly frames: FrameMode;
  /** Its `where=` filter, or null. */
  readonly filter: Filter | null;
  /** compress=: the kind its data frames are compressed with, or null. */
  readonly compress: Compression | null;
  /** The first offset not yet handed to its socket. */
  next: number;
  /** The replay gate its reads take turns through (replay_gate.ts); null or absent: none. */
  readonly gate?: Gate | null;
  /** Whether it is still catching up (it stops when it is closed). */
  readonly catchingUp: boolean;
  /** Bytes its socket may take now before reaching its share of the send buffer. */
  room(): number;
  /** Resolves once its socket is below its share again. */
  drained(): Promise<void>;
  /** Joins the live set (called in the step that finds it caught up). */
  goLive(): void;
}

/**
 * Catches `sub` up from `sub.next` through `host`'s log, then makes it live;
 * returns early once it stops catching up (closed). Rejects with what the
 * log's reader rejects with (a `LogEvictedError` when retention dropped rows
 * it had not read yet).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../../log/mod.ts";
 * import { catchUp } from "./catch_up.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { timers: false });
 * await log.appendMany(['{"v":1}', '{"v":2}']);
 * const sent: (string | Uint8Array)[] = [];
 * const sub = {
 *   socket: { bufferedAmount: 0, send: (d: string | Uint8Array) => void sent.push(d) },
 *   frames: "batch" as const, filter: null, compress: null, next: 1, catchingUp: true,
 *   room: () => 1 << 20, drained: () => Promise.resolve(), goLive() { this.catchingUp = false; },
 * };
 * const host = {
 *   endOffset: () => log.endOffset, reader: (o: number) => log.reader(o), count() {},
 *   arrowEncoder: () => { throw new Error("no arrow"); },
 * };
 * await catchUp(sub, host);
 * equal(sent.join(), '[1,{"v":1}]\n[2,{"v":2}]');
 * equal(sub.catchingUp, false); // live now
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function catchUp(
  sub: CatchingUp,
  host: CatchUpHost,
  snapshot: readonly string[] | null = null,
): Promise<void> {
  if (snapshot !== null && !(await sendSnapshot(sub, host, snapshot))) return;
  let reader: ReplayReader<RecordBatch> | null = gated(host.reader(sub.next), sub.gate ?? null);
  let empty = 0;
  try {
    while (sub.catchingUp) {
      const room = sub.room();
      if (room <= 0) {
        await sub.drained();
        continue;
      }
      if (sub.next >= host.endOffset()) {
        // Caught up: join the live set in this same synchronous step.
        reader.close();
        reader = null;
        sub.goLive();
        return;
      }
      const batch = await reader.read(
        Math.max(MIN_CATCH_UP_READ_BYTES, Math.min(CATCH_UP_READ_BYTES, room)),
      );
      if (!sub.catchingUp) return;
      if (batch.count === 0) {
        // Nothing more below the end (a fenced gap was skipped).
        sub.next = Math.max(sub.next, Math.min(reader.offset, host.endOffset()));
        if (sub.next < host.endOffset()) {
          // The reader found nothing although rows lie below the end: a
          // commit racing the read. Never spin on it for long.
          if (++empty > 1000) {
            throw new Error(`log reader stuck at ${sub.next} below ${host.endOffset()}`);
          }
          await new Promise((r) => empty > 100 ? setTimeout(r, 10) : setImmediate(r));
        }
        continue;
      }
      empty = 0;
      if (sub.filter) {
        if (!(await sendFiltered(sub, host, batch))) return;
        continue;
      }
      for (let i = 0; i < batch.count;) {
        await pacer.turn();
        let cost = 0;
        try {
          if (!sub.catchingUp) return;
          const sent = sendSlice(sub, host, batch, i);
          cost = sent.cost;
          i += sent.rows;
          sub.next = batch.offsets[i - 1] + 1;
        } finally {
          pacer.spend(cost);
        }
      }
    }
  } finally {
    reader?.close();
  }
}

// Sends the rows of a replayed batch that the filter matches, in slices
// (each in its turn, like unfiltered ones), and moves `next` past the batch
// even when none matched. Returns false when it stopped catching up.
async function sendFiltered(
  sub: CatchingUp,
  host: CatchUpHost,
  batch: RecordBatch,
): Promise<boolean> {
  let lines: string[] = [];
  await pacer.turn();
  let cost = 0;
  try {
    if (!sub.catchingUp) return false;
    const r = filterBatch(batch, sub.filter!);
    lines = r.lines;
    cost = r.cost;
  } finally {
    pacer.spend(cost);
  }
  const after = batch.offsets[batch.count - 1] + 1;
  for (let i = 0; i < lines.length;) {
    await pacer.turn();
    cost = 0;
    try {
      if (!sub.catchingUp) return false;
      const sent = sendLines(sub, host, lines, i);
      cost = sent.cost;
      i += sent.rows;
      sub.next = frameOffset(lines[i - 1]) + 1;
    } finally {
      pacer.spend(cost);
    }
  }
  if (!sub.catchingUp) return false;
  sub.next = Math.max(sub.next, after);
  return true;
}

/** Rows sent by one slice, and what they cost the pacer. */
interface Slice {
  rows: number;
  cost: number;
}

// snapshot=1: sends `lines` (rows below `next`, which does not move), in
// slices as replayed rows are, each within the socket's room. Returns false
// when it stopped catching up.
async function sendSnapshot(
  sub: CatchingUp,
  host: CatchUpHost,
  lines: readonly string[],
): Promise<boolean> {
  for (let i = 0; i < lines.length;) {
    if (sub.room() <= 0) await sub.drained();
    await pacer.turn();
    let cost = 0;
    try {
      if (!sub.catchingUp) return false;
      const sent = sendLines(sub, host, lines, i);
      cost = sent.cost;
      i += sent.rows;
    } finally {
      pacer.spend(cost);
    }
  }
  return sub.catchingUp;
}

// Sends frames from `i` of filtered replay lines, one slice.
function sendLines(sub: CatchingUp, host: CatchUpHost, lines: readonly string[], i: number): Slice {
  const maxRows = sub.frames === "single" ? SLICE_FRAMES : MAX_BATCH_ROWS;
  let end = i;
  let bytes = 0;
  while (end < lines.length && end - i < maxRows && (bytes === 0 || bytes < SLICE_BYTES)) {
    bytes += lines[end++].length + 1;
  }
  const rows = end - i;
  if (sub.frames === "arrow") {
    return sendBinary(sub, host, host.arrowEncoder().encodeFrames(lines.slice(i, end)), rows);
  }
  if (sub.frames === "batch") {
    return sendText(sub, host, rows === 1 ? lines[i] : lines.slice(i, end).join("\n"), rows);
  }
  for (let k = i; k < end; k++) sub.socket.send(lines[k]);
  host.count(rows, bytes - rows, rows);
  return { rows, cost: bytes + rows * FRAME_COST };
}

// Sends records from `i` of a replayed batch, one slice.
function sendSlice(sub: CatchingUp, host: CatchUpHost, batch: RecordBatch, i: number): Slice {
  if (sub.frames === "arrow") {
    const n = Math.min(MAX_BATCH_ROWS, batch.count - i);
    return sendBinary(sub, host, host.arrowEncoder().encodeRecords(batch, i, n), n);
  }
  if (sub.frames === "batch") {
    const { text, rows } = renderBatch(batch, i, MAX_BATCH_ROWS, SLICE_BYTES);
    return sendText(sub, host, text, rows);
  }
  const { text, rows } = renderBatch(batch, i, SLICE_FRAMES, SLICE_BYTES);
  // Frame text never holds a raw newline (JSON escapes it).
  for (const frame of text.split("\n")) sub.socket.send(frame);
  host.count(rows, text.length - rows + 1, rows);
  return { rows, cost: text.length + rows * FRAME_COST };
}

// One batched frame of `rows` rows: as text, or compressed once for this read.
function sendText(sub: CatchingUp, host: CatchUpHost, text: string, rows: number): Slice {
  if (sub.compress !== null) {
    const bytes = host.compress!(text, sub.compress);
    sub.socket.send(bytes);
    host.count(1, bytes.byteLength, rows);
  } else {
    sub.socket.send(text);
    host.count(1, text.length, rows);
  }
  return { rows, cost: text.length + FRAME_COST };
}

function sendBinary(sub: CatchingUp, host: CatchUpHost, bytes: Uint8Array, rows: number): Slice {
  sub.socket.send(bytes);
  host.count(1, bytes.byteLength, rows);
  return { rows, cost: bytes.byteLength + FRAME_COST };
}

// `reader`, its reads taking turns through `gate` (none: as it is).
function gated(reader: ReplayReader<RecordBatch>, gate: Gate | null): ReplayReader<RecordBatch> {
  return gate ? new GatedReader(reader, gate) : reader;
}
