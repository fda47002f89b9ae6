/**
 * Group commit: `append` assigns offsets synchronously in call order and
 * encodes the rows into the active segment's writer; one commit loop writes
 * everything pending with one write and one `syncData`, then advances the
 * durable end, tells the log, and resolves the callers — never before. It
 * also seals (rolls) the active segment by size, age or request, making the
 * next one, and cuts a failed write back to what was durable.
 *
 * A log that keeps its commits' rows (`capture`, a replicated log) is told
 * of each commit as the loop takes it, before its producer journal or its
 * rows are written (`CommitHost.taken`), so that a leader's followers write
 * and sync while it does. Those rows may then be held elsewhere: a write or
 * a sync that fails after it fails the log for good (the offsets are never
 * given to other rows), where in a log that hands nothing on a failed write
 * is cut back as usual.
 *
 * @module
 */

import { SegmentWriter } from "./segment/writer.ts";
import type { ProducerRecord } from "./producer/journal.ts";
import { LogWriteError } from "./errors.ts";
import type { ResolvedOptions } from "./options.ts";
import {
  type Active,
  createSegmentFile,
  initialState,
  newSegmentState,
  nowUs,
  type Segment,
} from "./segment/state.ts";

/** What the committer tells the log. */
export interface CommitHost {
  /**
   * Offsets `[first, end)` are durable (called before their callers resolve);
   * `tags` are the producer records of the commit (null: none); `runs` its
   * rows by append time when the committer keeps them (`capture`), else null.
   */
  committed(
    first: number,
    end: number,
    tags: readonly ProducerRecord[] | null,
    runs: CommitRun[] | null,
  ): void;
  /** A commit round ended: readers may look again. */
  wake(): void;
  /** The active segment was sealed and the next one made. */
  sealed(): void;
  /** Appends assigned offsets from `from` on were dropped by a failed write (`cause`). */
  discarded(from: number, cause: Error): void;
  /**
   * Offsets `[first, end)` are taken by the commit loop, nothing of them
   * written yet (called only when the committer keeps the rows, `capture`):
   * `tags` and `runs` as for `committed`. The writes and syncs that follow
   * wait for nothing it does. Returns whether the commit was handed on (a
   * leader ships it): if so, a write or sync that fails after stops the log.
   */
  taken?(
    first: number,
    end: number,
    tags: readonly ProducerRecord[] | null,
    runs: CommitRun[],
  ): boolean;
  /**
   * Called before a commit's bytes are written, with its producer records
   * (null: none) and, for a commit of a log that keeps its rows (`capture`),
   * its end offset (`through`; else null): the producer journal's write and
   * sync for it (see `producer/table.ts`), or null when it has nothing to
   * write. The rows' write waits for it, unless `through` was given — then
   * the journal, with its mark, is written beside the rows and the commit is
   * durable once both are synced (see `producer/journal.ts`).
   */
  journalWrite?(
    tags: readonly ProducerRecord[] | null,
    through: number | null,
  ): Promise<void> | null;
  /** Called before a commit's bytes are written: what the write waits for first, or null. */
  writeGate?(): Promise<void> | null;
}

/** The producer sequence a publish is tagged with (see `producer/table.ts`). */
export interface ProducerTag {
  /** The producer's name. */
  producer: string;
  /** Its sequence number (≥ 1). */
  seq: number;
}

/**
 * Rows of one commit written at one append time.
 */
export interface CommitRun {
  /** Append time of the rows, µs. */
  timeUs: number;
  /** The rows, in offset order. */
  payloads: (Uint8Array | string)[];
}

/** The identity of the log a committer writes. */
export interface CommitLog {
  dir: string;
  streamId: string;
  name: string;
}

