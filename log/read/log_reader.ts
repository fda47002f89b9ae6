/**
 * A reader over a whole log: follows the chunks and then the segments in
 * order from any offset up to the durable end, checking every record it hands
 * out. Whichever tier holds an offset serves it; a segment deleted or a chunk
 * merged away while the reader was between them is found again in the tier
 * that holds it now.
 *
 * @module
 */

import { join } from "node:path";
import { ChunkCursor, type ChunkEntry } from "../chunk/chunk.ts";
import { type ChunkTimes, readChunkTimes } from "../chunk/times.ts";
import type { ArchiveStore } from "../chunk/archive.ts";
import type { Layout } from "../segment/format.ts";
import { LogEvictedError } from "../errors.ts";
import {
  clipBatch,
  type CursorStart,
  EMPTY_BATCH,
  type RecordBatch,
  SegmentCursor,
} from "../segment/reader.ts";
import type { SegmentInfo } from "../segment/state.ts";

/** Where a reader finds an offset: a segment, a chunk, or nowhere. */
export type Located =
  | { kind: "segment"; info: SegmentInfo; layout: Layout }
  | { kind: "chunk"; entry: ChunkEntry; path: string }
  | { kind: "archive"; entry: ChunkEntry; store: ArchiveStore }
  | { kind: "evicted"; earliest: number | null }
  | { kind: "end" };

/** What a {@linkcode LogReader} reads through: the log's view of its tiers. */
export interface ReaderSource {
  /** The durable end (exclusive). */
  readonly endOffset: number;
  /** The largest payload a record may have. */
  readonly maxPayloadBytes: number;
  /** Where `offset` is held. */
  locate(offset: number): Located;
  /** Where a cursor can start for `offset` in segment `seg`, open as `file`. */
  seek(seg: SegmentInfo, file: Deno.FsFile, offset: number): Promise<CursorStart>;
  /** While the log's tail is being cut in place: resolves once it is done (else null). */
  cutting?(): Promise<void> | null;
}

/** Default bytes read per call. */
export const DEFAULT_READ_BYTES = 1 << 20;

function sliceBatch(b: RecordBatch, from: number): RecordBatch {
  if (from <= 0) return b;
  if (from >= b.count) return EMPTY_BATCH;
  return {
    buf: b.buf,
    count: b.count - from,
    offsets: b.offsets.subarray(from),
    times: b.times.subarray(from),
    starts: b.starts.subarray(from),
    lengths: b.lengths.subarray(from),
  };
}

type Source =
  | { kind: "segment"; cursor: SegmentCursor; file: Deno.FsFile; size: () => number }
  | { kind: "chunk"; cursor: ChunkCursor; times?: ChunkTimes | null };

// Sets each row's append time from a chunk's time index (its runs).
function fillTimes(b: RecordBatch, t: ChunkTimes): void {
  let run = 0;
  for (let i = 0; i < b.count; i++) {
    while (run + 1 < t.offsets.length && t.offsets[run + 1] <= b.offsets[i]) run++;
    (b.times as Float64Array)[i] = t.times[run];
  }
}

