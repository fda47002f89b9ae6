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
 * ```
 *
 * All integers big-endian. Records are appended; a record that is cut short
 * or fails its checksum ends the journal (a torn append: the commit it
 * belonged to never wrote its rows, see `producers.ts`), and is cut off when
 * the journal is opened. When the file grows past its bound it is rewritten
 * whole — one record per producer remembered, then the new records — to a
 * temporary file that is synced, renamed over it, and the folder synced, so a
 * crash leaves the old journal or the new one.
 *
 * @module
 */

import { join } from "node:path";
import { crc32 } from "node:zlib";
import { syncDir } from "./atomic_write.ts";
import { LogCorruptError } from "./errors.ts";

/** The journal's file name in a log folder. */
export const PRODUCERS_FILE = "producers.log";

const MAGIC = 0x5343504a; // "SCPJ"
const VERSION = 1;
const HEADER_BYTES = 8;
/** Longest body a record may claim (a producer id is at most 128 bytes). */
const MAX_BODY_BYTES = 4096;

/**
 * One journal record: producer `producer`'s commit `seq` holds the rows
 * `[first, last]` (seq 0: the producer is forgotten).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { ProducerRecord } from "./producer_journal.ts";
 * const r: ProducerRecord = { producer: "collector-1", seq: 7, first: 100, last: 199 };
 * equal(r.last - r.first + 1, 100);
 * ```
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
 * import { encodeRecords } from "./producer_journal.ts";
 * ok(encodeRecords([{ producer: "a", seq: 1, first: 1, last: 1 }]).length > 8);
 * ```
 */
export function encodeRecords(records: readonly ProducerRecord[]): Uint8Array {
  const bodies = records.map((r) =>
    enc.encode(JSON.stringify({ p: r.producer, s: r.seq, f: r.first, l: r.last }))
  );
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
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { JournalStop } from "./producer_journal.ts";
 * const s: JournalStop = { at: 8, why: "checksum mismatch", next: 60 };
 * equal(s.why, "checksum mismatch");
 * ```
 */
export interface JournalStop {
  /** Byte position of the record. */
  at: number;
  /** What was wrong with it. */
  why: string;
  /** Byte position after it, when its whole length is in the bytes; else null. */
  next: number | null;
}

/**
 * Parses journal bytes: the records up to the first one that is cut short
 * or damaged, the byte length of that good prefix, and why it stopped there
 * (`stop`, null when every byte was taken). Throws
 * {@linkcode LogCorruptError} when the header is not a journal's.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { encodeRecords, parseJournal } from "./producer_journal.ts";
 * const rec = encodeRecords([{ producer: "a", seq: 3, first: 5, last: 9 }]);
 * const bytes = new Uint8Array([0x53, 0x43, 0x50, 0x4a, 0, 0, 0, 1, ...rec, 0, 0]);
 * const j = parseJournal(bytes, "producers.log");
 * equal(j.records.length, 1);
 * ok(j.goodBytes === bytes.length - 2);
 * ```
 */
