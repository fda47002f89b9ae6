/**
 * The Iceberg worker: the service (`common/background_thread.ts`) that keeps
 * each table it is given up with its log's chunks, committing whatever is
 * sealed and not yet in the table — on the process's background thread, off
 * the writer's (beside the chunk worker). It talks to the tables only
 * through the messages of `worker_protocol.ts`.
 *
 * A table is brought up to date when asked (`kick`, after its log's
 * manifest changed) and when opened (what a crash or a stop left behind).
 * Commits are in offset order, one at a time per table; a failure is
 * retried with backoff (the table writer's steps are each safe to repeat).
 * On `close` the table is brought up to date once more, for at most
 * `waitMs`, then let go.
 *
 * A guarded table (a cluster's leader) asks its writer's thread before each
 * version it creates (`may-commit`); a refusal ends the round quietly: the
 * thread is about to let the table go.
 *
 * @module
 */

import { join } from "node:path";
import { backoffDelay } from "../common/backoff.ts";
import { s3ErrorMessage } from "../common/s3.ts";
import { LocalTableStore, type TableStore } from "./table_store.ts";
import { CommitRefusedError, type CommitStep, TableWriter } from "./table_writer.ts";
import type {
  FromIcebergWorker,
  TableSpec,
  TableState,
  ToIcebergWorker,
} from "./worker_protocol.ts";

// Test hook: STREAMCAST_CRASH_AT=iceberg-STEP kills the process right after
// that step of a commit, so that recovery is tested at every step for real.
const crashAt = (() => {
  try {
    return Deno.env.get("STREAMCAST_CRASH_AT") ?? "";
  } catch {
    return "";
  }
})();

function afterStep(step: CommitStep): void {
  if (crashAt === `iceberg-${step}`) Deno.kill(Deno.pid, "SIGKILL");
}

// Answers the tables; set by `serve`.
let post: (msg: FromIcebergWorker) => void = () => {
  throw new Error("iceberg worker: not started");
};

async function storeOf(spec: TableSpec): Promise<TableStore> {
  if (spec.archive === null) return new LocalTableStore(join(spec.dir, "iceberg"));
  // Loaded only with an archive: the S3 SDK is large.
  const { S3TableStore } = await import("./s3_table_store.ts");
  return new S3TableStore(spec.archive, spec.stream);
}

class Table {
  readonly spec: TableSpec;
  readonly state: TableState;
  #writer: TableWriter | null = null;
  #dirty = true;
  #running: Promise<void> | null = null;
  #failures = 0;
  #wake: (() => void) | null = null;
  // Questions to the writer's thread waiting for its answer, by id.
  readonly #asked = new Map<number, (ok: boolean) => void>();
  closed = false;

  constructor(spec: TableSpec) {
    this.spec = spec;
    this.state = {
      location: "",
      lastOffset: -1,
      version: 0,
      commits: 0,
      rows: 0,
      lastCommitMs: 0,
      errors: 0,
      lastError: null,
    };
  }

  kick(): void {
    this.#dirty = true;
    if (this.#failures === 0) this.#wake?.();
    this.#running ??= this.#loop().finally(() => (this.#running = null));
  }

  async #loop(): Promise<void> {
    while (this.#dirty && !this.closed) {
      this.#dirty = false;
      try {
        await this.#catchUp();
        this.#failures = 0;
      } catch (err) {
        if (err instanceof CommitRefusedError) {
          // Not an error: the writer's thread no longer commits; it lets the table go.
          this.#post();
          break;
        }
        this.state.errors++;
        this.state.lastError = err instanceof Error && "$metadata" in err
          ? s3ErrorMessage(err)
          : err instanceof Error
          ? err.message
          : String(err);
        this.#post();
        this.#dirty = true;
        const delay = backoffDelay(++this.#failures, 250, 30_000);
        let timer: ReturnType<typeof setTimeout> | undefined;
        await new Promise<void>((r) => {
          this.#wake = r;
          timer = setTimeout(r, delay);
        });
        clearTimeout(timer);
        this.#wake = null;
      }
    }
  }

  async #catchUp(): Promise<void> {
    this.#writer ??= new TableWriter({
      store: await storeOf(this.spec),
      dir: this.spec.dir,
      stream: this.spec.stream,
      streamId: this.spec.streamId,
      archive: this.spec.archive,
      maxCommitBytes: this.spec.maxCommitBytes,
      afterStep,
      beforeCommit: this.spec.guarded ? () => this.#ask() : undefined,
    });
    const w = this.#writer;
    this.state.location = w.location;
    this.state.lastOffset = await w.lastOffset();
    while (!this.closed) {
      const r = await w.commit();
      if (r === null) break;
      this.state.commits++;
      this.state.rows += r.rows;
      this.state.lastOffset = r.lastOffset;
      this.state.version = r.version;
      this.state.lastCommitMs = Date.now();
      this.state.lastError = null;
      this.#post();
    }
    this.state.lastError = null;
    this.#post();
  }

  // Asks the writer's thread whether a version may be created now.
  #ask(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    const id = nextQuestion++;
    return new Promise((resolve) => {
      this.#asked.set(id, resolve);
      post({ type: "may-commit", dir: this.spec.dir, id });
    });
  }

  /** The writer's thread's answer to question `id`. */
  answered(id: number, ok: boolean): void {
    const r = this.#asked.get(id);
    this.#asked.delete(id);
    r?.(ok && !this.closed);
  }

  /** Brings the table up to date (for at most `ms`), then lets go. */
  async close(ms: number): Promise<void> {
    if (ms > 0) this.kick();
    const deadline = Date.now() + ms;
    while (this.#running && Date.now() < deadline) {
      // Retry now rather than after the backoff: the stop is waiting on it.
      this.#failures = 0;
      this.#wake?.();
      await Promise.race([this.#running, new Promise((r) => setTimeout(r, 50))]);
    }
    this.closed = true;
    for (const r of this.#asked.values()) r(false);
    this.#asked.clear();
    this.#wake?.();
    await Promise.race([this.#running, new Promise((r) => setTimeout(r, 1000))]);
    this.#writer?.close();
  }

  #post(): void {
    post({ type: "state", dir: this.spec.dir, state: { ...this.state } });
  }
}

const tables = new Map<string, Table>();
let nextQuestion = 1;

/**
 * Starts the Iceberg worker on the calling thread: `answer` reaches the
 * tables; the returned function takes their messages.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { serve } from "./worker.ts";
 * import type { FromIcebergWorker } from "./worker_protocol.ts";
 * const said: FromIcebergWorker[] = [];
 * serve((m) => said.push(m))({ type: "close", dir: "/never-opened", waitMs: 0 });
 * equal(said[0].type, "closed");
 * ```
 */
export function serve(answer: (msg: FromIcebergWorker) => void): (msg: ToIcebergWorker) => void {
  post = answer;
  return receive;
}

function receive(msg: ToIcebergWorker): void {
  switch (msg.type) {
    case "open": {
      const t = new Table(msg.spec);
      tables.set(msg.spec.dir, t);
      t.kick();
      break;
    }
    case "kick":
      tables.get(msg.dir)?.kick();
      break;
    case "may-commit":
      tables.get(msg.dir)?.answered(msg.id, msg.ok);
      break;
    case "close": {
      const t = tables.get(msg.dir);
      if (!t) {
        post({ type: "closed", dir: msg.dir });
        break;
      }
      tables.delete(msg.dir);
      t.close(msg.waitMs).finally(() => post({ type: "closed", dir: msg.dir }));
      break;
    }
  }
}
