/**
 * The producer table of a log: for each producer name, the last sequence
 * number committed and the offsets its rows got, so that a publish retried
 * after a timeout, a reconnect or a crash is answered instead of stored
 * twice. Its durable form is the journal (`journal.ts`).
 *
 * Invariants (the crash argument is in docs/SPEC.md, "Producer state"):
 * - the committer writes and syncs a commit's journal records BEFORE it
 *   writes any byte of that commit's rows (the OS may flush a file's page
 *   cache at any moment, so the rows must not even be written before);
 * - so on disk: rows durable ⇒ their journal record durable. Acknowledged ⇒
 *   both durable;
 * - on open, a record whose rows `[first, last]` lie wholly below the
 *   recovered end is committed; one that reaches past it was never
 *   acknowledged: it is dropped, and the rows from its `first` on are cut
 *   from the log (rows of an unacknowledged body that survived a torn write
 *   would otherwise be stored again by the resend);
 * - a seq is assigned synchronously, in call order, with its offsets; until
 *   its commit is durable it is *pending*: a retry of it waits for the
 *   commit, then is answered as a duplicate (or fails with it);
 * - a producer commits without holes: once a commit of its seq S fails (a
 *   failed write, a log that stopped), its later seqs are refused
 *   (`blocked`), not stored, until it sends a seq at or below S again — its
 *   publisher resends from `last_seq + 1` — so its last seq never passes a
 *   seq that was not stored. Frames it sent before it learnt of the failure
 *   are refused, not stored out of order. The mark is in memory only: a
 *   restart ends every connection, and with it every frame in flight;
 * - at most `max` producers are remembered per holder; the holder's one
 *   whose last publish is oldest is forgotten first (its next publish starts
 *   it anew);
 * - at most `maxHolders` holders have producers remembered; past it, the
 *   holder whose last publish is oldest is forgotten whole (signed tokens
 *   let any number of holders publish: their state is bounded too).
 *
 * A producer is known by its key ({@linkcode producerKey}): its id alone,
 * or, when the server ties producers to token holders, the holder's name and
 * the id. Another holder sending the same id is another producer, and one
 * holder's new producers push out only its own (docs/SPEC.md §9.3).
 *
 * @module
 */

import type { ProducerRecord } from "./journal.ts";

/** Default of `maxProducers`: producers remembered per log. */
export const DEFAULT_MAX_PRODUCERS = 10_000;

/** Default of `maxProducerHolders`: token holders whose producers are remembered, per log. */
export const DEFAULT_MAX_PRODUCER_HOLDERS = 100_000;

/**
 * The key a producer's state is kept under: the id it sent, or, for a
 * publish by the token holder `holder`, the holder's name, a space and the
 * id. An id holds no space (`PRODUCER_PATTERN`), so the key's last space
 * splits it.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { producerHolder, producerId, producerKey } from "./table.ts";
 * const key = producerKey("alice", "feed-1");
 * deepStrictEqual([key, producerHolder(key), producerId(key)], ["alice feed-1", "alice", "feed-1"]);
 * deepStrictEqual([producerKey(null, "feed-1"), producerHolder("feed-1")], ["feed-1", ""]);
 * ```
 */
export function producerKey(holder: string | null, producer: string): string {
  return holder === null ? producer : `${holder} ${producer}`;
}

/** The holder a producer key belongs to ("" for a key with none). */
export function producerHolder(key: string): string {
  const at = key.lastIndexOf(" ");
  return at === -1 ? "" : key.slice(0, at);
}

/** The producer id a key holds: what the publisher sent. */
export function producerId(key: string): string {
  return key.slice(key.lastIndexOf(" ") + 1);
}

/**
 * Values by producer key, oldest use first, holding at most `max` keys per
 * holder (setting one past it forgets that holder's oldest) and keys of at
 * most `maxHolders` holders (setting one of a holder past it forgets every
 * key of the holder whose latest set is oldest).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { ProducerLru } from "./table.ts";
 * const m = new ProducerLru<number>(2, 2);
 * m.set("bob b1", 1);
 * for (const id of ["a1", "a2", "a3"]) m.set(`alice ${id}`, 1);
 * deepStrictEqual([...m.keys()], ["bob b1", "alice a2", "alice a3"]);
 * m.set("carol c1", 1); // a third holder: bob, whose last set is oldest, goes
 * deepStrictEqual([...m.keys()], ["alice a2", "alice a3", "carol c1"]);
 * ```
 */
