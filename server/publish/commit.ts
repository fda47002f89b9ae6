/**
 * Storing a checked publish and waiting for it to be durable: the one step
 * the HTTP and WebSocket routes share. The answer is the rows' offsets (for
 * a duplicate, the original commit's), a stale seq, or a failed write —
 * also for a seq sent after one of its producer's failed, which the log
 * refuses so that the producer commits without holes.
 *
 * @module
 */

import type { ProducerTag } from "../../log/mod.ts";
import type { Stream } from "../stream.ts";

/**
 * How a publish ended.
 *
 * @example
 * ```ts
 * import type { PublishOutcome } from "./commit.ts";
 * const o: PublishOutcome = { kind: "stale", lastSeq: 7 };
 * console.log(o.kind); // stale
 * ```
 */
export type PublishOutcome =
  | { kind: "ack"; first: number; last: number; duplicate: boolean }
  | { kind: "stale"; lastSeq: number }
  | { kind: "failed"; detail: string };

function detailOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Stores `jsons` (checked and encoded) in `stream` as `tag`'s sequence and
 * resolves once they are durable; never rejects.
 *
 * @example
 * ```ts
 * import { Stream } from "../stream.ts";
 * import { commitPublish } from "./commit.ts";
 * const s = await Stream.open("t", {
 *   root: await Deno.makeTempDir(),
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const tag = { producer: "p", seq: 1 };
 * console.log(await commitPublish(s, ['{"v":1}'], tag)); // { kind: "ack", first: 1, last: 1, duplicate: false }
 * console.log((await commitPublish(s, ['{"v":1}'], tag)).kind); // ack (a duplicate)
 * await s.close();
 * ```
 */
export async function commitPublish(
  stream: Stream,
  jsons: string[],
  tag: ProducerTag | null,
): Promise<PublishOutcome> {
  try {
    const r = stream._publish(jsons, tag);
    if (r.status === "stale") return { kind: "stale", lastSeq: r.lastSeq };
    if (r.status === "blocked") {
      // The producer commits without holes (log/producers.ts).
      return {
        kind: "failed",
        detail: `not stored: seq ${r.failedSeq} of producer ${tag!.producer} failed to be ` +
          `stored before it; send again from seq ${r.lastSeq + 1}`,
      };
    }
    await r.done;
    return { kind: "ack", first: r.first, last: r.last, duplicate: r.status === "duplicate" };
  } catch (err) {
    return { kind: "failed", detail: detailOf(err) };
  }
}
