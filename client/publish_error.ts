/**
 * The error of a publish the server refused, or of a publisher that cannot
 * go on (client/publisher.ts). Browser-safe.
 *
 * @module
 */

/**
 * A publish the server refused (nothing of it was stored), or a publisher
 * that cannot go on.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { PublishError } from "./publish_error.ts";
 * const e = new PublishError("invalid_row", "row 0: price must be number", { seq: 3, index: 0 });
 * equal(e.error, "invalid_row");
 * equal(e.seq, 3);
 * equal(e.index, 0);
 * ```
 */
export class PublishError extends Error {
  /**
   * `invalid_row`, `stale_seq`, `write_failed`, `disk_full`, `answer_lost`, `closed`,
   * `protocol`, or `other_stream` (a node serves another stream: another
   * `stream_id` than the first node's).
   */
  readonly error: string;
  /** The frame's seq, when one was refused. */
  readonly seq: number | null;
  /** For `invalid_row`: the 0-based index of the refused row in the frame. */
  readonly index: number | null;
  /** For `stale_seq`: the producer's last seq. */
  readonly lastSeq: number | null;

  /** An error `error` saying `detail`. */
  constructor(
    error: string,
    detail: string,
    at: { seq?: number; index?: number; lastSeq?: number } = {},
  ) {
    super(`publish ${error}${at.seq !== undefined ? ` (seq ${at.seq})` : ""}: ${detail}`);
    this.name = "PublishError";
    this.error = error;
    this.seq = at.seq ?? null;
    this.index = at.index ?? null;
    this.lastSeq = at.lastSeq ?? null;
  }
}
