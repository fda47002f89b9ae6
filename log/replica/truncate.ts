/**
 * Cutting a closed log's tail back to an offset: what a deposed leader or a
 * diverged follower does before it copies the leader's rows from there
 * (the offset comes from the term histories, `term_history.ts`). Rows at
 * and after the offset were never committed; rows before it are kept, byte
 * for byte.
 *
 * The log is taken with its writer's lock (so never while open), and:
 * 1. refused when a chunk holds a row at or after the offset (chunks are
 *    made of committed rows only, and never change), or when the offset
 *    falls inside one producer commit (a producer's frame is stored whole
 *    or not at all);
 * 2. the segments that begin after the offset are deleted, newest first;
 * 3. the segment holding the offset is truncated at that record (its end
 *    mark goes with it, so it becomes the active segment) with
 *    `../segment/tail_cut.ts`, and synced;
 * 4. the term history forgets the terms that began at or after it.
 * A crash between steps leaves a log that opens, ending between the offset
 * and where it ended; cutting again finishes the job. The producer journal
 * is put right by the next open: its records of rows past the end are
 * dropped (`../producer/table.ts`).
 *
 * @module
 */

import { syncDir } from "../disk/atomic_write.ts";
import { LogCorruptError } from "../errors.ts";
import { readManifest } from "../chunk/manifest_file.ts";
import { takeWriterLock } from "../disk/writer_lock.ts";
import { type LogOptions, type ResolvedOptions, resolveOptions } from "../options.ts";
import { ProducerJournal } from "../producer/journal.ts";
import { type ProducerTable, supersededRecords } from "../producer/table.ts";
import { type Recovered, recoverLog } from "../recovery.ts";
import type { Committer } from "../committer.ts";
import { cutActiveAt } from "../segment/tail_cut.ts";
import { TermHistory } from "./term_history.ts";
import { type Active, initialState, type Segment } from "../segment/state.ts";
import { META_FILE, readMeta } from "../log_meta.ts";
import { SegmentWriter } from "../segment/writer.ts";

/**
 * What {@linkcode truncateLog} did.
 */
export interface Truncated {
  /** The log's end after the cut (exclusive): the offset, or lower across a fenced gap. */
  end: number;
  /** Rows cut. */
  rows: number;
}

