/**
 * The producer journal of a log: `producers.log` beside the segments, where
 * the committer records which producer sequence each published commit holds,
 * so that a retried publish is answered as a duplicate after a crash too.
 *
 * ```text
 * file    = header record*
 * header  = magic "SCPJ" (4 bytes) | version u32 = 1
 * record  = length u32 | crc32 u32 (of the body) | body (length bytes)
 * body    = UTF-8 JSON {"p": producer, "s": seq, "f": first offset, "l": last offset}
 *           ("s": 0 — the producer is forgotten: no state)
 *         | UTF-8 JSON {"t": end}  — a replicated log's mark (below)
 * ```
 *
 * A replicated log writes its journal and its rows side by side, each commit
 * with a mark `{"t": end}` after its records (the commit's end offset, in
 * the same write), and counts the commit durable once both are synced. The
 * last mark in the file says how far the journal was durable: rows past it
 * at an open were never counted durable, and may lack their records, so
 * they are cut (`recovery.ts`).
 *
 * All integers big-endian. Records are appended; a record that is cut short
 * or fails its checksum at the end is a torn append (the commit it belonged
 * to never wrote its rows, see `table.ts`) and is cut off when the
 * journal is opened. A failed append (a short write, a full disk, a failed
 * sync) is cut back at once to the journal's last good length, so later
 * records never follow torn bytes; a journal that cannot be cut back refuses
 * every later append. Damaged bytes with good records after them (a torn
 * append left by an older version, or damage) are skipped on open, keeping
 * the records after them ({@linkcode readJournal}).
 *
 * When the file grows past its bound it is rewritten whole — one record per
 * producer remembered (the committed state), then the new records — to a
 * temporary file that is synced, renamed over it, and the folder synced, so a
 * crash leaves the old journal or the new one, and either holds every
 * producer's last acknowledged record. Until that folder sync has succeeded,
 * every later append syncs the folder again before it counts as written.
 *
 * @module
 */

import { join } from "node:path";
import { crc32 } from "node:zlib";
import { LogCorruptError } from "../errors.ts";
import { type LogIo, REAL_IO } from "../disk/io.ts";

/** The journal's file name in a log folder. */
export const PRODUCERS_FILE = "producers.log";

const MAGIC = 0x5343504a; // "SCPJ"
const VERSION = 1;
const HEADER_BYTES = 8;
/** Size past which an append rewrites the journal, by default: 1 MiB. */
export const DEFAULT_JOURNAL_BYTES = 1 << 20;
/** Longest body a record may claim (a producer id is at most 128 bytes). */
const MAX_BODY_BYTES = 4096;

/**
 * One journal record: producer `producer`'s commit `seq` holds the rows
 * `[first, last]` (seq 0: the producer is forgotten).
 */
export interface ProducerRecord {
  /** The producer's name. */
  producer: string;
  /** Its sequence number (0: forgotten). */
  seq: number;
  /** First offset of the commit's rows. */
  first: number;
  /** Last offset of the commit's rows. */
  last: number;
}

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });

function header(): Uint8Array {
  const b = new Uint8Array(HEADER_BYTES);
  const v = new DataView(b.buffer);
  v.setUint32(0, MAGIC);
  v.setUint32(4, VERSION);
  return b;
}

/**
 * The bytes of `records` as journal records.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { encodeRecords } from "./journal.ts";
 * ok(encodeRecords([{ producer: "a", seq: 1, first: 1, last: 1 }]).length > 8);
 * ```
 */
export function encodeRecords(
  records: readonly ProducerRecord[],
  through: number | null = null,
): Uint8Array {
  const bodies = records.map((r) =>
    enc.encode(JSON.stringify({ p: r.producer, s: r.seq, f: r.first, l: r.last }))
  );
  if (through !== null) bodies.push(enc.encode(JSON.stringify({ t: through })));
  let n = 0;
  for (const b of bodies) n += 8 + b.length;
  const out = new Uint8Array(n);
  const v = new DataView(out.buffer);
  let at = 0;
  for (const b of bodies) {
    v.setUint32(at, b.length);
    v.setUint32(at + 4, crc32(b) >>> 0);
    out.set(b, at + 8);
    at += 8 + b.length;
  }
  return out;
}

