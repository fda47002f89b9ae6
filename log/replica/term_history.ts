/**
 * The term history of a replicated log: which leader term began at which
 * offset, kept beside the segments as Kafka keeps its leader-epoch
 * checkpoint. A follower that rejoins gets the leader's history, cuts its
 * own log at the first offset whose row the two logs wrote in different
 * terms ({@linkcode truncationPoint}), and copies the rest: what it holds
 * under a term the leader never had, or past where a term ended in the
 * leader's log, was never committed, and goes.
 *
 * ```text
 * terms.json   {"terms":[{"term":1,"start":1},{"term":4,"start":1201}],"crc32":"…"}\n
 *              (a checked JSON file, see ../disk/meta_file.ts; rewritten atomically)
 * ```
 *
 * Invariants:
 * - terms and starts only grow: a term begins at or after the previous
 *   one's start; a term that begins where the previous one began held no
 *   row and replaces it;
 * - a term is recorded (synced) before the first row of it is appended, so
 *   no row exists under a term the history lacks;
 * - rows before the first recorded term (a log from before a cluster) are
 *   term 0;
 * - after the log's tail is cut at an offset, the terms that began at or
 *   after it go too ({@linkcode TermHistory.truncateFrom}); a term beginning
 *   past the log's end is harmless meanwhile (it holds no row).
 *
 * @module
 */

import { join } from "node:path";
import { readCheckedJson, writeCheckedJson } from "../disk/meta_file.ts";
import { LogCorruptError } from "../errors.ts";

/** The name of the term history in a log folder. */
export const TERMS_FILE = "terms.json";

/**
 * A term and the first offset written in it.
 */
export interface TermStart {
  /** The term. */
  term: number;
  /** The first offset written in it. */
  start: number;
}

/**
 * Where term `term` ends in a log with history `terms` and end `logEnd`
 * (exclusive), as Kafka answers an OffsetsForLeaderEpoch request: the
 * largest term at or below `term` the log has, and the offset where the
 * next term begins (`logEnd` when none does). Below the first recorded
 * term, term 0 ends where the first recorded one begins.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { termEnd } from "./term_history.ts";
 * const terms = [{ term: 1, start: 1 }, { term: 4, start: 101 }];
 * deepEqual(termEnd(terms, 1, 150), { term: 1, end: 101 });
 * deepEqual(termEnd(terms, 3, 150), { term: 1, end: 101 }); // term 3 never led here
 * deepEqual(termEnd(terms, 4, 150), { term: 4, end: 150 });
 * deepEqual(termEnd(terms, 0, 150), { term: 0, end: 1 });
 * ```
 */
export function termEnd(
  terms: readonly TermStart[],
  term: number,
  logEnd: number,
): { term: number; end: number } {
  let i = -1;
  while (i + 1 < terms.length && terms[i + 1].term <= term) i++;
  const next = terms[i + 1];
  return { term: i < 0 ? 0 : terms[i].term, end: next ? Math.min(next.start, logEnd) : logEnd };
}

/**
 * The term the row at `offset` was written in, in a log with history
 * `terms` (0 before the first recorded term: rows written before the
 * cluster).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { termAt } from "./term_history.ts";
 * const terms = [{ term: 1, start: 1 }, { term: 4, start: 50 }];
 * equal(termAt(terms, 0), 0);
 * equal(termAt(terms, 49), 1);
 * equal(termAt(terms, 50), 4);
 * ```
 */
export function termAt(terms: readonly TermStart[], offset: number): number {
  let t = 0;
  for (const e of terms) {
    if (e.start > offset) break;
    t = e.term;
  }
  return t;
}

/**
 * Where a rejoining log (history `local`, end `localEnd`) must be cut to
 * match the leader's (history `leader`, end `leaderEnd`): the first offset
 * at or after `from` whose row was written in a different term in the two
 * logs, and never past either end. Returns `localEnd` when nothing must go.
 * `from` is where the rows this log knows committed end: those are the same
 * in every log, and below them a log may lack rows it never copied (a gap
 * past rows the leader no longer held) whose terms it never recorded.
 *
 * One leader writes each term, in offset order, so rows written in the same
 * term at the same offset are the same row (Raft's log matching), and the
 * logs agree below the first offset whose terms differ. Every term of both
 * histories is compared, not only the local log's last one: a log may hold,
 * under a term the leader never had, rows of an earlier term past where that
 * term ended in the leader's log (Kafka answers that case with more than one
 * round of OffsetsForLeaderEpoch, KIP-279; the leader's whole history is at
 * hand here).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { truncationPoint } from "./term_history.ts";
 * // A deposed leader wrote 101..130 in term 1; the new leader began term 2 at 101.
 * const leader = [{ term: 1, start: 1 }, { term: 2, start: 101 }];
 * equal(truncationPoint([{ term: 1, start: 1 }], 131, leader, 180), 101);
 * // A follower that lags (it ends at 90) keeps everything.
 * equal(truncationPoint([{ term: 1, start: 1 }], 90, leader, 180), 90);
 * // Term 1's rows 101..119 here, then a term 3 the leader never had: the
 * // rows part at 101, where the leader's term 2 began, not at 120.
 * equal(truncationPoint([{ term: 1, start: 1 }, { term: 3, start: 120 }], 125, leader, 180), 101);
 * // A log that copied from 150 on (the leader no longer held 1..149) and
 * // knows 1..159 committed: nothing of what it holds parts.
 * equal(truncationPoint([{ term: 2, start: 150 }], 170, leader, 180, 160), 170);
 * ```
 */
