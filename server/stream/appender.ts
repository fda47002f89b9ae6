/**
 * Rows into a stream's log, and its commits out to the fan-out: the rows
 * appended and not yet committed (their JSON, in offset order) wait here
 * until the log says they are durable, then go to the live subscribers as
 * that commit's frames. On an ephemeral stream the rows of one turn go out
 * together, as one commit would.
 *
 * Invariants:
 * - the pending rows are rows appended past the shown end (the durable end;
 *   on a replicated log, the end of what the cluster committed), contiguous
 *   and in offset order, and the offset of the first is known: a commit that
 *   starts there and holds no more than them takes its rows from the front;
 *   any other commit (rows placed that were never handed here: a log reopened
 *   with rows the cluster had not committed, a follower's rows adopted by a
 *   fence) drops the pending rows it covers and sends the live subscribers to
 *   the log, so that a frame never carries another row's offset; a failed
 *   write or a cut of the tail drops those it dropped; a cluster follower's
 *   rows come from the leader's commits (`appendCommit`), and when a failed
 *   one leaves them unknown the commits reach the live subscribers through
 *   the log until everything placed is shown;
 * - the fan-out of a commit happens after its sync and before its callers
 *   are resolved; the next commit of the log waits until the previous one is
 *   handed out (the fan-out's `idle`), so a publisher cannot outrun it.
 * - a keyed stream's index (`key_keeper.ts`) is told of every commit in the
 *   same step as the fan-out, just before it: with the commit's rows when
 *   they are here, else to read them from the log (a fence, too).
 *
 * @module
 */

import type { Log, LogListener, ProducerTag, PublishResult } from "../../log/mod.ts";
import type { ReplicaCommit } from "../../log/replica/replication.ts";
import type { Fanout } from "../fanout/fanout.ts";
import type { KeyKeeper } from "./key_keeper.ts";

const decoder = new TextDecoder();

/** What an appender counts (a stream's series). */
export interface AppendCounts {
  /** Rows made durable (sent, on an ephemeral stream). */
  appended(rows: number): void;
  /** A commit of the log, which took `ms`. */
  committed(ms: number): void;
}

