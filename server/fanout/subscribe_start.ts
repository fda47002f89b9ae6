/**
 * Where a subscribe starts, or why it is refused: the offset or time it asks
 * for, checked against the stream's log in the order of docs/SPEC.md §2.3
 * (`not_durable`, `other_stream`, `ahead`, `empty`, `evicted`, `too_old`),
 * `since=` resolved through the log's time index (docs/SPEC.md §8), and a
 * mirror's lag rule (docs/SPEC.md §10.3). Decided when the socket opens, not when
 * the request came: the log may have moved meanwhile.
 *
 * @module
 */

import type { SubscribeQuery } from "../../wire/subscribe.ts";
import type { NotReplayableReason } from "../../wire/close_reason.ts";
import type { TimeLookup } from "../../log/mod.ts";
import type { StreamMirror } from "../role.ts";

/** The start a subscribe asks for, once checked: a first offset, or live. */
export type StartDecision =
  | { ok: true; from: number | null }
  | { ok: false; reason: NotReplayableReason };

/**
 * Decides where a subscribe starts, or why it is refused, checking in the
 * order `not_durable`, `other_stream`, `ahead`, `empty`, `evicted`, `too_old`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { decideStart } from "./subscribe_start.ts";
 * const log = { streamId: "0".repeat(32), endOffset: 10, earliest: 1, firstOffset: 1,
 *   rowsBetween: (a: number, b: number) => b - a };
 * const q = { offset: 12, streamId: null, frames: "single" as const, token: null,
 *   where: null, since: null };
 * const d = decideStart(log, null, q);
 * equal(d.ok ? d.from : d.reason.why, "ahead");
 * ```
 */
export function decideStart(
  log: {
    streamId: string;
    endOffset: number;
    earliest: number | null;
    firstOffset: number;
    rowsBetween(from: number, to: number): number;
    /** Last offset served as chunks over HTTP (null: the log keeps no chunks). */
    readonly chunks?: { readonly through: number | null };
  } | null,
  maxReplay: number | null,
  q: SubscribeQuery,
): StartDecision {
  if (!log) {
    if (q.offset !== null) {
      return { ok: false, reason: { error: "not_replayable", why: "not_durable" } };
    }
    if (q.streamId !== null) {
      return { ok: false, reason: { error: "not_replayable", why: "other_stream" } };
    }
    return { ok: true, from: null };
  }
  if (q.streamId !== null && q.streamId !== log.streamId) {
    return { ok: false, reason: { error: "not_replayable", why: "other_stream" } };
  }
  const end = log.endOffset;
  if (q.offset === null) return { ok: true, from: null };
  const earliest = log.earliest;
  let from: number;
  if (q.offset === "earliest") {
    if (earliest === null) return { ok: true, from: end };
    from = earliest;
  } else {
    from = q.offset === 0 ? log.firstOffset : q.offset;
    if (from > end) {
      return {
        ok: false,
        reason: { error: "not_replayable", why: "ahead", offset: q.offset, end_offset: end },
      };
    }
    if (from === end) return { ok: true, from };
    if (earliest === null) {
      return {
        ok: false,
        reason: { error: "not_replayable", why: "empty", offset: q.offset, end_offset: end },
      };
    }
    if (from < earliest) {
      return {
        ok: false,
        reason: { error: "not_replayable", why: "evicted", offset: q.offset, earliest },
      };
    }
  }
  if (maxReplay !== null) {
    const rows = log.rowsBetween(from, end);
    // Refusing helps a client only if it can read the start some other way:
    // over HTTP from the chunks. Rows not sealed into chunks yet can only come
    // through the socket, and how many there are is bounded by sealing.
    const through = log.chunks?.through;
    const refuse = through === undefined || through === null || from <= through;
    if (rows > maxReplay && refuse) {
      return {
        ok: false,
        reason: {
          error: "not_replayable",
          why: "too_old",
          offset: from,
          end_offset: end,
          rows,
          max_replay: maxReplay,
        },
      };
    }
  }
  return { ok: true, from };
}