export class ProducerLru<V> {
  /** Keys kept per holder. */
  readonly max: number;
  /** Holders kept. */
  readonly maxHolders: number;
  readonly #all = new Map<string, V>();
  // Each holder's keys; holders in the order of their latest set, oldest first.
  readonly #byHolder = new Map<string, Set<string>>();

  /** A map of at most `max` keys per holder, of at most `maxHolders` holders. */
  constructor(max: number, maxHolders: number = DEFAULT_MAX_PRODUCER_HOLDERS) {
    this.max = max;
    this.maxHolders = maxHolders;
  }

  /** Keys held, every holder's. */
  get size(): number {
    return this.#all.size;
  }

  /** The value of `key`, or undefined. */
  get(key: string): V | undefined {
    return this.#all.get(key);
  }

  /** Sets `key` as the latest used of its holder; forgets the holder's oldest past `max`. */
  set(key: string, value: V): void {
    this.delete(key);
    this.#all.set(key, value);
    const holder = producerHolder(key);
    let keys = this.#byHolder.get(holder);
    if (keys === undefined) keys = new Set();
    else this.#byHolder.delete(holder); // set again below: the holder is now the latest
    this.#byHolder.set(holder, keys);
    keys.add(key);
    if (keys.size > this.max) this.delete(keys.values().next().value!);
    while (this.#byHolder.size > this.maxHolders) {
      const [, oldest] = this.#byHolder.entries().next().value!;
      for (const k of [...oldest]) this.delete(k);
    }
  }

  /** Forgets `key`. */
  delete(key: string): void {
    if (!this.#all.delete(key)) return;
    const holder = producerHolder(key);
    const keys = this.#byHolder.get(holder)!;
    keys.delete(key);
    if (keys.size === 0) this.#byHolder.delete(holder);
  }

  /** The keys, oldest use first. */
  keys(): IterableIterator<string> {
    return this.#all.keys();
  }

  /** The values, oldest use first. */
  values(): IterableIterator<V> {
    return this.#all.values();
  }

  /** The entries, oldest use first. */
  entries(): IterableIterator<[string, V]> {
    return this.#all.entries();
  }
}

/**
 * What a producer last committed.
 */
export interface ProducerState {
  /** The last sequence number committed. */
  seq: number;
  /** First offset of that commit. */
  first: number;
  /** Last offset of that commit. */
  last: number;
}

/**
 * What a publish did: stored (offsets assigned, `done` resolves once
 * durable), a duplicate of the producer's last seq (its original offsets,
 * `done` resolves once that commit is durable), a stale seq (below the
 * last one; nothing stored), or blocked (an earlier seq of the producer,
 * `failedSeq`, failed to be stored, and this one is above it: nothing
 * stored; the producer sends again from `lastSeq + 1`).
 */
export type PublishResult =
  | { status: "stored"; first: number; last: number; done: Promise<void> }
  | { status: "duplicate"; seq: number; first: number; last: number; done: Promise<void> }
  | { status: "stale"; lastSeq: number }
  | { status: "blocked"; failedSeq: number; lastSeq: number };

/**
 * The producer table: committed state (oldest use first) and pending seqs.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ProducerTable } from "./table.ts";
 * const t = new ProducerTable(10);
 * t.assign("a", { seq: 1, first: 1, last: 5 }, Promise.resolve());
 * equal(t.check("a", 1)?.status, "duplicate");
 * equal(t.check("a", 0)?.status, "stale");
 * equal(t.check("a", 2), null);
 * ```
 */
export class ProducerTable {
  /** Producers remembered per holder. */
  readonly max: number;
  /** Holders whose producers are remembered. */
  readonly maxHolders: number;
  readonly #committed: ProducerLru<ProducerState>;
  readonly #pending = new Map<string, { state: ProducerState; done: Promise<void> }>();
  // Producers whose commit failed or was refused: the seq that failed, above
  // which nothing is stored until a seq at or below it is (see the module doc,
  // `refused` and `discarded`).
  // Bounded like the table: a holder's oldest block goes first.
  readonly #blocked: ProducerLru<number>;

