/**
 * A reader over a whole log: follows the segments in order from any offset up
 * to the durable end, checking every record it hands out.
 *
 * @module
 */

import type { Layout } from "./format.ts";
import type { Log, SegmentInfo } from "./log.ts";
import { EMPTY_BATCH, type RecordBatch, SegmentCursor } from "./segment_reader.ts";

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

/**
 * Reads a log forward from an offset. Offsets below the log's earliest start
 * at the earliest; gaps left by a fence are skipped.
 *
 * @example
 * ```ts
 * import { Log } from "./log.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * await log.appendMany([1, 2, 3].map((i) => new TextEncoder().encode(`{"i":${i}}`)));
 * const reader = log.reader(2);
 * const batch = await reader.read();
 * console.log(Array.from(batch.offsets)); // [2, 3]
 * reader.close();
 * await log.close();
 * ```
 */
export class LogReader {
  readonly #log: Log;
  readonly #onClose: () => void;
  #offset: number;
  #seg: { info: SegmentInfo; layout: Layout } | null = null;
  #file: Deno.FsFile | null = null;
  #cursor: SegmentCursor | null = null;
  #closed = false;
  #waiters: (() => void)[] = [];

  /** @internal Use {@linkcode Log.reader}. */
  constructor(log: Log, offset: number, onClose: () => void) {
    this.#log = log;
    this.#offset = Math.max(1, offset);
    this.#onClose = onClose;
  }

  /** The next offset this reader will return (or the first after it). */
  get offset(): number {
    return this.#offset;
  }

  /**
   * Reads the next records, about `maxBytes` of them; an empty batch means the
   * reader has reached the durable end (for now).
   */
  async read(maxBytes: number = DEFAULT_READ_BYTES): Promise<RecordBatch> {
    const log = this.#log;
    while (!this.#closed && this.#offset < log.endOffset) {
      if (!this.#cursor) {
        const seg = log._segmentFor(this.#offset);
        if (!seg) return EMPTY_BATCH;
        if (this.#offset < seg.info.firstOffset) this.#offset = seg.info.firstOffset;
        const file = await Deno.open(seg.info.path, { read: true });
        try {
          const start = await log._seek(seg.info, file, this.#offset);
          this.#cursor = new SegmentCursor(file, seg.info.path, seg.layout, start, {
            maxPayloadBytes: log.maxPayloadBytes,
            blockBytes: Math.max(64 * 1024, maxBytes, seg.layout.interval + 4096),
          });
        } catch (err) {
          file.close();
          throw err;
        }
        this.#seg = seg;
        this.#file = file;
      }
      // Right after a seek the cursor may stand up to one beacon interval
      // before the offset wanted: skip that in one read, not many small ones.
      const skipping = this.#cursor.nextOffset < this.#offset;
      const want = skipping ? Math.max(maxBytes, this.#seg!.layout.interval + 4096) : maxBytes;
      const batch = await this.#cursor.read(this.#seg!.info.size, want);
      if (batch.count > 0) {
        let skip = 0;
        while (skip < batch.count && batch.offsets[skip] < this.#offset) skip++;
        const out = sliceBatch(batch, skip);
        if (out.count === 0) continue;
        this.#offset = out.offsets[out.count - 1] + 1;
        return out;
      }
      if (this.#cursor.endMark) {
        const next = log._segmentAfter(this.#seg!.info);
        this.#release();
        if (!next) return EMPTY_BATCH;
        if (this.#offset < next.info.firstOffset) this.#offset = next.info.firstOffset;
        continue;
      }
      return EMPTY_BATCH;
    }
    return EMPTY_BATCH;
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

  #release(): void {
    this.#file?.close();
    this.#file = null;
    this.#cursor = null;
    this.#seg = null;
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
