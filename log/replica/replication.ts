/**
 * What a log needs to be one replica of a cluster's stream (`cluster/`):
 * the log opened with `replicated: true` gets a {@linkcode Replication}.
 *
 * - **Durable is not committed.** A row is shown — to readers, to the
 *   fan-out (its listener's `committed`), to the caller awaiting its append — only once
 *   the cluster's commit index passes it (`commit_gate.ts`). The leader's
 *   commit tracker and the follower's sink move the index
 *   ({@linkcode Replication.commitThrough}).
 * - **Local appends only while leading** ({@linkcode Replication.writable});
 *   a follower appends the leader's commits as they were made — the rows'
 *   bytes, their append times, their producer records —
 *   ({@linkcode Replication.appendCommit}), and the leader's own commits are
 *   handed, as they are taken and before anything of them is written, to
 *   whoever ships them ({@linkcode Replication.onTaken}), and once durable to whoever counts
 *   them toward the commit index ({@linkcode Replication.onDurable}). A
 *   follower may so hold rows its leader never synced: they are
 *   uncommitted, and cut like any uncommitted tail when it rejoins.
 * - **Terms.** The log's term history (`term_history.ts`) is kept here: a
 *   term is recorded before its first row.
 * - **Cutting the tail in place.** A node that rejoins as a follower cuts
 *   the rows it wrote past where its log and the leader's part
 *   ({@linkcode Replication.cutTail}); the log stays open, its readers and
 *   subscribers with it (none of them was shown a row past the commit
 *   index, which a cut never reaches).
 * - **Producer records are kept for a cut.** A rewrite of the producer
 *   journal (`../producer/journal.ts`) keeps, for each producer, its last record
 *   known committed and every later one ({@linkcode Replication.keptRecords}),
 *   not only its latest: a cut (never below the commit index) that removes
 *   its latest records leaves the journal the record it falls back to.
 * - **The commit index survives a restart** in `commit.json` (a checked JSON
 *   file, written at most once a second and on close): a node restarted
 *   shows at once the rows it knew committed, and no others. A replicated
 *   log without it shows the rows before its first term (written before the
 *   cluster) and waits for the leader for the rest.
 *
 * ```text
 * commit.json   {"index":1201,"crc32":"…"}\n      every row below 1201 is committed
 * ```
 *
 * @module
 */

import { join } from "node:path";
import { CommitGate } from "./commit_gate.ts";
import type { Committer } from "../committer.ts";
import { NotLeaderError } from "../errors.ts";
import type { LogReader } from "../read/log_reader.ts";
import { readCheckedJson, writeCheckedJson } from "../disk/meta_file.ts";
import { parseJournal, type ProducerRecord, PRODUCERS_FILE } from "../producer/journal.ts";
import { ProducerLru, supersededRecords } from "../producer/table.ts";
import type { Segment } from "../segment/state.ts";
import { TermHistory, type TermStart } from "./term_history.ts";
import type { Truncated } from "./truncate.ts";

/** The name of the commit index checkpoint in a log folder. */
export const COMMIT_FILE = "commit.json";

/** How often, at most, the commit index is written to `commit.json`, ms. */
const CHECKPOINT_EVERY_MS = 1000;

/**
 * Rows written at one append time.
 */
export interface ReplicaRun {
  /** Append time of the rows, µs since the epoch. */
  timeUs: number;
  /** The rows, in offset order. */
  payloads: (Uint8Array | string)[];
}

/**
 * A commit as the leader made it: rows at consecutive offsets from `first`,
 * in runs of one append time, with the producer records of their commits.
 */
export interface ReplicaCommit {
  /** Offset of the first row. */
  first: number;
  /** The rows. */
  runs: ReplicaRun[];
  /** Producer records of the rows' commits. */
  records: ProducerRecord[];
}

/**
 * One of this node's own commits, written (and then durable): what the leader ships.
 */
export interface DurableCommit extends ReplicaCommit {
  /** The offset after its last row. */
  end: number;
}

/** What a {@linkcode Replication} needs of its log. @internal */
export interface ReplicationHost {
  readonly dir: string;
  readonly name: string;
  readonly streamId: string;
  readonly committer: Committer;
  /** The log's segments, oldest first. */
  readonly segments: readonly Segment[];
  /** A reader up to the durable end (not the visible one). */
  durableReader(offset: number): LogReader;
  /** Starts a new segment at `offset`, above everything issued. */
  fence(offset: number): Promise<void>;
  /** Cuts the log's tail in place so that it ends before `offset`. */
  cut(offset: number): Promise<Truncated>;
  /** Rows `[first, end)` are shown (the log listener's `committed`). */
  shown(first: number, end: number): void;
  /** The next offset moved to `offset` over a fenced gap (the log listener's `fenced`). */
  fenced(offset: number): void;
  /** The visible end moved: wake the readers, chunk what it now covers. */
  visible(): void;
}

