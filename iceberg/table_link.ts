/**
 * A log's Iceberg table, seen from the writer's thread: it hands the table
 * to the process's Iceberg worker (a service on the process's background
 * thread, `common/background_thread.ts`, beside the chunk worker), tells the
 * worker whenever the log's manifest changes (a chunk sealed), and keeps the
 * worker's last report.
 *
 * Only a stream's writer links its table: a mirror's log (a replica)
 * is refused, so one process at most commits to a table. A writer whose
 * right to write can end (a cluster's leader) passes `mayCommit`: the worker
 * asks it before creating each table version, and the table is let go at
 * once ({@linkcode IcebergTable.release}) when it ends. This side loads
 * nothing of the table's formats: those are the worker's.
 *
 * @module
 */

import { Logger } from "../common/logger.ts";
import type { ArchiveOptions } from "../common/s3.ts";
import type { Log } from "../log/mod.ts";
import { checkIcebergOptions, DEFAULT_MAX_COMMIT_BYTES, type IcebergOptions } from "./options.ts";
import { BackgroundService } from "../common/background_thread.ts";
import type { FromIcebergWorker, TableState, ToIcebergWorker } from "./worker_protocol.ts";

const ICEBERG_WORKER = new URL("./worker.ts", import.meta.url);

type IcebergWorker = BackgroundService<ToIcebergWorker, FromIcebergWorker>;

// A port to the process's Iceberg worker, shared by every table: a thread
// that failed has let go of every table.
function acquireWorker(): IcebergWorker {
  return BackgroundService.acquire<ToIcebergWorker, FromIcebergWorker>(
    ICEBERG_WORKER,
    (dir, message) => ({ type: "failed", dir, message }),
  );
}

/**
 * Options of {@linkcode IcebergTable.start}: the table's options, and the
 * guard of a writer whose right to write can end.
 */
export interface IcebergTableOptions extends IcebergOptions {
  /**
   * Asked before each table version is created: false and the version is
   * not created (a cluster node whose leadership ended). @default none: always
   */
  mayCommit?: () => boolean;
}

/**
 * What `/head` shows of a table (`"iceberg"`): where it is and how far it has
 * got, as the worker last reported.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { tableHead } from "./table_link.ts";
 * equal(tableHead(null).last_offset, null);
 * ```
 */
export function tableHead(state: TableState | null): {
  location: string | null;
  last_offset: number | null;
  version: number | null;
  commits: number;
  errors: number;
  last_error: string | null;
} {
  const read = state !== null && state.lastOffset >= 0;
  return {
    location: state?.location || null,
    last_offset: read ? state.lastOffset : null,
    version: read ? state.version || null : null,
    commits: state?.commits ?? 0,
    errors: state?.errors ?? 0,
    last_error: state?.lastError ?? null,
  };
}

