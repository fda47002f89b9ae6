/**
 * The producer journal's part of `verify` (`producers.log`, see
 * `journal.ts` and docs/SPEC.md §9.4): read-only checks of its
 * records and of their agreement with the log.
 *
 * What is a finding, and what is not:
 * - a record that fails its checksum (or does not parse) with bytes after it
 *   is damage: the record is lost (open skips the damaged bytes and keeps the
 *   good records after them, or cuts the journal there when none follow).
 *   A damaged or cut-short record at the very end is a torn append (its
 *   commit never wrote its rows), which open cuts: not a finding;
 * - a record whose rows are not `1 ≤ first ≤ last` is damage;
 * - per producer, in file order, seqs go up: a record whose seq is below
 *   the producer's state (the journal replayed as open does, remembering at
 *   most `maxProducers` per holder, of at most `maxProducerHolders` holders) is a finding, unless it puts back a state the
 *   producer had (a record equal to an earlier one of it: the committer
 *   writes one after a failed write). An equal seq is a commit sent again
 *   after an open dropped it (journals of versions before opens rewrote
 *   their dropped records). A producer forgotten (seq 0, or past
 *   `maxProducers`) starts anew;
 * - per producer, the rows of the records that are not superseded (see
 *   `supersededRecords` in `table.ts`) go up;
 * - a record whose rows reach the log's end `E` is an unacknowledged commit
 *   (in progress on a live log, or cut by a crash: open drops it). Such
 *   records belong to the one commit that was being written, which started
 *   at or below `E`; records of rows past the end that all start above it
 *   say that committed rows `E..first-1` are missing from the log: a finding.
 *   The journal is read before the segments, so on a live log each record it
 *   holds was synced before the log's end was read (the committer writes a
 *   group's rows only after its journal records, one group at a time).
 *
 * @module
 */

import { LogCorruptError } from "../errors.ts";
import { nextGoodRecord, parseJournal, type ProducerRecord } from "./journal.ts";
import { ProducerTable, supersededRecords } from "./table.ts";

/**
 * What verify found in the producer journal.
 */
export interface ProducerJournalReport {
  /** Records in the journal. */
  records: number;
  /** Producers it remembers (seq above 0 at the end of the journal). */
  producers: number;
  /** Records of an unacknowledged commit (rows at or past the log's end): open drops them. */
  pending: number;
  /** Bytes of a torn last record (open cuts them). */
  tailBytes: number;
}

function allZero(bytes: Uint8Array): boolean {
  for (const b of bytes) if (b !== 0) return false;
  return true;
}

function named(i: number, r: ProducerRecord): string {
  return `record ${i + 1} (producer ${JSON.stringify(r.producer)} seq ${r.seq})`;
}

/**
 * Checks journal `bytes` (read from `path`) against a log whose end
 * (exclusive) is `end`. Throws {@linkcode LogCorruptError} naming the record
 * and its byte position for the first problem.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { encodeRecords } from "./journal.ts";
 * import { checkProducerJournal } from "./verify.ts";
 * const header = [0x53, 0x43, 0x50, 0x4a, 0, 0, 0, 1];
 * const journal = (first: number, last: number) =>
 *   new Uint8Array([...header, ...encodeRecords([{ producer: "a", seq: 1, first, last }])]);
 * equal(checkProducerJournal(journal(1, 5), "producers.log", 6, 100).records, 1);
 * // The log ends at 2 and the commit of rows 1..5 reaches past it: cut by a crash, not damage.
 * equal(checkProducerJournal(journal(1, 5), "producers.log", 3, 100).pending, 1);
 * // The log ends at 2 but the journal's rows start at 5: rows 3..4 are missing.
 * throws(() => checkProducerJournal(journal(5, 9), "producers.log", 3, 100), {
 *   name: "LogCorruptError",
 * });
 * ```
 */
export function checkProducerJournal(
  bytes: Uint8Array,
  path: string,
  end: number,
  maxProducers: number,
  maxProducerHolders?: number,
): ProducerJournalReport {
  const { records, goodBytes, stop } = parseJournal(bytes, path);
  let tailBytes = 0;
  if (stop !== null) {
    const rest = stop.next === null ? bytes.subarray(stop.at) : bytes.subarray(stop.next);
    const torn = stop.next === null
      ? stop.why.includes("cut short") || allZero(rest)
      : rest.length === 0 || allZero(rest);
    if (!torn) {
      const good = nextGoodRecord(bytes, stop.at + 1);
      throw new LogCorruptError(
        path,
        stop.at,
        `record ${records.length + 1}: ${stop.why}, with ${bytes.length - goodBytes} bytes ` +
          (good === null
            ? "from there that open would cut off"
            : `from there; open skips ${good - stop.at} damaged bytes and keeps the records ` +
              `from byte ${good} on`),
      );
    }
    tailBytes = bytes.length - goodBytes;
  }
  // Byte position of each record, for the errors.
  const at: number[] = [];
  for (let i = 0, p = 8; i < records.length; i++) {
    at.push(p);
    p += 8 + new DataView(bytes.buffer, bytes.byteOffset + p, 4).getUint32(0);
  }
  const superseded = supersededRecords(records);
  const current = new Map<string, ProducerRecord>();
  const history = new Map<string, ProducerRecord[]>();
  const table = new ProducerTable(maxProducers, maxProducerHolders);
  let pending = 0;
  let pendingFirst: { i: number; r: ProducerRecord } | null = null;
  for (let i = 0; i < records.length; i++) {
    const r = records[i];
    const st = table.committedState(r.producer);
    table.committed([r]);
    if (r.seq === 0) {
      history.delete(r.producer);
      continue;
    }
    if (r.first < 1 || r.last < r.first) {
      throw new LogCorruptError(path, at[i], `${named(i, r)}: rows ${r.first}..${r.last}`);
    }
    const had = history.get(r.producer) ?? [];
    history.set(r.producer, [...(st === null ? [] : had), r]);
    const putBack = had.some((h) => h.seq === r.seq && h.first === r.first && h.last === r.last);
    if (st !== null && r.seq < st.seq && !putBack) {
      throw new LogCorruptError(
        path,
        at[i],
        `${named(i, r)} follows its seq ${st.seq} (rows ${st.first}..${st.last}): ` +
          `seqs must increase per producer`,
      );
    }
    if (superseded[i]) continue;
    const c = current.get(r.producer);
    if (c !== undefined && (r.seq <= c.seq || r.first <= c.last)) {
      throw new LogCorruptError(
        path,
        at[i],
        `${named(i, r)} with rows ${r.first}..${r.last} follows its seq ${c.seq} with rows ` +
          `${c.first}..${c.last}: rows must increase per producer`,
      );
    }
    current.set(r.producer, r);
    if (r.last >= end) {
      pending++;
      if (pendingFirst === null || r.first < pendingFirst.r.first) pendingFirst = { i, r };
    }
  }
  if (pendingFirst !== null && pendingFirst.r.first > end) {
    const { i, r } = pendingFirst;
    throw new LogCorruptError(
      path,
      at[i],
      `${named(i, r)} holds rows ${r.first}..${r.last}, but the log ends at ${end - 1}: ` +
        `rows ${end}..${r.first - 1}, committed before it, are missing from the log`,
    );
  }
  return { records: records.length, producers: table.size, pending, tailBytes };
}
