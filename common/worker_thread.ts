/**
 * The thread for the server's background work (`background_thread.ts`: the
 * chunk and Iceberg workers), started through `node:worker_threads` rather
 * than as a Web `Worker` because only there can its heap be given limits:
 * its young generation is held to {@linkcode WORKER_YOUNG_GENERATION_MIB}. V8 lets a
 * busy isolate's new space grow to 64 MiB (measured here: a Web Worker
 * making short-lived rows, tests/common/worker_thread_test.ts) and shrinks
 * it again only after quieter stretches; a worker that works in bursts (a
 * segment sealed, a table version written) kept growing and shrinking it,
 * and the process's resident memory rose and fell by some 50 MiB with it.
 * Capped, the worker collects its short-lived garbage more often and its
 * memory stays level. The main thread's heap is not touched: its flags are the
 * process's.
 *
 * @module
 */

import { parentPort, Worker } from "node:worker_threads";

/**
 * The largest young generation (its new space) a background worker's heap
 * may reserve, MiB: V8's own cap on a Web Worker is 64.
 */
export const WORKER_YOUNG_GENERATION_MIB = 8;

/**
 * A worker thread running the module at `url`, which answers through
 * {@linkcode parentChannel}: messages go both ways as structured copies, in
 * order. `onFailed` hears an error the worker did not catch (the worker has
 * stopped).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { WorkerThread } from "./worker_thread.ts";
 * const src = `import { parentChannel } from ${JSON.stringify(import.meta.resolve("./worker_thread.ts"))};
 *   const post = parentChannel<number, number>((n) => post(n * 2));`;
 * const file = await Deno.makeTempFile({ suffix: ".ts" });
 * await Deno.writeTextFile(file, src);
 * const answer = Promise.withResolvers<number>();
 * const w = new WorkerThread<number, number>(new URL(`file://${file}`), answer.resolve, answer.reject);
 * w.post(21);
 * equal(await answer.promise, 42);
 * await w.terminate();
 * await Deno.remove(file);
 * ```
 */
export class WorkerThread<In, Out> {
  readonly #worker: Worker;

  /** Starts the worker. */
  constructor(url: URL, onMessage: (msg: Out) => void, onFailed: (message: string) => void) {
    this.#worker = new Worker(url, {
      resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MIB },
    });
    this.#worker.on("message", onMessage);
    this.#worker.on("error", (err: Error) => onFailed(err?.message ?? String(err)));
  }

  /** Sends a message (a structured copy). */
  post(msg: In): void {
    this.#worker.postMessage(msg);
  }

  /** Stops the worker; resolves once it has stopped. */
  async terminate(): Promise<void> {
    await this.#worker.terminate();
  }
}

/**
 * Inside a {@linkcode WorkerThread}: hands the main thread's messages to
 * `onMessage` and returns the function that answers it. Throws on the main
 * thread.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { parentChannel } from "./worker_thread.ts";
 * throws(() => parentChannel(() => {}), /not in a worker thread/);
 * ```
 */
export function parentChannel<In, Out>(onMessage: (msg: In) => void): (msg: Out) => void {
  const port = parentPort;
  if (!port) throw new Error("parentChannel: not in a worker thread");
  port.on("message", onMessage);
  return (msg) => port.postMessage(msg);
}