/**
 * The stream's side of its log.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../../log/mod.ts";
 * import { Appender } from "./appender.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { timers: false });
 * const handed: string[][] = [];
 * const fanout = { live: true, send: (jsons: string[]) => void handed.push(jsons), idle: () => null, toLog() {} };
 * let rows = 0;
 * const appender = new Appender(log, fanout as never, { appended: (n) => void (rows += n), committed() {} });
 * equal(await appender.append(['{"v":1}', '{"v":2}']), 1);
 * equal(rows, 2);
 * equal(handed.length, 1); // one commit, handed out once
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class Appender implements LogListener {
  readonly #log: Log | null;
  readonly #fanout: Fanout;
  readonly #counts: AppendCounts;
  // The pending rows: the arrays handed in (adopted whole, never copied per
  // row), oldest first; `#at` rows of the first are shown already. The
  // oldest pending row is at offset `#front`; the rest follow it.
  #pending: string[][] = [];
  #head = 0;
  #at = 0;
  #count = 0;
  #front = 0;
  #ephemeral: string[] = [];
  // A replica's failed append left the pending rows unknown (see appendCommit).
  #untracked = false;
  // A keyed stream's index: given every commit's rows (or told to read them from the log).
  readonly #keys: KeyKeeper | null;

  readonly #writeFailed: (err: Error) => void;

  /**
   * The appender of a stream with `log` (null: ephemeral); it listens to the
   * log. `keys`: a keyed stream's index, told of every commit. `writeFailed`
   * is told of each failed write, before the appends it dropped reject.
   */
  constructor(
    log: Log | null,
    fanout: Fanout,
    counts: AppendCounts,
    keys: KeyKeeper | null = null,
    writeFailed: (err: Error) => void = () => {},
  ) {
    this.#log = log;
    this.#fanout = fanout;
    this.#counts = counts;
    this.#keys = keys;
    this.#writeFailed = writeFailed;
    log?.listen(this);
  }

  /**
   * Appends rows (their encoded JSON) in one commit; resolves with the first
   * one's offset once durable (null on an ephemeral stream). Throws what
   * the log's append throws (a closed or failed log), nothing appended. The
   * array is the appender's from then on.
   */
  append(jsons: string[]): Promise<number | null> {
    const log = this.#log;
    if (log === null) {
      this.#broadcast(jsons);
      return Promise.resolve(null);
    }
    const at = log.nextOffset;
    const done = log.appendMany(jsons);
    this.#pend(jsons, at);
    return done;
  }

  /**
   * Stores rows a network publisher sent as `tag`'s sequence (see
   * `Log.publish`); stored rows fan out like any commit. Durable streams only.
   */
  publish(jsons: string[], tag: ProducerTag | null): PublishResult {
    const r = this.#log!.publish(jsons, tag);
    if (r.status === "stored") this.#pend(jsons, r.first);
    return r;
  }

  /**
   * A mirror's write: the primary's rows at the primary's offsets (see
   * `Log.appendAt`), made durable, then fanned out as any commit.
   */
  async appendAt(offsets: readonly number[], jsons: readonly string[]): Promise<number> {
    try {
      return await this.#log!.appendAt(offsets, jsons, (from, to) => {
        if (to > from) this.#pend(jsons.slice(from, to), offsets[from]);
      });
    } catch (err) {
      // Nothing else appends to a replica: whatever was pending is gone.
      this.#forget();
      throw err;
    }
  }

  /**
   * A cluster follower's write: the leader's commit as it made it (see
   * `Replication.appendCommit`); its rows this log does not hold yet wait
   * here, as text, until the cluster commits them, then fan out as any
   * commit. Resolves with the durable end.
   */
  appendCommit(commit: ReplicaCommit): Promise<number> {
    const rep = this.#log!.replication!;
    // The rows the log skips (it holds them already) are pending or shown already.
    let skip = Math.max(0, rep.nextOffset - commit.first);
    const at = commit.first + skip;
    const done = rep.appendCommit(commit);
    if (!this.#untracked) {
      const rows: string[] = [];
      for (const run of commit.runs) {
        for (const p of run.payloads) {
          if (skip > 0) skip--;
          else rows.push(typeof p === "string" ? p : decoder.decode(p));
        }
      }
      if (rows.length > 0) this.#pend(rows, at);
    }
    return done.catch((err) => {
      // Which of its rows were placed is not known here: until everything
      // placed is shown, commits reach live subscribers through the log.
      this.#forget();
      this.#untracked = true;
      throw err;
    });
  }

  // Rows appended past the durable end from offset `first`: the array is
  // adopted whole. Rows that do not follow the pending ones replace them
  // (commits of those reach the subscribers through the log).
  #pend(jsons: string[], first: number): void {
    if (this.#untracked || jsons.length === 0) return;
    if (this.#count > 0 && this.#front + this.#count !== first) this.#forget();
    if (this.#count === 0) this.#front = first;
    this.#pending.push(jsons);
    this.#count += jsons.length;
  }

  #forget(): void {
    this.#pending = [];
    this.#head = 0;
    this.#at = 0;
    this.#count = 0;
  }

  // Takes the `n` oldest pending rows (there are at least `n`); with `keep`,
  // returns them in one array (the adopted array itself when it is exactly
  // those rows), else null. The arrays taken are let go at once.
  #take(n: number, keep: boolean): string[] | null {
    const pending = this.#pending;
    let out: string[] | null = null;
    if (keep) {
      const first = pending[this.#head];
      out = this.#at === 0 && first.length === n ? first : [];
    }
    this.#count -= n;
    this.#front += n;
    while (n > 0) {
      const batch = pending[this.#head];
      const k = Math.min(n, batch.length - this.#at);
      if (out !== null && out !== batch) {
        for (let i = this.#at; i < this.#at + k; i++) out.push(batch[i]);
      }
      n -= k;
      this.#at += k;
      if (this.#at === batch.length) {
        pending[this.#head++] = undefined as unknown as string[];
        this.#at = 0;
      }
    }
    if (this.#head === pending.length) {
      this.#pending = [];
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > pending.length) {
      this.#pending = pending.slice(this.#head);
      this.#head = 0;
    }
    return out;
  }

  // An ephemeral stream's rows: those sent in one turn go out together, like a commit.
  #broadcast(jsons: readonly string[]): void {
    if (this.#ephemeral.length === 0) {
      queueMicrotask(() => {
        const rows = this.#ephemeral;
        this.#ephemeral = [];
        this.#counts.appended(rows.length);
        this.#fanout.send(rows, null);
      });
    }
    for (let i = 0; i < jsons.length; i++) this.#ephemeral.push(jsons[i]);
  }

  /** The log made `[first, end)` durable: count it, and hand its rows to the fan-out. */
  committed(first: number, end: number): void {
    const n = end - first;
    if (this.#untracked) {
      this.#counts.appended(n);
      this.#counts.committed(this.#log!.lastCommitMs);
      this.#keys?.committed(first, end, null);
      this.#fanout.toLog();
      if (end >= this.#log!.replication!.nextOffset) this.#untracked = false;
      return;
    }
    // Pending rows below the commit were shown already (through the log).
    if (this.#count > 0 && this.#front < first) {
      this.#take(Math.min(this.#count, first - this.#front), false);
    }
    if (this.#count < n || this.#front !== first) {
      // Rows shown that were never handed here: the live subscribers read
      // them from the log; the pending rows it covers go with them.
      if (this.#count > 0) this.#take(Math.max(0, Math.min(this.#count, end - this.#front)), false);
      this.#counts.appended(n);
      this.#keys?.committed(first, end, null);
      this.#fanout.toLog();
      return;
    }
    const live = this.#fanout.live;
    const keys = this.#keys;
    const rows = this.#take(n, live || keys !== null);
    this.#counts.appended(n);
    this.#counts.committed(this.#log!.lastCommitMs);
    keys?.committed(first, end, rows);
    if (live) this.#fanout.send(rows!, first);
  }

  /** A failed write (`cause`) dropped the appends from `from` on: forget their rows. */
  discarded(from: number, cause?: Error): void {
    if (cause !== undefined) this.#writeFailed(cause);
    const keep = Math.max(0, Math.min(this.#count, from - this.#front));
    const front = this.#front;
    const kept = keep > 0 ? this.#take(keep, true)! : [];
    this.#forget();
    if (kept.length > 0) this.#pend(kept, front);
  }

  /** The log's end moved with no commit (a mirror adopted rows): live subscribers read them. */
  fenced(): void {
    this.#keys?.fromLog();
    this.#fanout.toLog();
  }

  /** The log sealed a segment: a keyed stream saves its index. */
  sealed(): void {
    this.#keys?.sealed();
  }

  /** The next commit's write waits until the fan-out of the previous ones is handed out. */
  beforeCommit(): Promise<void> | null {
    return this.#fanout.idle();
  }
}
