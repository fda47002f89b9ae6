/**
 * Opening a log with its producer state (docs/SPEC.md §9.4, "Recovery"):
 * the segments first, then the producer journal judged against the
 * recovered end — records of rows wholly below it are committed, records
 * that reach it were never acknowledged and are dropped, and rows of such a
 * record that survived a crash are cut off, so that the producer's resend
 * stores them once. A replicated log, which writes its journal and its rows
 * side by side, also cuts the rows past the journal's last mark: they were
 * never counted durable, and may lack their records.
 *
 * @module
 */

import { ProducerJournal } from "./journal.ts";
import { type ProducerTable, recoverProducers } from "./table.ts";
import { type Recovered, recoverLog } from "../recovery.ts";
import { cutActiveAt } from "../segment/tail_cut.ts";
import type { LogOptions, ResolvedOptions } from "../options.ts";

export type { Recovered };

/**
 * Opens the log in `dir` for writing (the caller holds its lock): recovers
 * the segments (`../recovery.ts`), then the producer table from the journal
 * (`recoverProducers`); when the journal says rows of an unacknowledged
 * commit survived, cuts them off the active segment and recovers again;
 * rewrites the journal without the records it dropped and the damaged bytes
 * it skipped before anything is appended.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { recoverWithProducers } from "./recovery.ts";
 * import { resolveOptions } from "../options.ts";
 * const dir = await Deno.makeTempDir();
 * const [recovered, { table, journal }] = await recoverWithProducers(
 *   dir,
 *   {},
 *   resolveOptions({}),
 * );
 * equal(table.size, 0);
 * equal(recovered.segments.length, 1);
 * journal.close();
 * recovered.active.file?.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function recoverWithProducers(
  dir: string,
  options: LogOptions,
  opts: ResolvedOptions,
): Promise<[Recovered, { table: ProducerTable; journal: ProducerJournal }]> {
  let recovered = await recoverLog(dir, options, opts);
  const { journal, records, through, skipped } = await ProducerJournal.open(dir, {
    sync: opts.fsync,
    compactBytes: opts.producerJournalBytes,
    io: opts.io,
  });
  try {
    for (const d of skipped) {
      opts.logger.warn("producer_journal_damage", { path: journal.path, ...d });
    }
    const info = recovered.active.seg.info;
    const end = info.firstOffset + info.count;
    // Rows past the last mark (in the active segment: every sealed row was
    // marked before its segment was sealed) go first, with their records.
    const marked = opts.replicated && through !== null && through < end &&
        through >= info.firstOffset
      ? through
      : end;
    const { table, cut: recordsCut, dropped, kept } = recoverProducers(
      records,
      marked,
      opts.maxProducers,
      opts.maxProducerHolders,
    );
    const cut = recordsCut ?? (marked < end ? marked : null);
    if (cut !== null && cut < end) {
      opts.logger.warn("log_tail_cut", { dir, from: cut, to: end - 1 });
      await cutActiveAt(recovered.active, cut, opts.maxPayloadBytes, opts.io);
      recovered.active.file?.close();
      recovered = await recoverLog(dir, options, opts);
    }
    // Before the log grows past them, or the dropped records would pass for
    // committed; damaged bytes go too, so that they are not read again. A
    // replicated log keeps every other record: a producer whose latest
    // records a cut took falls back to its earlier one (`../replica/replication.ts`).
    if (dropped > 0 || skipped.length > 0) {
      await journal.rewrite(opts.replicated ? kept : table.snapshot());
    }
    return [recovered, { table, journal }];
  } catch (err) {
    journal.close();
    recovered.active.file?.close();
    throw err;
  }
}