/**
 * Reads a log forward from an offset. Gaps left by a fence are skipped; an
 * offset the log no longer holds throws {@linkcode LogEvictedError}.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.appendMany([1, 2, 3].map((i) => new TextEncoder().encode(`{"i":${i}}`)));
 * const reader = log.reader(2);
 * const batch = await reader.read();
 * deepStrictEqual(Array.from(batch.offsets), [2, 3]);
 * reader.close();
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class LogReader {
  readonly #log: ReaderSource;
  readonly #onClose: () => void;
  #offset: number;
  #src: Source | null = null;
  #closed = false;
  #waiters: (() => void)[] = [];
  #held: RecordBatch | null = null;
  readonly #withTimes: boolean;
  #resets = 0;

  /**
   * @internal Use {@linkcode Log.reader}. With `times`, rows read from a
   * local chunk carry their append times from its time index (chunk lines
   * carry none; without it they read as 0).
   */
  constructor(log: ReaderSource, offset: number, onClose: () => void, times = false) {
    this.#log = log;
    this.#offset = Math.max(1, offset);
    this.#onClose = onClose;
    this.#withTimes = times;
  }

  /** The next offset this reader will return (or the first after it). */
  get offset(): number {
    return this.#offset;
  }

  async #open(): Promise<boolean> {
    const log = this.#log;
    let missing = 0;
    while (true) {
      const loc = log.locate(this.#offset);
      if (loc.kind === "end") return false;
      if (loc.kind === "evicted") throw new LogEvictedError(this.#offset, loc.earliest);
      try {
        if (loc.kind === "segment") {
          const info = loc.info;
          if (this.#offset < info.firstOffset) this.#offset = info.firstOffset;
          const file = await Deno.open(info.path, { read: true });
          try {
            const start = await log.seek(info, file, this.#offset);
            const cursor = new SegmentCursor(file, info.path, loc.layout, start, {
              maxPayloadBytes: log.maxPayloadBytes,
              blockBytes: Math.max(DEFAULT_READ_BYTES, loc.layout.interval + 4096),
            });
            this.#src = { kind: "segment", cursor, file, size: () => info.size };
          } catch (err) {
            file.close();
            throw err;
          }
        } else if (loc.kind === "chunk") {
          if (this.#offset < loc.entry.first) this.#offset = loc.entry.first;
          const cursor = new ChunkCursor(loc.path, loc.entry);
          await cursor.open();
          const times = this.#withTimes
            ? await readChunkTimes(join(loc.path, "../.."), loc.entry)
            : null;
          this.#src = { kind: "chunk", cursor, times };
        } else {
          // Below the local tier: stream the chunk from the archive.
          if (this.#offset < loc.entry.first) this.#offset = loc.entry.first;
          const { store, entry } = loc;
          const cursor = new ChunkCursor(
            `${store.uri}/${store.chunkKey(entry.sha256)}`,
            entry,
            () => store.getChunk(entry.sha256),
          );
          await cursor.open();
          this.#src = { kind: "chunk", cursor };
        }
        return true;
      } catch (err) {
        // Deleted under us (a segment chunked, a chunk merged or dropped):
        // look again; the log's view has moved on.
        if (!(err instanceof Deno.errors.NotFound) || ++missing > 3) throw err;
        await new Promise((r) => setTimeout(r, 5 * missing));
      }
    }
  }

  /**
   * Reads the next records, about `maxBytes` of them; an empty batch means the
   * reader has reached the durable end (for now).
   */
  async read(maxBytes: number = DEFAULT_READ_BYTES): Promise<RecordBatch> {
    const log = this.#log;
    while (!this.#closed && this.#offset < log.endOffset) {
      const cut = log.cutting?.();
      if (cut) {
        await cut; // the files are changing: read what the log holds after
        continue;
      }
      if (this.#held !== null) {
        const held = this.#held;
        this.#held = null;
        return this.#upToEnd(held);
      }
      const resets = this.#resets;
      if (!this.#src && !(await this.#open())) return EMPTY_BATCH;
      if (resets !== this.#resets) {
        this.#release(); // opened from what the log held before a cut
        continue;
      }
      const src = this.#src!;
      let batch: RecordBatch;
      try {
        if (src.kind === "segment") {
          // Right after a seek the cursor may stand up to one beacon interval
          // (1 MiB) before the offset wanted: that is skipped `maxBytes` at a
          // time (the loop goes on while a read holds only skipped records),
          // not in one read of the whole interval, whose buffer the batch
          // handed out would keep alive: a thousand subscribers falling back
          // to the log at once held a gigabyte that way.
          batch = await src.cursor.read(src.size(), maxBytes);
        } else {
          batch = await src.cursor.read(maxBytes);
          if (src.times) fillTimes(batch, src.times);
        }
      } catch (err) {
        if (resets === this.#resets && !log.cutting?.()) throw err;
        continue; // the tail was cut under the read: found afresh
      }
      if (resets !== this.#resets) continue; // read before a cut: maybe rows that went
      if (batch.count > 0) {
        let skip = 0;
        while (skip < batch.count && batch.offsets[skip] < this.#offset) skip++;
        const out = sliceBatch(batch, skip);
        if (out.count === 0) continue;
        return this.#upToEnd(out);
      }
      if (src.kind === "chunk" || src.cursor.endMark) {
        // The end of a chunk or of a sealed segment: on to whatever holds the next offset.
        this.#release();
        continue;
      }
      return EMPTY_BATCH;
    }
    return EMPTY_BATCH;
  }

  // The rows of `batch` below the end readers may see; the others are held
  // for a later read (a replicated log's rows durable here, not committed yet).
  #upToEnd(batch: RecordBatch): RecordBatch {
    const end = this.#log.endOffset;
    let n = batch.count;
    while (n > 0 && batch.offsets[n - 1] >= end) n--;
    if (n < batch.count) {
      this.#held = sliceBatch(batch, n);
      // Nothing below the end but a fenced gap: the reader is at the end.
      if (n === 0) {
        this.#offset = Math.max(this.#offset, end);
        return EMPTY_BATCH;
      }
      batch = clipBatch(batch, batch.offsets[0], batch.offsets[n - 1]);
    }
    this.#offset = batch.offsets[batch.count - 1] + 1;
    return batch;
  }

  /** Resolves when the log commits more rows (or closes). */
  wait(): Promise<void> {
    if (this.#closed || this.#offset < this.#log.endOffset) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** @internal Called by the log after each commit. */
  _wake(): void {
    const w = this.#waiters;
    if (w.length === 0) return;
    this.#waiters = [];
    for (const f of w) f();
  }

  /**
   * @internal Called by the log when its tail was cut in place: the file
   * this reader had open may hold other rows now; it finds its next offset
   * afresh (never past the cut: readers stop at the rows shown).
   */
  _reset(): void {
    this.#resets++;
    this.#held = null;
    this.#release();
  }

  #release(): void {
    const src = this.#src;
    this.#src = null;
    if (!src) return;
    if (src.kind === "segment") src.file.close();
    else src.cursor.close();
  }

  /** Closes the reader's file. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#release();
    this._wake();
    this.#onClose();
  }
}