/**
 * The index every row below which is committed, as `commit.json` in `dir`
 * says — or, without it, where the first term of `terms` began (rows before
 * it were written before the cluster), or null when nothing says.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readCommitIndex } from "./replication.ts";
 * const dir = await Deno.makeTempDir();
 * equal(await readCommitIndex(dir, [{ term: 1, start: 40 }]), 40);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readCommitIndex(
  dir: string,
  terms: readonly TermStart[],
): Promise<number | null> {
  const r = await readCheckedJson<{ index?: unknown }>(join(dir, COMMIT_FILE), ["index"]);
  const index = r?.value.index;
  if (Number.isSafeInteger(index) && (index as number) >= 0) return index as number;
  return terms.length > 0 ? terms[0].start : null;
}

/**
 * A replicated log's side of the cluster; see the module doc.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { replicated: true, timers: false });
 * const rep = log.replication!;
 * rep.writable = true;
 * await rep.beginTerm(1);
 * const acked = log.append("{}");
 * await log.flush();
 * equal(rep.durableEnd, 2);
 * equal(log.endOffset, 1); // durable, not yet committed
 * rep.commitThrough(2); // the cluster holds it
 * equal(await acked, 1);
 * equal(log.endOffset, 2);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class Replication {
  /**
   * Each of this node's own commits, as the commit loop takes it, before its
   * producer journal or its rows are written (the leader ships them then, so
   * that a follower's writes and syncs run beside its own). A write or sync
   * that fails after it stops the log (`../committer.ts`): rows handed on
   * here are never replaced by others at their offsets.
   */
  onTaken: ((commit: DurableCommit) => void) | null = null;
  /**
   * Told once, when the log stops taking appends for good (a write or sync
   * that failed after its commit was handed on, or a failed write it could not
   * cut back): the node can neither lead nor follow with it.
   */
  onStopped: ((err: Error) => void) | null = null;
  /** Each of this node's own commits, once durable (the leader counts them toward the commit index). */
  onDurable: ((commit: DurableCommit) => void) | null = null;
  /** Whether local appends are taken (this node leads). */
  writable = false;
  /**
   * Told, for each commit of this node's, how long it waited between being
   * durable here and being committed in the cluster, ms (for metrics).
   */
  onCommitWait: ((ms: number) => void) | null = null;
  /** Where rows become visible. */
  readonly gate: CommitGate;
  readonly #host: ReplicationHost;
  #terms: TermHistory;
  #checkpointed: number;
  // Producer records for journal rewrites: each producer's last one known
  // committed (oldest use first), and those not known committed, in order.
  // (at most maxProducers per holder, as the producer table keeps them).
  readonly #below: ProducerLru<ProducerRecord>;
  #recent: ProducerRecord[] = [];
  // Ends of commits durable here and not yet shown, with when (for onCommitWait).
  #waits: { end: number; at: number }[] = [];
  // How many times this node's leadership ended (each failWaiters), and the
  // error its waiters were refused with: a local append made under an
  // earlier one is refused when it asks to wait for its commit.
  #ended = 0;
  #endedWith: Error | null = null;
  #checkpointTimer: ReturnType<typeof setTimeout> | undefined;
  #checkpointing: Promise<void> | null = null;

  /** @internal Made by `Log.open`. */
  constructor(
    host: ReplicationHost,
    terms: TermHistory,
    committed: number,
    records: readonly ProducerRecord[],
    maxProducers: number,
    maxProducerHolders?: number,
  ) {
    this.#host = host;
    this.#below = new ProducerLru(maxProducers, maxProducerHolders);
    this.#recent = [...records];
    this.#terms = terms;
    this.gate = new CommitGate(host.committer.end, committed);
    this.#checkpointed = committed;
    host.committer.capture = true;
    this.gate.onVisible = (first, end) => {
      this.#timeWaits(end);
      this.#show(first, end);
      host.visible();
    };
    this.#trim();
  }

  // Tells of rows made visible; a fenced gap among them is told as a fence.
  #show(first: number, end: number): void {
    const host = this.#host;
    const segs = host.segments;
    if (first >= segs[segs.length - 1].info.firstOffset) return host.shown(first, end);
    let at = first;
    for (const { info } of segs) {
      const a = Math.max(at, info.firstOffset);
      const b = Math.min(end, info.firstOffset + info.count);
      if (b <= a) continue;
      if (a > at) host.fenced(a);
      host.shown(a, b);
      at = b;
    }
    if (at < end) host.fenced(end);
  }

  /** @internal Opens the term history and the commit index of the log in `host.dir`. */
  static async open(
    host: ReplicationHost,
    maxProducers: number,
    maxProducerHolders?: number,
  ): Promise<Replication> {
    const terms = await TermHistory.open(host.dir);
    const index = await readCommitIndex(host.dir, terms.entries);
    const records = await journalRecords(host.dir);
    return new Replication(
      host,
      terms,
      index ?? host.committer.end,
      records,
      maxProducers,
      maxProducerHolders,
    );
  }

  /** The log's stream id. */
  get streamId(): string {
    return this.#host.streamId;
  }

  /** The term history, oldest first (a copy). */
  get terms(): TermStart[] {
    return this.#terms.entries;
  }

  /** The durable end: this node's fsync covers every row below it. */
  get durableEnd(): number {
    return this.#host.committer.end;
  }

  /** The next offset an append gets. */
  get nextOffset(): number {
    return this.#host.committer.next;
  }

  /** The commit index known here: every row below it is committed in the cluster. */
  get commitIndex(): number {
    return this.gate.commitIndex;
  }

  /** Callers waiting for a commit. */
  get waiting(): number {
    return this.gate.waiting;
  }

  /**
   * Throws unless local appends are taken now.
   *
   * @throws {NotLeaderError} when this node does not lead.
   */
  checkWritable(): void {
    if (!this.writable) throw new NotLeaderError(this.#host.name, null);
  }

  /** @internal This node's fsync covers every row below `end` (the log's committer says). */
  durable(end: number): void {
    if (this.onCommitWait) this.#waits.push({ end, at: performance.now() });
    this.gate.durable(end);
  }

  #timeWaits(visible: number): void {
    const w = this.#waits;
    if (w.length === 0) return;
    const now = performance.now();
    let i = 0;
    while (i < w.length && w[i].end <= visible) this.onCommitWait?.(now - w[i++].at);
    if (i > 0) this.#waits = w.slice(i);
  }

  /** Every row below `index` is committed in the cluster (shown once durable here too). */
  commitThrough(index: number): void {
    this.gate.commitThrough(index);
    this.#trim();
    if (this.gate.commitIndex > this.#checkpointed && this.#checkpointTimer === undefined) {
      this.#checkpointTimer = setTimeout(() => {
        this.#checkpointTimer = undefined;
        this.checkpoint().catch(() => {}); // written again at the next move or on close
      }, CHECKPOINT_EVERY_MS);
      Deno.unrefTimer(this.#checkpointTimer);
    }
  }

  /**
   * Refuses every caller waiting for a commit with `err` (the rows stay as
   * they are): this node's leadership ended. So are the local appends made
   * under it that ask to wait later ({@linkcode Replication.committed}).
   */
  failWaiters(err: Error): void {
    this.#ended++;
    this.#endedWith = err;
    this.gate.fail(err);
  }

  /**
   * For a local append taken now, `done` its durability: resolves with its
   * value once every row below `end(value)` is visible; rejects as the
   * waiters were refused when this node's leadership ended in between. An
   * append whose fsync completes after its node stopped leading would
   * otherwise wait past the step-down, and be answered once the next
   * leader's rows fill the offsets it was given — other rows, after a cut.
   */
  committed<T>(done: Promise<T>, end: (value: T) => number): Promise<T> {
    const mark = this.#ended;
    return done.then((value) => {
      if (mark !== this.#ended) {
        throw this.#endedWith ?? new NotLeaderError(this.#host.name, null);
      }
      return this.gate.until(end(value)).then(() => value);
    });
  }

  /**
   * Resolves once every row issued to this log is durable or has failed: a
   * node that stopped leading may still have a commit on its way to disk,
   * and compares its tail with a new leader's only after it lands (else the
   * rows would land past the point where it decided to cut).
   *
   * @example
   * ```ts
   * import { equal } from "node:assert/strict";
   * import { Log } from "../log.ts";
   * const dir = await Deno.makeTempDir();
   * const log = await Log.open(dir, { replicated: true, timers: false });
   * const rep = log.replication!;
   * rep.writable = true;
   * await rep.beginTerm(1);
   * log.append("{}").catch(() => {}); // answered once committed, never here
   * rep.writable = false; // deposed, with that commit in flight
   * await rep.settled();
   * equal(rep.durableEnd, 2);
   * await log.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async settled(): Promise<void> {
    await this.#host.committer.flush();
  }

  /**
   * Records, durably, that `term` begins at `start` (default: the next
   * offset), before any row of it is appended.
   */
  async beginTerm(term: number, start: number = this.#host.committer.next): Promise<void> {
    await this.#terms.begin(term, start);
  }

  /**
   * Appends a leader's commit as it was made. At the next offset the rows
   * are placed at once (a following commit may be appended right away);
   * past a fenced gap of the leader's log the log fences first; rows it
   * holds already are skipped. Resolves with the durable end once durable.
   *
   * @throws {RangeError} when the commit would split a producer commit it holds.
   */
  appendCommit(commit: ReplicaCommit): Promise<number> {
    const c = this.#host.committer;
    if (commit.first === c.next) {
      return c.appendRuns(commit.runs, commit.records).then(() => c.end);
    }
    return this.#appendAway(commit);
  }

  async #appendAway(commit: ReplicaCommit): Promise<number> {
    const c = this.#host.committer;
    if (commit.first > c.next) await this.#host.fence(commit.first);
    const skip = c.next - commit.first;
    if (skip <= 0) return await this.appendCommit(commit);
    for (const r of commit.records) {
      if (r.seq > 0 && r.first < c.next && r.last >= c.next) {
        throw new RangeError(
          `producer ${JSON.stringify(r.producer)} seq ${r.seq} holds rows ${r.first}..${r.last}, ` +
            `across this log's end ${c.next}`,
        );
      }
    }
    const runs = [];
    let left = skip;
    for (const run of commit.runs) {
      if (left >= run.payloads.length) {
        left -= run.payloads.length;
        continue;
      }
      runs.push({ timeUs: run.timeUs, payloads: run.payloads.slice(left) });
      left = 0;
    }
    if (runs.length === 0) return c.end;
    const records = commit.records.filter((r) => r.first >= c.next);
    return await this.appendCommit({ first: c.next, runs, records });
  }

  /** A reader of this node's rows up to its durable end (committed or not). */
  reader(offset: number): LogReader {
    return this.#host.durableReader(offset);
  }

  /**
   * Cuts the log's tail so that it ends before `offset` (in place; counted
   * in the answer). Rows below the visible end are never cut.
   *
   * @throws {RangeError} when `offset` is below the visible end, or falls
   *   inside a chunk or a producer commit.
   */
  async cutTail(offset: number): Promise<Truncated> {
    if (offset < this.gate.end) {
      throw new RangeError(
        `cannot cut log ${this.#host.dir} at ${offset}: rows up to ${this.gate.end - 1} ` +
          `are committed`,
      );
    }
    const t = await this.#host.cut(offset);
    this.gate.cut(t.end);
    this.#terms = await TermHistory.open(this.#host.dir);
    this.#recent = this.#recent.filter((r) => r.last < t.end);
    this.#waits = this.#waits.filter((w) => w.end <= t.end);
    return t;
  }

  /**
   * The producer journal's records that still say something (superseded
   * ones left out), oldest first: what the leader ships with rows read back
   * from its log.
   */
  async producerRecords(): Promise<ProducerRecord[]> {
    return (await journalRecords(this.#host.dir)).filter((r) => r.seq > 0);
  }

  /** @internal The producer records of a commit of this log, made durable. */
  recorded(records: readonly ProducerRecord[]): void {
    for (const r of records) this.#recent.push(r);
    this.#trim();
  }

  // Moves the records the commit index has passed to #below.
  #trim(): void {
    const index = this.gate.commitIndex;
    const recent = this.#recent;
    let i = 0;
    while (i < recent.length && recent[i].last < index) {
      const r = recent[i++];
      this.#below.delete(r.producer);
      if (r.seq > 0) this.#below.set(r.producer, r);
    }
    if (i > 0) this.#recent = recent.slice(i);
  }

  /**
   * What a rewrite of the producer journal keeps: each producer's last
   * record known committed, then every record not known committed, in
   * journal order — so that a cut of the uncommitted tail, never below the
   * commit index, finds each producer's record to fall back to.
   */
  keptRecords(): ProducerRecord[] {
    return [...this.#below.values(), ...this.#recent];
  }

  /** Writes the commit index known now to `commit.json` (if it moved). */
  async checkpoint(): Promise<void> {
    while (this.#checkpointing) await this.#checkpointing;
    const index = this.gate.commitIndex;
    if (index <= this.#checkpointed) return;
    this.#checkpointing = writeCheckedJson(join(this.#host.dir, COMMIT_FILE), { index });
    try {
      await this.#checkpointing;
      this.#checkpointed = Math.max(this.#checkpointed, index);
    } finally {
      this.#checkpointing = null;
    }
  }

  /** @internal Stops the checkpoint timer and writes the index (the log is closing). */
  async close(): Promise<void> {
    clearTimeout(this.#checkpointTimer);
    this.#checkpointTimer = undefined;
    await this.checkpoint();
  }
}

// The producer journal's records that still say something (superseded ones
// left out), in journal order.
async function journalRecords(dir: string): Promise<ProducerRecord[]> {
  const path = join(dir, PRODUCERS_FILE);
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return []; // no producer ever published
    throw err;
  }
  const { records } = parseJournal(bytes, path);
  const superseded = supersededRecords(records);
  return records.filter((_, i) => !superseded[i]);
}
