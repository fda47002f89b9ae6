/**
 * Storing a publish and waiting for it to be durable: the one step the HTTP
 * and WebSocket routes share. The rows take the stream's row path (checked
 * and encoded; the first refused refuses them all), then the answer is the
 * rows' offsets (for a duplicate, the original commit's), a refused row, a
 * stale seq, a full disk (the stream takes no rows, or the write failed for
 * lack of space), or a failed write — also for a seq sent after one of its
 * producer's failed, which the log refuses so that the producer commits
 * without holes. On a cluster node the rows are answered once the cluster
 * committed them (the log's promises resolve then); a node that does not
 * lead, or stopped leading before they were committed, answers `not_leader`:
 * nothing was acknowledged, and the publisher sends them to the leader
 * (a row the next leader holds is answered there as a duplicate).
 *
 * @module
 */

import { LogWriteError, NotLeaderError, type ProducerTag } from "../../log/mod.ts";
import { producerId } from "../../log/producer/table.ts";
import { type Stream, streamInside } from "../stream/stream.ts";
import { RowsRefusedError } from "../stream/row_error.ts";
import { DiskFullError } from "../stream/disk_gate.ts";
import { isNoSpace } from "../../common/free_space.ts";

/**
 * How a publish ended: the one result both publish routes act on, and
 * answer with (`answer.ts`).
 */
export type PublishOutcome =
  | { kind: "ack"; first: number; last: number; duplicate: boolean }
  | { kind: "invalid"; index: number; detail: string }
  | { kind: "stale"; lastSeq: number }
  | { kind: "failed"; detail: string }
  | { kind: "disk_full"; detail: string }
  | { kind: "not_leader"; detail: string };

/**
 * Stores `rows` in `stream` as `tag`'s sequence (`tag.producer` is the
 * producer's key, `producerKey` in log/producer/table.ts) and resolves once they
 * are durable; never rejects.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Stream } from "../stream/stream.ts";
 * import { commitPublish } from "./commit.ts";
 * const root = await Deno.makeTempDir();
 * const s = await Stream.open("t", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const tag = { producer: "p", seq: 1 };
 * deepStrictEqual(await commitPublish(s, [{ v: 1 }], tag), { kind: "ack", first: 1, last: 1, duplicate: false });
 * deepStrictEqual(await commitPublish(s, [{ v: 1 }], tag), { kind: "ack", first: 1, last: 1, duplicate: true });
 * deepStrictEqual(
 *   await commitPublish(s, [{ v: 2 }, { v: "x" }], { producer: "p", seq: 2 }),
 *   { kind: "invalid", index: 1, detail: "/v: must be number" },
 * );
 * await s.close();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export async function commitPublish(
  stream: Stream,
  rows: readonly unknown[],
  tag: ProducerTag | null,
): Promise<PublishOutcome> {
  try {
    const r = streamInside(stream).publish(rows, tag);
    if (r.status === "stale") return { kind: "stale", lastSeq: r.lastSeq };
    if (r.status === "blocked") {
      // The producer commits without holes (log/producer/table.ts).
      return {
        kind: "failed",
        detail:
          `not stored: seq ${r.failedSeq} of producer ${producerId(tag!.producer)} failed to be ` +
          `stored before it; send again from seq ${r.lastSeq + 1}`,
      };
    }
    await r.done;
    return { kind: "ack", first: r.first, last: r.last, duplicate: r.status === "duplicate" };
  } catch (err) {
    if (err instanceof RowsRefusedError) {
      return { kind: "invalid", index: err.index, detail: err.detail };
    }
    // This node stopped leading, or its log stopped after the commit was
    // shipped (the next leader may hold it): not answered here either way.
    if (err instanceof NotLeaderError || (err instanceof LogWriteError && err.handedOn)) {
      return { kind: "not_leader", detail: err.message };
    }
    // The stream takes no rows (its disk is full), or this write failed for lack of space.
    if (err instanceof DiskFullError) return { kind: "disk_full", detail: err.message };
    if (isNoSpace(err)) return { kind: "disk_full", detail: (err as Error).message };
    return { kind: "failed", detail: err instanceof Error ? err.message : String(err) };
  }
}
