/**
 * What a subscriber needs from its stream: its host (the stream's log, live
 * set and metrics) and the reads of a catch-up.
 *
 * @module
 */

import type { RecordBatch } from "../../log/mod.ts";
import type { ArrowFrameEncoder } from "../../arrow/frame_encoder.ts";
import type { Compression } from "../../client/wire.ts";

/** The reads of a catching-up subscriber: a `LogReader`, or a wrapper around one. */
export interface ReplayReader {
  /** The next offset the reader will return (or the first after it). */
  readonly offset: number;
  /** Reads the next rows, about `maxBytes` of them. */
  read(maxBytes: number): Promise<RecordBatch>;
  /** Lets the reader go. */
  close(): void;
}

/** What a subscriber (of type `S`) needs from its stream. */
export interface SubscriberHost<S> {
  /** The stream name (for metrics and messages). */
  readonly name: string;
  /** Whether the stream has a log. */
  readonly durable: boolean;
  /** Durable end of the log. */
  endOffset(): number;
  /** Opens a log reader at `offset`. */
  reader(offset: number): ReplayReader;
  /** Adds the subscriber to the live set. */
  joinLive(sub: S): void;
  /** Removes it from the live set. */
  leaveLive(sub: S): void;
  /** Called once when the subscriber is gone. */
  gone(sub: S): void;
  /** Counts frames and bytes sent, and replayed rows. */
  count(frames: number, bytes: number, replayRows: number): void;
  /** Counts a drop by reason. */
  dropped(reason: string): void;
  /** Reports a failure that ends the subscriber (closed with 1011). */
  failed(err: unknown): void;
  /** The stream's Arrow frame encoder (only asked for by arrow subscribers). */
  arrowEncoder(): ArrowFrameEncoder;
  /**
   * compress=zstd (§16): one zstd frame of the text of a catching-up
   * subscriber's slice, counted (optional, like the shared frames' `zstd`).
   */
  compress?(text: string, kind: Compression): Uint8Array;
}
