/**
 * The one mapping of a publish's outcome (`commit.ts`) to the wire: the
 * answer to a socket's frame (`PublishAnswer`, wire/publish.ts), the HTTP
 * status of a `POST`'s, and the refusal it is counted as. A `POST` answers
 * the same fields without the seq, with the body's `line` for a refused
 * row and the rows' `count` for stored ones (docs/SPEC.md §9).
 *
 * @module
 */

import type { PublishAnswer } from "../../wire/publish.ts";
import type { PublishOutcome } from "./commit.ts";
import type { PublishRefusal } from "./publish_metrics.ts";

/** How a publish is answered on the wire. */
export interface WireAnswer {
  /**
   * The answer to frame `seq`; null when it is not answered (`not_leader`:
   * nothing was acknowledged, and the publisher sends it to the leader).
   */
  answer: PublishAnswer | null;
  /** The HTTP status a `POST` is answered with. */
  status: number;
  /** What a refusal is counted as (null: the rows are stored). */
  refusal: PublishRefusal | null;
}

/**
 * The wire answer to frame `seq` that ended as `out`.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { wireAnswer } from "./answer.ts";
 * deepStrictEqual(wireAnswer({ kind: "stale", lastSeq: 7 }, 5), {
 *   answer: { seq: 5, error: "stale_seq", last_seq: 7 },
 *   status: 409,
 *   refusal: "stale_seq",
 * });
 * deepStrictEqual(wireAnswer({ kind: "ack", first: 1, last: 2, duplicate: false }, 6).answer, {
 *   seq: 6,
 *   first: 1,
 *   last: 2,
 * });
 * ```
 */
export function wireAnswer(out: PublishOutcome, seq: number): WireAnswer {
  switch (out.kind) {
    case "ack":
      return {
        answer: out.duplicate
          ? { seq, first: out.first, last: out.last, duplicate: true }
          : { seq, first: out.first, last: out.last },
        status: 200,
        refusal: null,
      };
    case "invalid":
      return {
        answer: { seq, error: "invalid_row", index: out.index, detail: out.detail },
        status: 400,
        refusal: "invalid_row",
      };
    case "stale":
      return {
        answer: { seq, error: "stale_seq", last_seq: out.lastSeq },
        status: 409,
        refusal: "stale_seq",
      };
    case "failed":
      return {
        answer: { seq, error: "write_failed", detail: out.detail },
        status: 503,
        refusal: "write_failed",
      };
    case "disk_full":
      return {
        answer: { seq, error: "disk_full", detail: out.detail },
        status: 507,
        refusal: "disk_full",
      };
    case "not_leader":
      return { answer: null, status: 503, refusal: "no_leader" };
  }
}

/**
 * The answer to a `POST` that ended as `out`: the frame's answer without
 * its seq, a refused row named by its line in the body (`lines`: each row's,
 * 1-based), stored rows with their `count`, and `no_leader` with why.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { postAnswer } from "./answer.ts";
 * deepStrictEqual(postAnswer({ kind: "invalid", index: 1, detail: "/v: must be number" }, [1, 3]), {
 *   body: { error: "invalid_row", line: 3, detail: "/v: must be number" },
 *   status: 400,
 *   refusal: "invalid_row",
 * });
 * deepStrictEqual(postAnswer({ kind: "ack", first: 4, last: 5, duplicate: true }, [1, 2]).body, {
 *   first: 4,
 *   last: 5,
 *   count: 2,
 *   duplicate: true,
 * });
 * ```
 */
export function postAnswer(
  out: PublishOutcome,
  lines: readonly number[],
): { body: Record<string, unknown>; status: number; refusal: PublishRefusal | null } {
  const { answer, status, refusal } = wireAnswer(out, 0);
  if (answer === null) {
    const detail = out.kind === "not_leader" ? out.detail : "";
    return { body: { error: "no_leader", detail }, status, refusal };
  }
  if ("first" in answer) {
    const { first, last } = answer;
    const count = last - first + 1;
    return {
      body: { first, last, count, ...(answer.duplicate ? { duplicate: true } : {}) },
      status,
      refusal,
    };
  }
  if (answer.error === "invalid_row") {
    return {
      body: { error: answer.error, line: lines[answer.index], detail: answer.detail },
      status,
      refusal,
    };
  }
  const { seq: _, ...body } = answer;
  return { body, status, refusal };
}