function isMark(v: unknown): v is { t: number } {
  if (typeof v !== "object" || v === null) return false;
  const t = (v as Record<string, unknown>).t;
  return Number.isSafeInteger(t) && (t as number) >= 1;
}

function isRecord(v: unknown): v is { p: string; s: number; f: number; l: number } {
  if (typeof v !== "object" || v === null) return false;
  const o = v as Record<string, unknown>;
  return typeof o.p === "string" && Number.isSafeInteger(o.s) && Number.isSafeInteger(o.f) &&
    Number.isSafeInteger(o.l) && (o.s as number) >= 0;
}

/**
 * Where and why {@linkcode parseJournal} stopped before the end of the bytes:
 * the byte position of the record it could not take, what was wrong, and
 * the position right after that record when its length was plausible (null:
 * the length itself was impossible, or the record is cut short).
 */
export interface JournalStop {
  /** Byte position of the record. */
  at: number;
  /** What was wrong with it. */
  why: string;
  /** Byte position after it, when its whole length is in the bytes; else null. */
  next: number | null;
}

// The record at byte `at` of the bytes `v` views: the record and the
// position after it, or why it is not one (`next` as in JournalStop).
function recordAt(
  bytes: Uint8Array,
  v: DataView,
  at: number,
): { record: ProducerRecord | { through: number }; next: number } | JournalStop {
  if (at + 8 > bytes.length) return { at, why: "record header cut short", next: null };
  const n = v.getUint32(at);
  if (n === 0 || n > MAX_BODY_BYTES) {
    return { at, why: `record length ${n} is not 1..${MAX_BODY_BYTES}`, next: null };
  }
  if (at + 8 + n > bytes.length) return { at, why: `record of ${n} bytes cut short`, next: null };
  const next = at + 8 + n;
  const body = bytes.subarray(at + 8, next);
  if ((crc32(body) >>> 0) !== v.getUint32(at + 4)) return { at, why: "checksum mismatch", next };
  let parsed: unknown;
  try {
    parsed = JSON.parse(dec.decode(body));
  } catch {
    return { at, why: "body is not UTF-8 JSON", next };
  }
  if (isMark(parsed)) return { record: { through: parsed.t }, next };
  if (!isRecord(parsed)) {
    return {
      at,
      why: 'body is not {"p":string,"s":seq,"f":offset,"l":offset} or {"t":offset}',
      next,
    };
  }
  return { record: { producer: parsed.p, seq: parsed.s, first: parsed.f, last: parsed.l }, next };
}

function checkHeader(v: DataView, path: string): void {
  if (v.getUint32(0) !== MAGIC) throw new LogCorruptError(path, 0, "not a producer journal");
  if (v.getUint32(4) !== VERSION) {
    throw new LogCorruptError(path, 4, `producer journal version ${v.getUint32(4)} is unknown`);
  }
}

/**
 * Parses journal bytes: the records up to the first one that is cut short
 * or damaged, the last mark among them (`through`, null: none), the byte
 * length of that good prefix, and why it stopped there (`stop`, null when
 * every byte was taken). Throws
 * {@linkcode LogCorruptError} when the header is not a journal's.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { encodeRecords, parseJournal } from "./journal.ts";
 * const rec = encodeRecords([{ producer: "a", seq: 3, first: 5, last: 9 }]);
 * const bytes = new Uint8Array([0x53, 0x43, 0x50, 0x4a, 0, 0, 0, 1, ...rec, 0, 0]);
 * const j = parseJournal(bytes, "producers.log");
 * deepEqual([j.records.length, j.goodBytes, j.stop?.why], [1, bytes.length - 2, "record header cut short"]);
 * ```
 */