export function parseJournal(
  bytes: Uint8Array,
  path: string,
): { records: ProducerRecord[]; goodBytes: number; stop: JournalStop | null } {
  if (bytes.length < HEADER_BYTES) {
    const stop = bytes.length > 0 ? { at: 0, why: "header cut short", next: null } : null;
    return { records: [], goodBytes: 0, stop };
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  if (v.getUint32(0) !== MAGIC) throw new LogCorruptError(path, 0, "not a producer journal");
  if (v.getUint32(4) !== VERSION) {
    throw new LogCorruptError(path, 4, `producer journal version ${v.getUint32(4)} is unknown`);
  }
  const records: ProducerRecord[] = [];
  let at = HEADER_BYTES;
  let stop: JournalStop | null = null;
  while (at < bytes.length) {
    if (at + 8 > bytes.length) {
      stop = { at, why: "record header cut short", next: null };
      break;
    }
    const n = v.getUint32(at);
    if (n === 0 || n > MAX_BODY_BYTES) {
      stop = { at, why: `record length ${n} is not 1..${MAX_BODY_BYTES}`, next: null };
      break;
    }
    if (at + 8 + n > bytes.length) {
      stop = { at, why: `record of ${n} bytes cut short`, next: null };
      break;
    }
    const next = at + 8 + n;
    const body = bytes.subarray(at + 8, next);
    if ((crc32(body) >>> 0) !== v.getUint32(at + 4)) {
      stop = { at, why: "checksum mismatch", next };
      break;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(dec.decode(body));
    } catch {
      stop = { at, why: "body is not UTF-8 JSON", next };
      break;
    }
    if (!isRecord(parsed)) {
      stop = { at, why: 'body is not {"p":string,"s":seq,"f":offset,"l":offset}', next };
      break;
    }
    records.push({ producer: parsed.p, seq: parsed.s, first: parsed.f, last: parsed.l });
    at = next;
  }
  return { records, goodBytes: at, stop };
}

/**
 * The journal file of one log, open for appending. Writes are serialised:
 * each waits for the one before it.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { ProducerJournal } from "./producer_journal.ts";
 * const dir = await Deno.makeTempDir();
 * const { journal, records } = await ProducerJournal.open(dir, { sync: true });
 * await journal.append([{ producer: "a", seq: 1, first: 1, last: 2 }], () => []);
 * journal.close();
 * const again = await ProducerJournal.open(dir, { sync: true });
 * equal(records.length, 0);
 * deepStrictEqual(again.records, [{ producer: "a", seq: 1, first: 1, last: 2 }]);
 * again.journal.close();
 * ```
 */
export class ProducerJournal {
  /** The journal's path. */
  readonly path: string;
  readonly #dir: string;
  readonly #sync: boolean;
  readonly #compactBytes: number;
  #file: Deno.FsFile | null;
  #size: number;
  #tail: Promise<void> = Promise.resolve();
  #busy = 0;

  private constructor(
    dir: string,
    file: Deno.FsFile | null,
    size: number,
    sync: boolean,
    compactBytes: number,
  ) {
    this.#dir = dir;
    this.path = join(dir, PRODUCERS_FILE);
    this.#file = file;
    this.#size = size;
    this.#sync = sync;
    this.#compactBytes = compactBytes;
  }

  /**
   * Opens (or, on the first write, creates) the journal of the log in `dir`,
   * cutting off a torn tail; returns it with the records it holds, in order.
   * `sync: false` (a log without fsync) writes without syncing.
   */
  static async open(
    dir: string,
    options: { sync: boolean; compactBytes?: number },
  ): Promise<{ journal: ProducerJournal; records: ProducerRecord[] }> {
    const path = join(dir, PRODUCERS_FILE);
    const compactBytes = options.compactBytes ?? 1 << 20;
    let file: Deno.FsFile;
    try {
      file = await Deno.open(path, { read: true, write: true });
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      // No journal yet: nothing was ever published with a producer name.
      return {
        journal: new ProducerJournal(dir, null, 0, options.sync, compactBytes),
        records: [],
      };
    }
    try {
      const bytes = await Deno.readFile(path);
      const { records, goodBytes } = parseJournal(bytes, path);
      if (goodBytes < bytes.length || bytes.length < HEADER_BYTES) {
        // A torn append: its commit never wrote its rows (see producers.ts).
        await file.truncate(goodBytes);
        if (goodBytes === 0) await file.write(header());
        await file.syncData();
      }
      const size = Math.max(goodBytes, HEADER_BYTES);
      await file.seek(size, Deno.SeekMode.Start);
      return {
        journal: new ProducerJournal(dir, file, size, options.sync, compactBytes),
        records,
      };
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
   * when the file has grown past its bound, rewrites it instead as
   * `remembered()` (the table's state before these records) then `records`.
   */
  append(
    records: readonly ProducerRecord[],
    remembered: () => readonly ProducerRecord[],
  ): Promise<void> {
    this.#busy++;
    const run = this.#tail.then(() => this.#write(records, remembered));
    this.#tail = run.catch(() => {}).finally(() => this.#busy--);
    return run;
  }

  async #write(
    records: readonly ProducerRecord[],
    remembered: () => readonly ProducerRecord[],
  ): Promise<void> {
    if (this.#size > this.#compactBytes) {
      const named = new Set(records.map((r) => r.producer));
      const kept = remembered().filter((r) => !named.has(r.producer));
      return await this.#rewrite([...kept, ...records]);
    }
    if (records.length === 0) return;
    const bytes = encodeRecords(records);
    if (this.#file === null) return await this.#rewrite(records);
    let done = 0;
    while (done < bytes.length) done += this.#file.writeSync(bytes.subarray(done));
    this.#size += bytes.length;
    if (this.#sync) await this.#file.syncData();
  }

  /** Rewrites the journal whole as `records` (after the writes asked for so far; see the module doc). */
  rewrite(records: readonly ProducerRecord[]): Promise<void> {
    this.#busy++;
    const run = this.#tail.then(() => this.#rewrite(records));
    this.#tail = run.catch(() => {}).finally(() => this.#busy--);
    return run;
  }

  // The whole journal anew: temporary file, sync, rename, sync the folder.
  async #rewrite(records: readonly ProducerRecord[]): Promise<void> {
    const body = encodeRecords(records);
    const bytes = new Uint8Array(HEADER_BYTES + body.length);
    bytes.set(header(), 0);
    bytes.set(body, HEADER_BYTES);
    const tmp = `${this.path}.tmp`;
    const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
    try {
      let done = 0;
      while (done < bytes.length) done += f.writeSync(bytes.subarray(done));
      if (this.#sync) await f.sync();
    } finally {
      f.close();
    }
    await Deno.rename(tmp, this.path);
    if (this.#sync) await syncDir(this.#dir);
    this.#file?.close();
    this.#file = await Deno.open(this.path, { read: true, write: true });
    await this.#file.seek(bytes.length, Deno.SeekMode.Start);
    this.#size = bytes.length;
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