/** What {@linkcode decideSinceStart} needs of a log: {@linkcode decideStart}'s, and the time lookup. */
export type SinceLog = NonNullable<Parameters<typeof decideStart>[0]> & {
  offsetAt(sinceUs: number): Promise<TimeLookup>;
};

// Refusals that come before `evicted` in the order of docs/SPEC.md §2.3.
const BEFORE_EVICTED = new Set(["not_durable", "other_stream", "ahead", "empty"]);

/**
 * Decides where a subscribe with `since` starts (docs/SPEC.md §8.3): the time
 * resolves through the log to the first offset whose append time is at or
 * after it, then acts exactly like `offset=` that offset (every refusal of
 * {@linkcode decideStart} applies, in its order). After the last row it is
 * `offset=end_offset` (live, `replay` null). Before the earliest row held
 * while older rows were dropped: `evicted` with `earliest` (`empty` when
 * nothing is held); when nothing was ever dropped, from the first row. On an
 * ephemeral stream, `not_durable`. A query without `since` is
 * {@linkcode decideStart}'s.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { decideSinceStart } from "./subscribe_start.ts";
 * const log = { streamId: "0".repeat(32), endOffset: 10, earliest: 1, firstOffset: 1,
 *   rowsBetween: (a: number, b: number) => b - a,
 *   offsetAt: () => Promise.resolve({ offset: 4, ts: 7, exact: true, evicted: false }) };
 * const q = { offset: null, streamId: null, frames: "single" as const, token: null,
 *   where: null, since: 5 };
 * const d = await decideSinceStart(log, null, q);
 * equal(d.ok ? d.from : d.reason.why, 4);
 * ```
 */
export async function decideSinceStart(
  log: SinceLog | null,
  maxReplay: number | null,
  q: SubscribeQuery,
): Promise<StartDecision> {
  if (q.since === null) return decideStart(log, maxReplay, q);
  if (!log) return { ok: false, reason: { error: "not_replayable", why: "not_durable" } };
  const at = await log.offsetAt(q.since);
  const d = decideStart(log, maxReplay, { ...q, offset: at.offset });
  if (!d.ok && BEFORE_EVICTED.has(d.reason.why)) return d;
  if (at.evicted) {
    const earliest = log.earliest;
    const reason: NotReplayableReason = earliest === null
      ? { error: "not_replayable", why: "empty", since: q.since, end_offset: log.endOffset }
      : { error: "not_replayable", why: "evicted", since: q.since, earliest };
    return { ok: false, reason };
  }
  return d;
}

/**
 * On a mirror (`mirror`; null: the stream is not a mirror's replica), an offset past its end is `ahead` only when it is past the
 * primary's end too, asked afresh (the last known end when the primary does
 * not answer); otherwise the subscribe is accepted and waits for the rows.
 * Resolves the decision to act on, and whether to wait.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { mirrorLag } from "./subscribe_start.ts";
 * const q = { offset: 9, streamId: null, frames: "single" as const, token: null, where: null, since: null };
 * const ahead = { ok: false as const, reason: { error: "not_replayable" as const, why: "ahead" as const, end_offset: 5 } };
 * deepStrictEqual(await mirrorLag(null, q, ahead), { d: ahead, wait: false }); // not a mirror
 * const mirror = {
 *   head: () => ({}),
 *   primaryEnd: () => Promise.resolve(12),
 *   reached: () => Promise.resolve(true),
 * };
 * deepStrictEqual(await mirrorLag(mirror, q, ahead), { d: { ok: true, from: 9 }, wait: true });
 * ```
 */
export async function mirrorLag(
  mirror: StreamMirror | null,
  q: SubscribeQuery,
  d: StartDecision,
): Promise<{ d: StartDecision; wait: boolean }> {
  if (d.ok || d.reason.why !== "ahead" || !mirror || typeof q.offset !== "number") {
    return { d, wait: false };
  }
  const primary = await mirror.primaryEnd();
  if (primary === null || q.offset > primary) return { d, wait: false };
  return { d: { ok: true, from: q.offset }, wait: true };
}