interface Group {
  first: number;
  count: number;
  /** Append time of the group's rows, µs. */
  timeUs: number;
  /** Producer records of tagged appends in the group (null: none). */
  tags: ProducerRecord[] | null;
  /** The group's rows by append time, when the committer keeps them. */
  runs: CommitRun[] | null;
  promise: Promise<void>;
  resolve: () => void;
  reject: (err: Error) => void;
}

function utf8Length(s: string): number {
  return new TextEncoder().encode(s).length;
}

/**
 * The group-commit loop of one log.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Committer } from "./committer.ts";
 * import { resolveOptions } from "./options.ts";
 * import { SegmentWriter } from "./segment/writer.ts";
 * import { createSegmentFile, initialState, newSegmentState } from "./segment/state.ts";
 * const dir = await Deno.makeTempDir();
 * const opts = resolveOptions({ timers: false });
 * const id = "0".repeat(32);
 * const seg = newSegmentState(dir, id, "t", 1, opts);
 * const file = await createSegmentFile(seg);
 * const st = initialState();
 * const active = { seg, writer: new SegmentWriter(seg.layout.interval, st), file, durable: st };
 * const host = { committed: () => {}, wake: () => {}, sealed: () => {}, discarded: () => {} };
 * const c = new Committer({ dir, streamId: id, name: "t" }, opts, [seg], active, host);
 * equal(await c.append("{}"), 1);
 * equal(c.end, 2);
 * file.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class Committer {
  /** Duration of the last commit's write + sync, ms (for metrics). */
  lastCommitMs = 0;
  /** Keep each commit's rows until durable, for `CommitHost.committed` (a replicated log ships them). */
  capture = false;
  readonly #host: CommitHost;
  readonly #opts: ResolvedOptions;
  readonly #dir: string;
  readonly #streamId: string;
  readonly #name: string;
  readonly #segments: Segment[];
  #active: Active;
  #next: number;
  #end: number;
  #group: Group | null = null;
  #committing = false;
  #scheduled = false;
  #rollRequested = false;
  #failed: Error | null = null;
  #closed = false;
  #idle: Promise<void> = Promise.resolve();
  #idleResolve: (() => void) | null = null;
  // The append time of the newest group: a clock that steps back is clamped
  // to it, so append times never decrease in offset order (since= relies on it).
  #lastTimeUs: number;

  /** A committer appending to `active`, the last of `segments` (shared with the log). */
  constructor(
    log: CommitLog,
    opts: ResolvedOptions,
    segments: Segment[],
    active: Active,
    host: CommitHost,
  ) {
    this.#dir = log.dir;
    this.#streamId = log.streamId;
    this.#name = log.name;
    this.#opts = opts;
    this.#segments = segments;
    this.#active = active;
    this.#host = host;
    this.#next = active.seg.info.firstOffset + active.seg.info.count;
    this.#end = this.#next;
    this.#lastTimeUs = active.seg.info.lastTimeUs;
    for (const seg of segments) this.#lastTimeUs = Math.max(this.#lastTimeUs, seg.info.lastTimeUs);
  }

  /**
   * The append time of the newest commit (µs; 0 before any), the floor of the
   * next one's. The log raises it on open to what its chunks last held.
   */
  get lastTimeUs(): number {
    return this.#lastTimeUs;
  }

  /** Raises the floor of the next append time to `us` (on open, from the manifest). */
  seedTime(us: number): void {
    if (us > this.#lastTimeUs) this.#lastTimeUs = us;
  }

  /** The durable end (exclusive). */
  get end(): number {
    return this.#end;
  }

  /** The next offset an append gets. */
  get next(): number {
    return this.#next;
  }

  /** The segment being appended to. */
  get active(): Active {
    return this.#active;
  }

  /** The error that stopped the log, if one did. */
  get failed(): Error | null {
    return this.#failed;
  }

  /** Refuses appends from now on (the log is closing). */
  close(): void {
    this.#closed = true;
  }

  /** Appends one payload; resolves with its offset once durable. */
  append(payload: Uint8Array | string): Promise<number> {
    this.#checkAppend(payload);
    const g = this.#encode([payload]);
    const offset = this.#next - 1;
    return g.promise.then(() => offset);
  }

  /**
   * Appends payloads in one commit; resolves with the first offset once all
   * are durable. With `tag`, the commit's producer record goes to the
   * journal before the rows are written (see `producer/table.ts`).
   */
  appendMany(payloads: readonly (Uint8Array | string)[], tag?: ProducerTag): Promise<number> {
    for (const p of payloads) this.#checkAppend(p);
    const first = this.#next;
    if (payloads.length === 0) {
      if (tag) throw new RangeError("a tagged append needs at least one payload");
      return Promise.resolve(first);
    }
    const g = this.#encode(payloads);
    if (tag) {
      (g.tags ??= []).push({ ...tag, first, last: first + payloads.length - 1 });
    }
    return g.promise.then(() => first);
  }

  /**
   * Appends a leader's commit as it was made (a follower of a cluster): its
   * runs of rows at their own append times, and its producer records, in
   * one commit; resolves with the first offset once all are durable.
   */
  appendRuns(runs: readonly CommitRun[], records: readonly ProducerRecord[]): Promise<number> {
    for (const r of runs) for (const p of r.payloads) this.#checkAppend(p);
    const first = this.#next;
    let g: Group | null = null;
    for (const r of runs) if (r.payloads.length > 0) g = this.#encode(r.payloads, r.timeUs);
    if (g === null) return Promise.resolve(first);
    if (records.length > 0) (g.tags ??= []).push(...records);
    return g.promise.then(() => first);
  }

  // Encodes checked payloads into the pending group at the next offsets. The
  // append time is read once per group (the clock showed in profiles when
  // read per row): rows of one commit share it, clamped to the previous
  // group's so that it never decreases. A leader's rows keep their own time.
  #encode(payloads: readonly (Uint8Array | string)[], timeUs?: number): Group {
    const g = this.#group ?? this.#newGroup(this.#next);
    const time = timeUs ?? g.timeUs;
    if (time > this.#lastTimeUs) this.#lastTimeUs = time;
    const info = this.#active.seg.info;
    if (info.firstTimeUs === 0) info.firstTimeUs = time;
    this.#active.writer.appendMany(this.#next, time, payloads);
    if (g.runs !== null) {
      const run = g.runs[g.runs.length - 1];
      if (run?.timeUs === time) { for (const p of payloads) run.payloads.push(p); }
      else g.runs.push({ timeUs: time, payloads: payloads.slice() });
    }
    this.#next += payloads.length;
    g.count += payloads.length;
    this.schedule();
    return g;
  }

  #checkAppend(payload: Uint8Array | string): void {
    if (this.#closed) throw new Deno.errors.BadResource(`log ${this.#dir} is closed`);
    if (this.#failed) throw this.#failed;
    const max = this.#opts.maxPayloadBytes;
    // A string's UTF-8 size is between its length and three times it.
    if (typeof payload === "string" && payload.length * 3 <= max) return;
    const bytes = typeof payload === "string" ? utf8Length(payload) : payload.length;
    if (bytes > max) {
      throw new RangeError(`payload is ${bytes} bytes; the limit is ${max}`);
    }
  }

  #newGroup(first: number): Group {
    let resolve!: () => void;
    let reject!: (e: Error) => void;
    const promise = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // A caller that never awaits must not cause an unhandled rejection here:
    // the rejection reaches every caller through its own `.then`.
    promise.catch(() => {});
    const timeUs = Math.max(nowUs(this.#opts.clock), this.#lastTimeUs);
    this.#lastTimeUs = timeUs;
    const runs = this.capture ? [] : null;
    this.#group = { first, count: 0, timeUs, promise, resolve, reject, tags: null, runs };
    return this.#group;
  }

  /** Runs the commit loop soon (in a microtask), unless it runs already. */
  schedule(): void {
    if (this.#committing || this.#scheduled) return;
    this.#scheduled = true;
    if (!this.#idleResolve) {
      this.#idle = new Promise((r) => (this.#idleResolve = r));
    }
    queueMicrotask(() => {
      this.#scheduled = false;
      this.#commitLoop();
    });
  }

  async #commitLoop(): Promise<void> {
    if (this.#committing) return;
    this.#committing = true;
    try {
      while (!this.#failed && (this.#group || this.#rollRequested || this.dueToRoll())) {
        const a = this.#active;
        const roll = a.writer.state.count > 0 &&
          (this.#rollRequested || this.dueToRoll());
        this.#rollRequested = false;
        if (roll) a.writer.seal();
        const group = this.#group;
        this.#group = null;
        const state = { ...a.writer.state };
        const bytes = a.writer.take();
        let next: Segment | null = null;
        if (roll) {
          // New appends go to the next segment from now on; its file is made
          // below, once this one is sealed on disk.
          next = newSegmentState(this.#dir, this.#streamId, this.#name, this.#next, this.#opts);
          const st = initialState();
          this.#active = {
            seg: next,
            writer: new SegmentWriter(next.layout.interval, st),
            file: null,
            durable: st,
          };
        }
        const t0 = performance.now();
        // Whether the host handed the group's rows on before they were written.
        let told = false;
        // A log that keeps its rows (a replicated one) marks each commit's end in its journal.
        const through = group?.runs && group.count > 0 ? group.first + group.count : null;
        try {
          if (through !== null && this.#host.taken) {
            told = this.#host.taken(group!.first, through, group!.tags, group!.runs!);
          }
          // --- producer journal (`producer/table.ts`): synced before any row byte is
          // written, or beside the rows with a mark of the commit's end (a replicated log) ---
          let journal = this.#host.journalWrite?.(group?.tags ?? null, through) ?? null;
          const gate = this.#host.writeGate?.() ?? null;
          if (gate !== null) await gate;
          if (journal !== null && through === null) {
            await journal;
            journal = null;
          }
          // A failed journal beside the rows is seen once they are written.
          journal?.catch(() => {});
          if (this.#failed) throw this.#failed;
          // --- end of producer journal ---
          // A segment whose file could not be made when the one before it
          // was sealed (a full disk) is made now, before its first row.
          if (a.file === null) await this.#makeActiveFile(a);
          if (bytes.length > 0) {
            await this.#opts.io.write(a.file!, bytes);
            if (this.#opts.fsync || roll) await this.#opts.io.syncData(a.file!);
          }
          if (journal !== null) await journal;
          if (this.#failed) throw this.#failed;
        } catch (err) {
          if (told) this.#failTold(group!, err);
          else await this.#failWrite(a, group, err, roll);
          break;
        }
        this.lastCommitMs = performance.now() - t0;
        a.durable = state;
        a.seg.info.size = state.physEnd;
        a.seg.info.count = state.count;
        a.seg.info.lastTimeUs = state.lastTimeUs;
        if (group) {
          this.#end = group.first + group.count;
          try {
            this.#host.committed(group.first, this.#end, group.tags, group.runs);
          } finally {
            group.resolve();
          }
        }
        this.#host.wake();
        if (roll && next) {
          a.seg.info.sealed = true;
          a.file!.close();
          a.file = null;
          try {
            await this.#makeActiveFile(this.#active);
          } catch {
            // A full disk, say: the next commit tries again before it writes.
          }
          this.#host.sealed();
        }
      }
    } finally {
      this.#committing = false;
      if (this.#group && !this.#failed) this.schedule();
      else if (this.#idleResolve) {
        this.#idleResolve();
        this.#idleResolve = null;
      }
    }
  }

  // Makes the file of the active segment `a` (its header, synced) and lists
  // the segment. A failed attempt leaves what it wrote: the next one
  // truncates it, and an open after a crash takes a segment file with a
  // torn header for an empty one, which also says where the log goes on
  // when its chunks hold everything before it.
  async #makeActiveFile(a: Active): Promise<void> {
    try {
      a.file = await createSegmentFile(a.seg, this.#opts.io);
    } catch (err) {
      throw new LogWriteError(`cannot create segment ${a.seg.info.path}: ${err}`, err);
    }
    this.#segments.push(a.seg);
  }

  /** Whether the active segment is due to be sealed (by size or age). */
  dueToRoll(): boolean {
    const a = this.#active;
    const st = a.writer.state;
    if (st.count === 0) return false;
    if (st.physEnd >= this.#opts.segmentBytes) return true;
    const first = a.seg.info.firstTimeUs;
    const every = this.#opts.sealEveryMs;
    return every > 0 && first > 0 && nowUs(this.#opts.clock) - first >= every * 1000;
  }

  // A write failed (e.g. a full disk): nothing of this group or of the appends
  // queued behind it is kept; the file is cut back to its durable size so the
  // log stays usable. If even that fails, the log refuses further appends.
  // What is pending is settled first, with no await: an append made while the
  // file is being cut gets the next offset after the durable end, and its
  // commit runs after this one's loop, once the cut is done.
  async #failWrite(a: Active, group: Group | null, cause: unknown, rolled: boolean): Promise<void> {
    const err = new LogWriteError(
      `append to ${this.#dir} failed: ${cause instanceof Error ? cause.message : cause}`,
      cause,
    );
    const from = group ? group.first : this.#end;
    group?.reject(err);
    this.#group?.reject(err);
    this.#group = null;
    this.#next = this.#end;
    if (rolled) {
      // The next segment never reached disk: go back to the one that failed.
      this.#active = a;
    }
    a.writer.reset(a.durable);
    if (a.durable.count === 0) a.seg.info.firstTimeUs = 0;
    this.#host.discarded(from, err);
    if (a.file === null) return; // its file was never made: nothing to cut
    try {
      await this.#opts.io.truncate(a.file, a.durable.physEnd);
      a.file.seekSync(a.durable.physEnd, Deno.SeekMode.Start);
    } catch (e) {
      this.fail(new LogWriteError(`log ${this.#dir} cannot recover from a failed write: ${e}`, e));
    }
  }

  // A write or a sync failed after the host was told of the group's rows:
  // they may be held elsewhere (a follower), so their offsets must never be
  // given to other rows. The log refuses every further append; the group and what is
  // queued behind it are refused, never acknowledged.
  #failTold(group: Group, cause: unknown): void {
    const err = new LogWriteError(
      `write of ${this.#dir} failed after its rows were handed on; the log is stopped: ${
        cause instanceof Error ? cause.message : cause
      }`,
      cause,
      true,
    );
    group.reject(err);
    this.#failed = err;
    this.#group?.reject(err);
    this.#group = null;
    this.#next = this.#end;
    this.#host.discarded(group.first, err);
  }

  /** Refuses every further append with `err` (and drops what is pending). */
  fail(err: Error): void {
    this.#failed = err;
    this.#group?.reject(err);
    this.#group = null;
    this.#next = this.#end;
    this.#host.discarded(this.#end, err);
  }

  /** Seals the active segment now if it holds rows (after what is pending). */
  async roll(): Promise<void> {
    if (this.#active.writer.state.count === 0) return;
    this.#rollRequested = true;
    this.schedule();
    await this.flush();
  }

  /** Resolves once everything appended so far is committed (or failed). */
  async flush(): Promise<void> {
    while (this.#committing || this.#scheduled || this.#group) await this.#idle;
  }

  /**
   * Appends go to `active` from offset `offset` on (a fence made it; the old
   * active segment is gone). Only when nothing is pending.
   */
  restartAt(active: Active, offset: number): void {
    this.#active = active;
    this.#next = offset;
    this.#end = offset;
  }
}