  /** A table remembering at most `max` producers per holder, of at most `maxHolders` holders. */
  constructor(max: number, maxHolders: number = DEFAULT_MAX_PRODUCER_HOLDERS) {
    if (!Number.isSafeInteger(max) || max < 1) {
      throw new RangeError(`maxProducers must be an integer ≥ 1, got ${max}`);
    }
    if (!Number.isSafeInteger(maxHolders) || maxHolders < 1) {
      throw new RangeError(`maxProducerHolders must be an integer ≥ 1, got ${maxHolders}`);
    }
    this.max = max;
    this.maxHolders = maxHolders;
    this.#committed = new ProducerLru(max, maxHolders);
    this.#blocked = new ProducerLru(max, maxHolders);
  }

  /** Producers remembered (committed state). */
  get size(): number {
    return this.#committed.size;
  }

  /** The producer's committed state, or null. */
  committedState(producer: string): ProducerState | null {
    return this.#committed.get(producer) ?? null;
  }

  /** Resolves once the producer's pending commit (if any) has settled. */
  async settled(producer: string): Promise<void> {
    const p = this.#pending.get(producer);
    if (p) await p.done.catch(() => {});
  }

  /**
   * The answer to a publish of `seq` by `producer` that must not be stored
   * (a duplicate or a stale seq), or null when it may be stored.
   */
  check(producer: string, seq: number): PublishResult | null {
    const p = this.#pending.get(producer);
    const state = p?.state ?? this.#committed.get(producer);
    if (!state || seq > state.seq) {
      const failed = this.#blocked.get(producer);
      if (failed === undefined || seq <= failed) return null;
      return { status: "blocked", failedSeq: failed, lastSeq: state?.seq ?? 0 };
    }
    if (seq === state.seq) {
      return {
        status: "duplicate",
        seq,
        first: state.first,
        last: state.last,
        done: p ? p.done : Promise.resolve(),
      };
    }
    return { status: "stale", lastSeq: state.seq };
  }

  /** Records a seq assigned offsets; pending until {@linkcode ProducerTable.committed}. */
  assign(producer: string, state: ProducerState, done: Promise<void>): void {
    done.catch(() => {}); // the publisher sees the failure through its own promise
    this.#pending.set(producer, { state, done });
    this.#blocked.delete(producer); // sent again from at or below the failed seq
  }

  /**
   * Blocks `producer` after its publish of `seq` is refused before the log
   * (a full disk: nothing of it stored): its later seqs are refused as after
   * a failed commit (`blocked`) until it sends `seq` again, so frames
   * pipelined behind it leave no hole. The block stays at the lowest seq
   * refused: a window of frames refused one after another, then sent again
   * while the disk fills and empties, must not let a later seq of it in
   * while an earlier one is refused once more. A seq at or below the
   * producer's last one is a duplicate or stale: nothing to block.
   *
   * @example
   * ```ts
   * import { equal } from "node:assert/strict";
   * import { ProducerTable } from "./table.ts";
   * const t = new ProducerTable(10);
   * t.assign("a", { seq: 4, first: 1, last: 1 }, Promise.resolve());
   * t.refused("a", 5);
   * t.refused("a", 6); // pipelined behind 5
   * equal(t.check("a", 6)?.status, "blocked");
   * equal(t.check("a", 5), null); // sent again: stored
   * ```
   */
  refused(producer: string, seq: number): void {
    const state = this.#pending.get(producer)?.state ?? this.#committed.get(producer);
    if (state !== undefined && seq <= state.seq) return;
    this.#block(producer, seq);
  }

  // Blocks `producer` above `seq`, or lower than it is: the block stays at the
  // lowest seq that failed or was refused, so no later one gets in before it.
  #block(producer: string, seq: number): void {
    const failed = this.#blocked.get(producer);
    if (failed === undefined || seq < failed) this.#blocked.set(producer, seq);
  }

  /** Journal records of a commit made durable: they become the committed state. */
  committed(records: readonly ProducerRecord[]): void {
    for (const r of records) {
      const p = this.#pending.get(r.producer);
      if (p && p.state.seq === r.seq) this.#pending.delete(r.producer);
      this.#remember(r);
    }
  }

