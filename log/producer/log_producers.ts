/**
 * What a log's owner sees of its producers (`Log.producers`): how many it
 * remembers, what one last committed, and waiting for one's pending publish.
 * Publishing itself is `Log.publish`, an append.
 *
 * @module
 */

import type { ProducerState, ProducerTable } from "./table.ts";

/**
 * A log's producers, as the publish path and metrics ask about them.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * const r = log.publish(["{}"], { producer: "p", seq: 7 });
 * await log.producers.settled("p");
 * equal(r.status, "stored");
 * equal(log.producers.state("p")?.seq, 7);
 * equal(log.producers.size, 1);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class LogProducers {
  readonly #p: { readonly table: ProducerTable };
  readonly #committed: (settled: Promise<void>, end: () => number) => Promise<void>;

  /**
   * The producers of `p.table` (read through `p`: a replicated log replaces
   * its table when its tail is cut in place); `committed` waits until a
   * settled publish is committed (in a replicated log, in the cluster too).
   */
  constructor(
    p: { readonly table: ProducerTable },
    committed: (settled: Promise<void>, end: () => number) => Promise<void>,
  ) {
    this.#p = p;
    this.#committed = committed;
  }

  /** Producers remembered. */
  get size(): number {
    return this.#p.table.size;
  }

  /** What `producer` last committed, or null (never seen, or forgotten). */
  state(producer: string): ProducerState | null {
    return this.#p.table.committedState(producer);
  }

  /**
   * Blocks `producer` whose publish of `seq` is refused before the log (a
   * full disk): its later seqs are refused until it sends `seq` again (see
   * `ProducerTable.refused`).
   */
  refused(producer: string, seq: number): void {
    this.#p.table.refused(producer, seq);
  }

  /**
   * Resolves once `producer`'s pending publish, if any, is durable or failed
   * (in a replicated log: once its last commit is committed in the cluster;
   * rejects with `NotLeaderError` when this node stops leading first).
   */
  async settled(producer: string): Promise<void> {
    const settled = this.#p.table.settled(producer);
    await this.#committed(settled, () => (this.#p.table.committedState(producer)?.last ?? 0) + 1);
  }
}
