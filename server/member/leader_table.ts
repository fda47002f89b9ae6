/**
 * A cluster stream's Iceberg table (docs/SPEC.md §12.5): one
 * table for the stream, in the cluster's archive, committed to by whichever
 * node leads it.
 *
 * - **Only the leader commits.** The node's `IcebergTable` runs during each
 *   of its leaderships (`while_leading.ts`), started when the node becomes
 *   leader and let go the instant it stops: no seal, no commit waited for (a
 *   deposed node's log takes no appends; the next leader seals and commits).
 *   A new leadership waits for the last one's table to be let go, so the
 *   process's worker never holds two of the stream's tables.
 * - **Each commit is guarded by the leadership.** The worker asks before it
 *   creates each table version (`mayCommit`): the answer is whether the node
 *   still leads, its lease valid on its own clock (`ClusterNode.role`). A
 *   commit under way when the leadership ends is refused before its version is
 *   created; what it wrote before is rewritten under the same names by the
 *   next leader.
 * - **Committed rows only.** The table takes sealed rows from the log's
 *   chunks, and a replicated log chunks a sealed segment only once all its
 *   rows are committed in the cluster (`log/chunk/link.ts`): a leader's
 *   uncommitted tail, which a failover may cut, never reaches a chunk.
 * - **A new leader resumes** from the table's `streamcast.last-offset`, which
 *   is below the commit index every node that may lead holds.
 *
 * @module
 */

import type { Logger } from "../../common/logger.ts";
import type { ArchiveOptions } from "../../common/s3.ts";
import type { IcebergOptions } from "../../iceberg/options.ts";
import { IcebergTable, type tableHead } from "../../iceberg/table_link.ts";
import type { Log } from "../../log/mod.ts";
import { type LeadingNode, whileLeading } from "./while_leading.ts";

/** Where a cluster stream's table is and how it is kept. */
export interface LeaderTableOptions {
  /** The stream's name. */
  stream: string;
  /** The cluster's archive: the table is `ARCHIVE/NAME/iceberg/`. */
  archive: string | ArchiveOptions;
  /** The table's options (`StreamOptions.iceberg`). @default {} */
  iceberg?: IcebergOptions;
  /** Where the table's takes, releases and failures are reported. */
  logger: Logger;
}

/**
 * The Iceberg table of a cluster's stream, kept by this node while it leads
 * (see the module doc).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Logger } from "../../common/logger.ts";
 * import { Log } from "../../log/mod.ts";
 * import { LeaderTable } from "./leader_table.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { replicated: true, chunks: true, timers: false });
 * const node = { role: "follower" as const, onRole: null };
 * const table = LeaderTable.start(node, log, {
 *   stream: "t", archive: "s3://bucket/prefix", logger: new Logger({ level: "error" }),
 * });
 * equal(table.head().iceberg, null); // a follower keeps no table
 * await table.close();
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class LeaderTable {
  readonly #node: LeadingNode;
  readonly #log: Log;
  readonly #o: LeaderTableOptions;
  readonly #stop = new AbortController();
  readonly #done: Promise<void>;
  #table: IcebergTable | null = null;
  // The last leadership's table, being let go (the next one waits for it).
  #letGo: Promise<void> = Promise.resolve();

  private constructor(node: LeadingNode, log: Log, o: LeaderTableOptions) {
    this.#node = node;
    this.#log = log;
    this.#o = o;
    this.#done = whileLeading(node, (signal) => this.#lead(signal), this.#stop.signal);
  }

  /** Keeps the table of `log` during each leadership of `node`, from now until `close`. */
  static start(node: LeadingNode, log: Log, options: LeaderTableOptions): LeaderTable {
    return new LeaderTable(node, log, options);
  }

  // One leadership: the table is kept from its start to its end.
  async #lead(signal: AbortSignal): Promise<void> {
    await this.#letGo;
    if (signal.aborted) return;
    const { stream, archive, logger } = this.#o;
    const table = IcebergTable.start(this.#log, stream, archive, {
      logger,
      ...this.#o.iceberg,
      mayCommit: () => !signal.aborted && this.#node.role === "leader",
    });
    this.#table = table;
    logger.info("iceberg_table_kept", { stream, end: this.#log.endOffset });
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener("abort", () => resolve(), { once: true });
    });
    this.#table = null;
    this.#letGo = table.release();
    await this.#letGo;
    logger.info("iceberg_table_released", {
      stream,
      last_offset: table.state?.lastOffset ?? null,
      version: table.state?.version ?? null,
    });
  }

  /**
   * What `/head` carries: `"iceberg"`, the table's state while this node
   * leads (`iceberg/table_link.ts`'s `tableHead`), null while it follows.
   */
  head(): { iceberg: ReturnType<typeof tableHead> | null } {
    return this.#table?.head() ?? { iceberg: null };
  }

  /** Lets the table go (when this node leads) and stops following leaderships. */
  async close(): Promise<void> {
    this.#stop.abort();
    await this.#done;
  }
}