/**
 * A log's Iceberg table, kept up with its sealed chunks by the process's
 * Iceberg worker: at `ARCHIVE/NAME/iceberg/` when the log has an archive,
 * else at `DIR/iceberg/` in the log's folder.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log/mod.ts";
 * import { writeSchemaHistory } from "../log/schema_history.ts";
 * import { IcebergTable } from "./table_link.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { name: "t", chunks: true, timers: false });
 * await writeSchemaHistory(dir, [{ from: 1, schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }]);
 * const table = IcebergTable.start(log, "t", null);
 * await log.appendMany(['{"n":1}', '{"n":2}']);
 * await log.roll();
 * await log.chunks.settled();
 * equal(await table.settled(30_000), true);
 * equal(table.state?.lastOffset, 2);
 * await table.close(10_000);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class IcebergTable {
  readonly #log: Log;
  readonly #dir: string;
  #worker: IcebergWorker | null;
  readonly #port: IcebergWorker;
  #state: TableState | null = null;
  #generation = -1;
  readonly #timer: ReturnType<typeof setInterval>;
  #waiters: (() => void)[] = [];
  #onClosed: (() => void) | null = null;
  readonly #logger: Logger;
  readonly #stream: string;
  readonly #mayCommit: (() => boolean) | null;

  private constructor(
    log: Log,
    stream: string,
    archive: ArchiveOptions | null,
    o: IcebergOptions,
    mayCommit: (() => boolean) | null,
  ) {
    this.#log = log;
    this.#dir = log.dir;
    this.#stream = stream;
    this.#logger = o.logger ?? new Logger({ level: "warn" });
    this.#mayCommit = mayCommit;
    this.#worker = this.#port = acquireWorker();
    this.#worker.register(log.dir, (m) => this.#fromWorker(m));
    this.#worker.post({
      type: "open",
      spec: {
        dir: log.dir,
        stream,
        streamId: log.streamId,
        archive,
        maxCommitBytes: o.maxCommitBytes ?? DEFAULT_MAX_COMMIT_BYTES,
        guarded: mayCommit !== null,
      },
    });
    this.#timer = setInterval(() => this.#poll(), o.pollMs ?? 250);
    Deno.unrefTimer(this.#timer);
  }

  /**
   * Starts keeping the table of `log` (stream `stream`, archived to
   * `archive` — an `s3://` URI or archive options — or not) up with its
   * sealed chunks.
   *
   * @throws {TypeError} If `log` is a replica (a mirror's): only the
   *   stream's writer commits to its table.
   */
  static start(
    log: Log,
    stream: string,
    archive: string | ArchiveOptions | null,
    options: IcebergTableOptions = {},
  ): IcebergTable {
    if (log.replica) {
      throw new TypeError(
        `the log of "${stream}" is a mirror's: only the stream's writer commits to its Iceberg table`,
      );
    }
    const a = typeof archive === "string" ? { uri: archive } : archive;
    const { mayCommit, ...rest } = options;
    return new IcebergTable(log, stream, a, checkIcebergOptions(rest), mayCommit ?? null);
  }

  /** The worker's last report (null before the first). */
  get state(): TableState | null {
    return this.#state;
  }

  /** What `/head` carries: `"iceberg"`, the table's state ({@linkcode tableHead}). */
  head(): { iceberg: ReturnType<typeof tableHead> } {
    return { iceberg: tableHead(this.#state) };
  }

  #poll(): void {
    const g = this.#log.closed ? this.#generation : this.#log.chunks.manifest?.generation ?? -1;
    if (g === this.#generation) return;
    this.#generation = g;
    this.#worker?.post({ type: "kick", dir: this.#dir });
  }

  /**
   * Resolves true once the table holds every row the log had sealed when
   * asked (false after `ms`).
   */
  async settled(ms: number): Promise<boolean> {
    const through = this.#log.chunks.through ?? 0;
    this.#poll();
    const deadline = Date.now() + ms;
    while ((this.#state?.lastOffset ?? -1) < through || this.#state?.lastOffset === -1) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((r) => {
        this.#waiters.push(r);
        timer = setTimeout(r, Math.min(left, 1000));
      });
      clearTimeout(timer);
    }
    return true;
  }

  #fromWorker(m: FromIcebergWorker): void {
    if (m.type === "may-commit") {
      // Asked before a version is created: answered from the guard, now.
      // Once let go (#worker null), no more versions: the answer is no.
      const ok = this.#worker !== null && (this.#mayCommit?.() ?? true);
      this.#port.post({ type: "may-commit", dir: this.#dir, id: m.id, ok });
      return;
    }
    if (m.type === "state") {
      const before = this.#state?.lastError ?? null;
      this.#state = m.state;
      const now = m.state.lastError;
      if (now !== null && now !== before) {
        this.#logger.error(
          "iceberg_commit_failed",
          { stream: this.#stream, table: m.state.location, error: now },
          `streamcast: the Iceberg table of "${this.#stream}" cannot take its rows (retrying): ${now}`,
        );
      }
    } else if (m.type === "failed") {
      this.#logger.error(
        "iceberg_worker_failed",
        { stream: this.#stream, error: m.message },
        `streamcast: the Iceberg worker failed; the table of "${this.#stream}" is no longer kept ` +
          `(a restart resumes it): ${m.message}`,
      );
      // Its thread is gone and answers nothing more: a later close or
      // release lets go at once instead of waiting for it.
      const worker = this.#worker;
      this.#worker = null;
      clearInterval(this.#timer);
      // After the thread has told every folder (this is one of them).
      if (worker) queueMicrotask(() => worker.release());
      this.#onClosed?.();
    } else this.#onClosed?.();
    const w = this.#waiters;
    this.#waiters = [];
    for (const r of w) r();
  }

  /**
   * A planned stop: seals the log's tail (the table takes sealed rows), lets
   * the worker commit everything sealed (for at most `waitMs`), then lets go
   * of the worker. Call it before closing the log; a closed log is not sealed.
   */
  async close(waitMs: number): Promise<void> {
    clearInterval(this.#timer);
    const worker = this.#worker;
    if (!worker) return;
    if (!this.#log.closed) {
      try {
        await this.#log.roll();
        await this.#log.chunks.settled();
      } catch (err) {
        // A log that cannot seal (a full disk) keeps its tail for the next start.
        this.#logger.warn(
          "iceberg_tail_not_sealed",
          { stream: this.#stream, error: err instanceof Error ? err.message : String(err) },
          `streamcast: cannot seal the tail of "${this.#stream}" for its Iceberg table: ${err}`,
        );
      }
    }
    await this.#letGo(worker, waitMs);
  }

  /**
   * Lets go of the table at once: no seal, no commit waited for (a commit
   * under way is refused by `mayCommit` before it creates a version). For a
   * writer that stopped writing, a cluster node whose leadership ended.
   */
  async release(): Promise<void> {
    clearInterval(this.#timer);
    const worker = this.#worker;
    if (!worker) return;
    await this.#letGo(worker, 0);
  }

  async #letGo(worker: IcebergWorker, waitMs: number): Promise<void> {
    this.#worker = null;
    const closed = new Promise<void>((resolve) => (this.#onClosed = resolve));
    worker.post({ type: "close", dir: this.#dir, waitMs });
    await closed;
    worker.release();
  }
}