export function truncationPoint(
  local: readonly TermStart[],
  localEnd: number,
  leader: readonly TermStart[],
  leaderEnd: number,
  from = 0,
): number {
  const end = Math.min(localEnd, leaderEnd);
  // The terms only change where one history begins a term: the first such
  // offset (or `from`) where they differ is where the logs part.
  const points = [from, ...local.map((e) => e.start), ...leader.map((e) => e.start)]
    .filter((p) => p >= from && p < end)
    .sort((a, b) => a - b);
  for (const p of points) {
    if (termAt(local, p) !== termAt(leader, p)) return p;
  }
  return end;
}

function check(entries: unknown, path: string): TermStart[] {
  if (!Array.isArray(entries)) throw new LogCorruptError(path, 0, "no terms list");
  let prev: TermStart | null = null;
  for (const e of entries as TermStart[]) {
    if (
      !e || !Number.isSafeInteger(e.term) || !Number.isSafeInteger(e.start) || e.term < 1 ||
      e.start < 1 || (prev && (e.term <= prev.term || e.start <= prev.start))
    ) {
      throw new LogCorruptError(
        path,
        0,
        `terms must grow, with their starts: ${JSON.stringify(e)}`,
      );
    }
    prev = e;
  }
  return (entries as TermStart[]).map((e) => ({ term: e.term, start: e.start }));
}

/**
 * A log's term history, on disk in `terms.json`.
 *
 * @example
 * ```ts
 * import { deepEqual, equal } from "node:assert/strict";
 * import { TermHistory } from "./term_history.ts";
 * const dir = await Deno.makeTempDir();
 * const h = await TermHistory.open(dir);
 * await h.begin(1, 1);
 * await h.begin(3, 50);
 * deepEqual((await TermHistory.open(dir)).entries, [{ term: 1, start: 1 }, { term: 3, start: 50 }]);
 * deepEqual(h.endOf(1, 80), { term: 1, end: 50 });
 * await h.truncateFrom(50);
 * equal(h.latest?.term, 1);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class TermHistory {
  /** The log folder. */
  readonly dir: string;
  #entries: TermStart[];

  private constructor(dir: string, entries: TermStart[]) {
    this.dir = dir;
    this.#entries = entries;
  }

  /**
   * Reads the history of the log in `dir` (empty when there is none).
   *
   * @throws {LogCorruptError} naming the file when it is damaged.
   */
  static async open(dir: string): Promise<TermHistory> {
    const path = join(dir, TERMS_FILE);
    const r = await readCheckedJson<{ terms?: unknown }>(path, ["terms"]);
    return new TermHistory(dir, r === null ? [] : check(r.value.terms, path));
  }

  /** The terms, oldest first (a copy). */
  get entries(): TermStart[] {
    return this.#entries.map((e) => ({ ...e }));
  }

  /** The last term begun, or null. */
  get latest(): TermStart | null {
    const e = this.#entries.at(-1);
    return e ? { ...e } : null;
  }

  /** See {@linkcode termEnd}. */
  endOf(term: number, logEnd: number): { term: number; end: number } {
    return termEnd(this.#entries, term, logEnd);
  }

  /**
   * Records that `term` begins at offset `start`, durably, before any row
   * of it is appended. Recording the latest term again is a no-op.
   *
   * @throws {RangeError} when `term` or `start` would go back.
   */
  async begin(term: number, start: number): Promise<void> {
    if (!Number.isSafeInteger(term) || term < 1 || !Number.isSafeInteger(start) || start < 1) {
      throw new RangeError(`a term and its start are integers ≥ 1, got term ${term} at ${start}`);
    }
    const last = this.#entries.at(-1);
    if (last && last.term === term && last.start === start) return;
    if (last && term <= last.term) {
      throw new RangeError(`term ${term} does not follow term ${last.term} (terms only grow)`);
    }
    if (last && start < last.start) {
      throw new RangeError(
        `term ${term} cannot begin at ${start}, before term ${last.term} began (${last.start})`,
      );
    }
    // The previous term held no row: the new one replaces it.
    const kept = last && start === last.start ? this.#entries.slice(0, -1) : this.#entries;
    await this.#write([...kept, { term, start }]);
  }

  /** Forgets the terms that begin at or after `offset` (the log was cut there). */
  async truncateFrom(offset: number): Promise<void> {
    const kept = this.#entries.filter((e) => e.start < offset);
    if (kept.length !== this.#entries.length) await this.#write(kept);
  }

  async #write(entries: TermStart[]): Promise<void> {
    await writeCheckedJson(join(this.dir, TERMS_FILE), { terms: entries });
    this.#entries = entries;
  }
}