/**
 * Cuts the closed log in `dir` so that it ends before `offset`; see the
 * module doc.
 *
 * @throws {LogLockedError} when the log is open.
 * @throws {RangeError} when a chunk or a producer commit would be cut.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * import { truncateLog } from "./truncate.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { timers: false });
 * await log.appendMany(["{}", "{}", "{}", "{}"]);
 * await log.close();
 * equal((await truncateLog(dir, 3)).rows, 2);
 * const again = await Log.open(dir, { timers: false });
 * equal(again.endOffset, 3);
 * equal(await again.append("{}"), 3);
 * await again.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function truncateLog(
  dir: string,
  offset: number,
  options: LogOptions = {},
): Promise<Truncated> {
  if (!Number.isSafeInteger(offset) || offset < 1) {
    throw new RangeError(`a log is cut at an integer offset ≥ 1, got ${offset}`);
  }
  if (await readMeta(dir) === null) {
    throw new Deno.errors.NotFound(`no log in ${dir} (${META_FILE} is missing)`);
  }
  const lock = await takeWriterLock(dir);
  try {
    return await cutClosedLog(dir, offset, resolveOptions({ ...options, timers: false }));
  } finally {
    lock.close();
  }
}

/**
 * {@linkcode truncateLog}'s work, for a caller that holds the log's lock and
 * has closed its files (a replicated log cutting its own tail in place, see
 * `replication.ts`); the caller recovers the log afterwards.
 *
 * @throws {RangeError} when a chunk or a producer commit would be cut.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * import { resolveOptions } from "../options.ts";
 * import { cutClosedLog } from "./truncate.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { timers: false });
 * await log.appendMany(["{}", "{}", "{}"]);
 * await log.close();
 * equal((await cutClosedLog(dir, 2, resolveOptions({ timers: false }))).end, 2);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function cutClosedLog(
  dir: string,
  offset: number,
  opts: ResolvedOptions,
): Promise<Truncated> {
  const { segments, active } = await recoverLog(dir, { create: false }, opts);
  active.file?.close();
  const last = segments[segments.length - 1];
  const end = last.info.firstOffset + last.info.count;
  const terms = await TermHistory.open(dir);
  if (offset >= end) {
    await terms.truncateFrom(end + 1); // terms begun past the end held no row
    return { end, rows: 0 };
  }
  const manifest = await readManifest(dir);
  const chunk = manifest?.chunks.find((c) => c.last >= offset);
  if (chunk) {
    throw new RangeError(
      `cannot cut log ${dir} at ${offset}: chunk ${chunk.sha256} holds rows ` +
        `${chunk.first}..${chunk.last} (chunks are never cut)`,
    );
  }
  const { journal, records } = await ProducerJournal.open(dir, { sync: opts.fsync });
  journal.close();
  const superseded = supersededRecords(records);
  const split = records.find((r, i) =>
    !superseded[i] && r.seq > 0 && r.first < offset && offset <= r.last
  );
  if (split) {
    throw new RangeError(
      `cannot cut log ${dir} at ${offset}: producer ${JSON.stringify(split.producer)} seq ` +
        `${split.seq} holds rows ${split.first}..${split.last} (a commit is cut whole)`,
    );
  }
  let rows = 0;
  // Newest first: each step leaves a log that opens.
  while (segments.length > 1 && segments[segments.length - 1].info.firstOffset > offset) {
    const seg = segments.pop()!;
    rows += seg.info.count;
    await Deno.remove(seg.info.path);
    await syncDir(dir);
  }
  const seg = segments[segments.length - 1];
  const segEnd = seg.info.firstOffset + seg.info.count;
  const at = Math.max(Math.min(offset, segEnd), seg.info.firstOffset);
  if (at < segEnd) {
    const file = await Deno.open(seg.info.path, { read: true, write: true });
    // The segment as cutActiveAt reads it: its header, layout, size and file.
    const state = initialState();
    const cut: Active = {
      seg,
      writer: new SegmentWriter(seg.layout.interval, state),
      file,
      durable: state,
    };
    try {
      await cutActiveAt(cut, at, opts.maxPayloadBytes);
    } catch (err) {
      if (err instanceof LogCorruptError) throw err;
      throw new LogCorruptError(seg.info.path, 0, `cannot cut at ${at}: ${err}`);
    } finally {
      file.close();
    }
    rows += segEnd - at;
  }
  await terms.truncateFrom(at);
  return { end: at, rows };
}

/** What {@linkcode cutOpenLog} needs of an open log. */
export interface OpenLogParts {
  /** The log folder. */
  dir: string;
  /** Its resolved options. */
  opts: ResolvedOptions;
  /** Its committer (restarted at the new end). */
  committer: Committer;
  /** Its segments (the same array, refilled). */
  segments: Segment[];
  /** Its producer state (both members replaced). */
  producers: { table: ProducerTable; journal: ProducerJournal };
  /** Recovers the closed log as opening it does: its segments, then its producer state. */
  recover(): Promise<[Recovered, { table: ProducerTable; journal: ProducerJournal }]>;
  /** Resolves once what was appended is committed. */
  flush(): Promise<void>;
  /** Told that appends from `from` on are gone; its readers start afresh where they are. */
  discarded(from: number): void;
}

/**
 * Cuts an open log's tail in place (a replicated log rejoining as a
 * follower, `replication.ts`): what is pending is committed first, the
 * files are closed, {@linkcode cutClosedLog} cuts them, and the log is
 * recovered again into the same objects — its readers and chunk link keep
 * working. A refused cut (a chunk, a producer commit) leaves the log as it
 * was, recovered.
 *
 * @throws {RangeError} when a chunk or a producer commit would be cut.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { replicated: true, timers: false });
 * log.replication!.writable = true;
 * log.appendMany(["{}", "{}", "{}"]);
 * await log.flush();
 * equal((await log.replication!.cutTail(2)).rows, 2); // through cutOpenLog
 * equal(log.nextOffset, 2);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function cutOpenLog(parts: OpenLogParts, offset: number): Promise<Truncated> {
  await parts.flush();
  const c = parts.committer;
  c.active.file?.close();
  c.active.file = null;
  await parts.producers.journal.settled();
  parts.producers.journal.close();
  try {
    return await cutClosedLog(parts.dir, offset, parts.opts);
  } finally {
    const [recovered, producers] = await parts.recover();
    parts.segments.splice(0, parts.segments.length, ...recovered.segments);
    const info = recovered.active.seg.info;
    c.restartAt(recovered.active, info.firstOffset + info.count);
    parts.producers.table = producers.table;
    parts.producers.journal = producers.journal;
    parts.discarded(c.end);
  }
}
