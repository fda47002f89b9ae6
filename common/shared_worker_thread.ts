/**
 * One background worker thread per module per process, shared by every
 * folder that uses it (the chunk worker by each log keeping chunks, the
 * Iceberg worker by each table): started with the first user, stopped with
 * the last, its messages routed to a handler by the folder they name. The
 * worker's memory reports (`{ type: "memory" }`) are kept for the process's
 * metrics.
 *
 * @module
 */

import type { MemoryMessage, WorkerMemory } from "./worker_memory.ts";
import { WorkerThread } from "./worker_thread.ts";

/**
 * The shared worker thread running the module at a URL, reference-counted:
 * {@linkcode SharedWorkerThread.acquire} takes a reference (starting it),
 * {@linkcode SharedWorkerThread.release} drops it (the last stops it).
 * `failed` turns an error the worker did not catch into the message each
 * folder's handler hears (the worker has stopped; it held every folder; the
 * next `acquire` starts another).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { SharedWorkerThread } from "./shared_worker_thread.ts";
 * const src = `import { parentChannel } from ${JSON.stringify(import.meta.resolve("./worker_thread.ts"))};
 *   type Msg = { dir: string; n: number };
 *   const post = parentChannel<Msg, Msg>((m) => post({ dir: m.dir, n: m.n * 2 }));`;
 * const file = await Deno.makeTempFile({ suffix: ".ts" });
 * await Deno.writeTextFile(file, src);
 * const url = new URL(`file://${file}`);
 * type Msg = { dir: string; n: number };
 * const failed = (dir: string) => ({ dir, n: -1 });
 * const a = SharedWorkerThread.acquire<Msg, Msg>(url, failed);
 * const b = SharedWorkerThread.acquire<Msg, Msg>(url, failed);
 * equal(a, b); // one thread for the module
 * const heard = Promise.withResolvers<number>();
 * a.register("/a", (m) => heard.resolve(m.n));
 * b.register("/b", () => heard.reject(new Error("routed to the wrong folder")));
 * a.post({ dir: "/a", n: 21 });
 * equal(await heard.promise, 42);
 * a.release("/a");
 * b.release("/b"); // the last reference: the thread stops
 * equal(SharedWorkerThread.memoryOf(url), null);
 * ```
 */
export class SharedWorkerThread<In, Out extends { dir: string }> {
  // The running threads, by module URL.
  static readonly #running = new Map<string, SharedWorkerThread<never, { dir: string }>>();
  readonly #key: string;
  readonly #worker: WorkerThread<In, Out | MemoryMessage>;
  readonly #handlers = new Map<string, (msg: Out) => void>();
  #memory: WorkerMemory | null = null;
  #refs = 0;

  private constructor(url: URL, failed: (dir: string, message: string) => Out) {
    this.#key = url.href;
    this.#worker = new WorkerThread<In, Out | MemoryMessage>(
      url,
      (msg) => {
        // A memory report is about no folder; every other message names one.
        if (!("dir" in msg)) this.#memory = msg.memory;
        else this.#handlers.get(msg.dir)?.(msg);
      },
      (message) => {
        // The thread has stopped: the next user starts another.
        this.#forget();
        for (const [dir, h] of this.#handlers) h(failed(dir, message));
      },
    );
  }

  /** Takes a reference to the thread running `url`, starting it if none runs. */
  static acquire<In, Out extends { dir: string }>(
    url: URL,
    failed: (dir: string, message: string) => Out,
  ): SharedWorkerThread<In, Out> {
    const running = SharedWorkerThread.#running;
    let w = running.get(url.href) as SharedWorkerThread<In, Out> | undefined;
    if (!w) {
      w = new SharedWorkerThread<In, Out>(url, failed);
      running.set(url.href, w as unknown as SharedWorkerThread<never, { dir: string }>);
    }
    w.#refs++;
    return w;
  }

  /** The last memory report of the thread running `url` (null: none runs, or none yet). */
  static memoryOf(url: URL): WorkerMemory | null {
    const w = SharedWorkerThread.#running.get(url.href);
    return w ? w.#memory : null;
  }

  /** Routes the thread's messages about `dir` to `handler`. */
  register(dir: string, handler: (msg: Out) => void): void {
    this.#handlers.set(dir, handler);
  }

  /** Sends a message to the thread (a structured copy). */
  post(msg: In): void {
    this.#worker.post(msg);
  }

  /**
   * Drops a reference, and the route of `dir` — unless `handler` is given and
   * another has replaced it since (the folder's next user). The last
   * reference stops the thread.
   */
  release(dir: string, handler?: (msg: Out) => void): void {
    if (handler === undefined || this.#handlers.get(dir) === handler) this.#handlers.delete(dir);
    if (--this.#refs === 0) {
      void this.#worker.terminate();
      this.#forget();
    }
  }

  #forget(): void {
    const running = SharedWorkerThread.#running;
    if (running.get(this.#key) === (this as unknown)) running.delete(this.#key);
  }
}