  #remember(r: ProducerRecord): void {
    if (r.seq === 0) this.#committed.delete(r.producer);
    else this.#committed.set(r.producer, { seq: r.seq, first: r.first, last: r.last });
  }

  /**
   * Appends from offset `from` on were dropped by a failed write: forgets
   * their pending seqs, blocks their producers above them (see the module
   * doc), and returns the records that put the journal back to the committed
   * state of those producers (their state, or seq 0).
   */
  discarded(from: number): ProducerRecord[] {
    const back: ProducerRecord[] = [];
    for (const [producer, p] of [...this.#pending]) {
      if (p.state.first < from) continue;
      this.#pending.delete(producer);
      this.#block(producer, p.state.seq);
      const c = this.#committed.get(producer);
      back.push(c ? { producer, ...c } : { producer, seq: 0, first: 0, last: 0 });
    }
    return back;
  }

  /** The committed state as journal records, oldest use first (what a rewrite keeps). */
  snapshot(): ProducerRecord[] {
    return [...this.#committed.entries()].map(([producer, s]) => ({ producer, ...s }));
  }
}

/**
 * Which journal records are superseded: followed, later in the journal, by a
 * record of the same producer with a seq at or below theirs. A producer's
 * lasting records only ever go up in seq, so such a record never became its
 * state: it was dropped at an open (an unacknowledged commit, sent again),
 * put back after a failed write, or forgotten (seq 0). Journals written
 * before opens rewrote their dropped records may hold such records.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { supersededRecords } from "./table.ts";
 * const records = [
 *   { producer: "a", seq: 4, first: 31, last: 40 }, // dropped at an open, then sent again
 *   { producer: "a", seq: 4, first: 31, last: 35 },
 * ];
 * deepStrictEqual(supersededRecords(records), [true, false]);
 * ```
 */
export function supersededRecords(records: readonly ProducerRecord[]): boolean[] {
  const out = new Array<boolean>(records.length).fill(false);
  const lowest = new Map<string, number>(); // the lowest seq of each producer's later records
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i];
    const later = lowest.get(r.producer);
    if (later !== undefined && later <= r.seq) out[i] = true;
    if (later === undefined || r.seq < later) lowest.set(r.producer, r.seq);
  }
  return out;
}

/**
 * Rebuilds the table from the journal's records and the log's recovered end
 * (exclusive): records wholly below it are committed; records that reach past
 * it were never acknowledged and are dropped (`dropped` counts them: the
 * journal must then be rewritten from the table before the log grows, or a
 * dropped record would later pass for committed). `cut` is where the log must
 * be cut back to (the first offset of a dropped record that starts below the
 * end), or null. Superseded records ({@linkcode supersededRecords}) never
 * cut. `kept` are the records not dropped and not superseded, in journal
 * order: what a replicated log's journal is rewritten as.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { recoverProducers } from "./table.ts";
 * const records = [
 *   { producer: "a", seq: 1, first: 1, last: 10 },
 *   { producer: "a", seq: 2, first: 11, last: 20 }, // torn: the log ends at 15
 * ];
 * const { table, cut, dropped, kept } = recoverProducers(records, 16, 100);
 * equal(table.committedState("a")?.seq, 1);
 * equal(cut, 11);
 * equal(dropped, 1);
 * equal(kept.length, 1);
 * ```
 */
export function recoverProducers(
  records: readonly ProducerRecord[],
  end: number,
  max: number,
  maxHolders: number = DEFAULT_MAX_PRODUCER_HOLDERS,
): { table: ProducerTable; cut: number | null; dropped: number; kept: ProducerRecord[] } {
  const superseded = supersededRecords(records);
  let limit = end;
  let cut: number | null = null;
  for (let changed = true; changed;) {
    changed = false;
    for (let i = 0; i < records.length; i++) {
      const r = records[i];
      if (!superseded[i] && r.seq > 0 && r.last >= limit && r.first < limit) {
        limit = r.first;
        cut = r.first;
        changed = true;
      }
    }
  }
  const kept: ProducerRecord[] = [];
  const lasting: ProducerRecord[] = []; // kept, and not superseded
  for (let i = 0; i < records.length; i++) {
    const r = records[i];
    if (r.seq !== 0 && r.last >= limit) continue;
    kept.push(r);
    if (!superseded[i]) lasting.push(r);
  }
  const table = new ProducerTable(max, maxHolders);
  table.committed(kept);
  return { table, cut, dropped: records.length - kept.length, kept: lasting };
}