export function parseJournal(
  bytes: Uint8Array,
  path: string,
): {
  records: ProducerRecord[];
  through: number | null;
  goodBytes: number;
  stop: JournalStop | null;
} {
  if (bytes.length < HEADER_BYTES) {
    const stop = bytes.length > 0 ? { at: 0, why: "header cut short", next: null } : null;
    return { records: [], through: null, goodBytes: 0, stop };
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  checkHeader(v, path);
  const records: ProducerRecord[] = [];
  let through: number | null = null;
  let at = HEADER_BYTES;
  let stop: JournalStop | null = null;
  while (at < bytes.length) {
    const r = recordAt(bytes, v, at);
    if ("why" in r) {
      stop = r;
      break;
    }
    if ("through" in r.record) through = r.record.through;
    else records.push(r.record);
    at = r.next;
  }
  return { records, through, goodBytes: at, stop };
}

/**
 * The first byte position at or after `from` where a whole, good record
 * starts, or null. A record body always starts with `{"p":` (a mark's with
 * `{"t":`), which keeps the search cheap; a false match would need that and
 * a CRC-32 to agree by chance.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { encodeRecords, nextGoodRecord } from "./journal.ts";
 * const rec = encodeRecords([{ producer: "a", seq: 1, first: 1, last: 1 }]);
 * equal(nextGoodRecord(new Uint8Array([9, 9, 9, ...rec]), 0), 3);
 * ```
 */
export function nextGoodRecord(bytes: Uint8Array, from: number): number | null {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  for (let p = from; p + 8 + BODY_START.length <= bytes.length; p++) {
    let starts = true;
    for (let k = 0; k < BODY_START.length && starts; k++) {
      starts = bytes[p + 8 + k] === BODY_START[k] ||
        (k === 2 && bytes[p + 8 + k] === MARK_LETTER);
    }
    if (starts && !("why" in recordAt(bytes, v, p))) return p;
  }
  return null;
}

const BODY_START = enc.encode('{"p":');
const MARK_LETTER = "t".charCodeAt(0);

/**
 * Damaged bytes {@linkcode readJournal} skipped: where they start, how many,
 * and what was wrong with the record that should have started there.
 */
export interface JournalDamage {
  /** Byte position of the damage. */
  at: number;
  /** Bytes skipped. */
  bytes: number;
  /** What was wrong at `at`. */
  why: string;
}

/**
 * Reads journal bytes as open does: every good record, skipping damaged bytes
 * that good records follow (`skipped`; a torn append of an older version
 * that appended after torn bytes, or damage), and stopping at damage that
 * runs to the end (a torn append: `goodBytes` is where it starts). Throws
 * {@linkcode LogCorruptError} when the header is not a journal's.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { encodeRecords, readJournal } from "./journal.ts";
 * const a = encodeRecords([{ producer: "a", seq: 1, first: 1, last: 1 }]);
 * const b = encodeRecords([{ producer: "a", seq: 2, first: 2, last: 2 }]);
 * const torn = a.subarray(0, 5);
 * const bytes = new Uint8Array([0x53, 0x43, 0x50, 0x4a, 0, 0, 0, 1, ...a, ...torn, ...b, ...torn]);
 * const j = readJournal(bytes, "producers.log");
 * deepEqual(j.records.map((r) => r.seq), [1, 2]);
 * deepEqual([j.skipped.length, j.skipped[0].bytes, j.goodBytes], [1, 5, bytes.length - 5]);
 * ```
 */
export function readJournal(
  bytes: Uint8Array,
  path: string,
): {
  records: ProducerRecord[];
  through: number | null;
  goodBytes: number;
  skipped: JournalDamage[];
} {
  const records: ProducerRecord[] = [];
  const skipped: JournalDamage[] = [];
  let through: number | null = null;
  let part = parseJournal(bytes, path);
  let base = 0;
  while (true) {
    records.push(...part.records);
    through = part.through ?? through;
    const stop = part.stop;
    if (stop === null || base + stop.at < HEADER_BYTES) {
      return { records, through, goodBytes: base + part.goodBytes, skipped };
    }
    const at = base + stop.at;
    const next = nextGoodRecord(bytes, at + 1);
    if (next === null) return { records, through, goodBytes: at, skipped };
    skipped.push({ at, bytes: next - at, why: stop.why });
    // The rest parsed as a journal of its own: a header-sized window before it.
    const rest = new Uint8Array(HEADER_BYTES + bytes.length - next);
    rest.set(header(), 0);
    rest.set(bytes.subarray(next), HEADER_BYTES);
    base = next - HEADER_BYTES;
    part = parseJournal(rest, path);
  }
}

/**
 * The journal file of one log, open for appending. Writes are serialised:
 * each waits for the one before it. Every change on disk goes through the
 * log's {@linkcode LogIo}.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { ProducerJournal } from "./journal.ts";
 * const dir = await Deno.makeTempDir();
 * const { journal, records } = await ProducerJournal.open(dir, { sync: true });
 * await journal.append([{ producer: "a", seq: 1, first: 1, last: 2 }], () => []);
 * journal.close();
 * const again = await ProducerJournal.open(dir, { sync: true });
 * deepEqual([records.length, again.records], [0, [{ producer: "a", seq: 1, first: 1, last: 2 }]]);
 * again.journal.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class ProducerJournal {
  /** The journal's path. */
  readonly path: string;
  readonly #dir: string;
  readonly #sync: boolean;
  readonly #compactBytes: number;
  readonly #io: LogIo;
  #file: Deno.FsFile | null;
  #size: number;
  #tail: Promise<void> = Promise.resolve();
  #busy = 0;
  // A rename whose folder sync has not succeeded yet: the next append syncs
  // the folder before it counts, or a crash could bring the old file back
  // and lose that append.
  #dirDirty = false;
  // Set when a failed append could not be cut back: every later one fails.
  #broken: Error | null = null;
  // The last mark written or read (null: none), carried into every rewrite.
  #through: number | null = null;

  private constructor(
    dir: string,
    file: Deno.FsFile | null,
    size: number,
    options: { sync: boolean; compactBytes: number; io: LogIo },
  ) {
    this.#dir = dir;
    this.path = join(dir, PRODUCERS_FILE);
    this.#file = file;
    this.#size = size;
    this.#sync = options.sync;
    this.#compactBytes = options.compactBytes;
    this.#io = options.io;
  }

  /**
   * Opens (or, on the first write, creates) the journal of the log in `dir`,
   * cutting off a torn tail; returns it with the records it holds, in order,
   * its last mark (`through`, null: none) and the damaged bytes it skipped ({@linkcode readJournal}: the caller
   * rewrites the journal when there are any). `sync: false` (a log without
   * fsync) writes without syncing; `compactBytes` is the size past which an
   * append rewrites it (default 1 MiB).
   */
  static async open(
    dir: string,
    options: { sync: boolean; compactBytes?: number; io?: LogIo },
  ): Promise<{
    journal: ProducerJournal;
    records: ProducerRecord[];
    through: number | null;
    skipped: JournalDamage[];
  }> {
    const path = join(dir, PRODUCERS_FILE);
    const opts = {
      sync: options.sync,
      compactBytes: options.compactBytes ?? DEFAULT_JOURNAL_BYTES,
      io: options.io ?? REAL_IO,
    };
    let bytes: Uint8Array;
    try {
      bytes = await Deno.readFile(path);
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      // No journal yet: nothing was ever published with a producer name.
      return {
        journal: new ProducerJournal(dir, null, 0, opts),
        records: [],
        through: null,
        skipped: [],
      };
    }
    const { records, through, goodBytes, skipped } = readJournal(bytes, path);
    const io = opts.io;
    const file = await io.open(path, { read: true, write: true });
    try {
      if (goodBytes < bytes.length || bytes.length < HEADER_BYTES) {
        // A torn append: its commit never wrote its rows (see `table.ts`).
        await io.truncate(file, goodBytes);
        if (goodBytes === 0) {
          file.seekSync(0, Deno.SeekMode.Start);
          await io.write(file, header());
        }
        await io.syncData(file);
      }
      const size = Math.max(goodBytes, HEADER_BYTES);
      file.seekSync(size, Deno.SeekMode.Start);
      const journal = new ProducerJournal(dir, file, size, opts);
      journal.#through = through;
      return { journal, records, through, skipped };
    } catch (err) {
      file.close();
      throw err;
    }
  }

  /** Whether a write is queued or running. */
  get busy(): boolean {
    return this.#busy > 0;
  }

  /** Bytes in the journal file. */
  get sizeBytes(): number {
    return this.#size;
  }

  /**
   * Appends `records` and syncs them (unless opened with `sync: false`);
   * when the file has grown past its bound (or does not exist yet), rewrites
   * it instead as `remembered()` — the committed state before these records,
   * each producer's last acknowledged record — then `records`. With
   * `through`, a mark follows the records in the same write. A failed
   * append is cut back before the promise rejects.
   */
  append(
    records: readonly ProducerRecord[],
    remembered: () => readonly ProducerRecord[],
    through: number | null = null,
  ): Promise<void> {
    this.#busy++;
    const run = this.#tail.then(() => this.#write(records, remembered, through));
    this.#tail = run.catch(() => {}).finally(() => this.#busy--);
    return run;
  }

  async #write(
    records: readonly ProducerRecord[],
    remembered: () => readonly ProducerRecord[],
    through: number | null,
  ): Promise<void> {
    if (this.#broken) throw this.#broken;
    if (records.length === 0 && through === null && this.#file === null) return;
    if (this.#file === null || this.#size > this.#compactBytes) {
      // Every remembered record is kept, those of the producers named in
      // `records` too: until this commit is durable, theirs is what holds.
      return await this.#rewrite([...remembered(), ...records], through);
    }
    if (records.length === 0 && through === null) return;
    const io = this.#io;
    const file = this.#file;
    const bytes = encodeRecords(records, through);
    try {
      if (this.#dirDirty && this.#sync) {
        await io.syncDir(this.#dir);
        this.#dirDirty = false;
      }
      await io.write(file, bytes);
      if (this.#sync) await io.syncData(file);
    } catch (err) {
      await this.#cutBack(file);
      throw err;
    }
    this.#size += bytes.length;
    this.#through = through ?? this.#through;
  }

  // A failed append: the file goes back to its last good length, so that the
  // next record does not follow torn bytes (open would stop at them and drop
  // it). If even that fails, the journal refuses every later append.
  async #cutBack(file: Deno.FsFile): Promise<void> {
    try {
      await this.#io.truncate(file, this.#size);
      file.seekSync(this.#size, Deno.SeekMode.Start);
    } catch (err) {
      this.#broken = new Error(
        `cannot cut ${this.path} back to ${this.#size} bytes after a failed write: ${err}`,
      );
    }
  }

  /**
   * Rewrites the journal whole as `records` and the last mark (after the
   * writes asked for so far; see the module doc).
   */
  rewrite(records: readonly ProducerRecord[]): Promise<void> {
    this.#busy++;
    const run = this.#tail.then(() => {
      if (this.#broken) throw this.#broken;
      return this.#rewrite(records, null);
    });
    this.#tail = run.catch(() => {}).finally(() => this.#busy--);
    return run;
  }

  // The whole journal anew: temporary file, sync, rename, sync the folder.
  // Once renamed, the new file is the journal whatever follows: it is taken
  // at once, and a failed folder sync is retried by the next append.
  async #rewrite(records: readonly ProducerRecord[], through: number | null): Promise<void> {
    const io = this.#io;
    const mark = through ?? this.#through;
    const body = encodeRecords(records, mark);
    const bytes = new Uint8Array(HEADER_BYTES + body.length);
    bytes.set(header(), 0);
    bytes.set(body, HEADER_BYTES);
    const tmp = `${this.path}.tmp`;
    const f = await io.open(tmp, { read: true, write: true, create: true, truncate: true });
    try {
      await io.write(f, bytes);
      if (this.#sync) await io.syncData(f);
      await io.rename(tmp, this.path);
    } catch (err) {
      f.close();
      throw err;
    }
    this.#file?.close();
    this.#file = f;
    this.#size = bytes.length;
    this.#through = mark;
    this.#dirDirty = true;
    if (this.#sync) {
      await io.syncDir(this.#dir);
      this.#dirDirty = false;
    }
  }

  /** Resolves once every write asked for so far is done. */
  async settled(): Promise<void> {
    await this.#tail;
  }

  /** Closes the file (after the writes asked for so far). */
  close(): void {
    this.#file?.close();
    this.#file = null;
  }
}
