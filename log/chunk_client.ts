/**
 * The writer's side of the chunk worker: one `Worker` per process, shared by
 * every log that keeps chunks, started with the first and stopped with the
 * last.
 *
 * @module
 */

import type { FromWorker, ToWorker } from "./chunk_protocol.ts";

type Handler = (msg: FromWorker) => void;

/** The process's chunk worker, reference-counted. */
export class ChunkWorker {
  static #shared: ChunkWorker | null = null;
  readonly #worker: Worker;
  readonly #handlers = new Map<string, Handler>();
  #refs = 0;

  private constructor() {
    this.#worker = new Worker(new URL("./chunk_worker.ts", import.meta.url).href, {
      type: "module",
    });
    this.#worker.onmessage = (e: MessageEvent<FromWorker>) => {
      this.#handlers.get(e.data.dir)?.(e.data);
    };
    this.#worker.onerror = (e) => {
      e.preventDefault();
      const message = `chunk worker failed: ${e.message}`;
      for (const [dir, h] of this.#handlers) h({ type: "error", dir, message });
    };
  }

  /** Takes a reference to the shared worker, starting it if needed. */
  static acquire(): ChunkWorker {
    const w = (ChunkWorker.#shared ??= new ChunkWorker());
    w.#refs++;
    return w;
  }

  /** Routes the worker's messages about `dir` to `handler`. */
  register(dir: string, handler: Handler): void {
    this.#handlers.set(dir, handler);
  }

  /** Sends a message to the worker. */
  post(msg: ToWorker): void {
    this.#worker.postMessage(msg);
  }

  /** Drops the reference taken for `dir`; the last one stops the worker. */
  release(dir: string): void {
    this.#handlers.delete(dir);
    if (--this.#refs === 0) {
      this.#worker.terminate();
      ChunkWorker.#shared = null;
    }
  }
}
