/**
 * The writer's side of the chunk worker: one `Worker` per process, shared by
 * every log that keeps chunks, started with the first and stopped with the
 * last — or, for a log given an I/O seam, the same steps on the log's own
 * thread, through the seam (a `Worker` cannot be handed functions).
 *
 * @module
 */

import type { FromWorker, FromWorkerThread, ToWorker } from "./chunk_protocol.ts";
import type { WorkerMemory } from "../common/worker_memory.ts";
import { ChunkHost } from "./chunk_host.ts";
import { WorkerThread } from "../common/worker_thread.ts";
import type { LogIo } from "./log_io.ts";

type Handler = (msg: FromWorker) => void;

/**
 * What a log's link talks to: messages in, messages out, per log folder.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { type ChunkPort, InlineChunkWorker } from "./chunk_client.ts";
 * import { REAL_IO } from "./log_io.ts";
 * const port: ChunkPort = new InlineChunkWorker(REAL_IO);
 * const said = new Promise((r) => port.register("/nowhere", r));
 * port.post({ type: "sync", dir: "/nowhere", id: 1 });
 * equal(((await said) as { type: string }).type, "error"); // never opened
 * port.release("/nowhere");
 * ```
 */
export interface ChunkPort {
  /** Routes the messages about `dir` to `handler`. */
  register(dir: string, handler: Handler): void;
  /** Sends a message. */
  post(msg: ToWorker): void;
  /** Lets go of `dir`. */
  release(dir: string): void;
}

/** The process's chunk worker, reference-counted. */
export class ChunkWorker implements ChunkPort {
  static #shared: ChunkWorker | null = null;
  /** The running worker's last memory report (null: no worker). */
  static memory: WorkerMemory | null = null;
  readonly #worker: WorkerThread<ToWorker, FromWorkerThread>;
  readonly #handlers = new Map<string, Handler>();
  #refs = 0;

  private constructor() {
    this.#worker = new WorkerThread(
      new URL("./chunk_worker.ts", import.meta.url),
      (msg) => {
        if (msg.type === "memory") {
          ChunkWorker.memory = msg.memory;
          return;
        }
        this.#handlers.get(msg.dir)?.(msg);
      },
      (failure) => {
        const message = `chunk worker failed: ${failure}`;
        for (const [dir, h] of this.#handlers) h({ type: "error", dir, message });
      },
    );
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
    this.#worker.post(msg);
  }

  /** Drops the reference taken for `dir`; the last one stops the worker. */
  release(dir: string): void {
    this.#handlers.delete(dir);
    if (--this.#refs === 0) {
      void this.#worker.terminate();
      ChunkWorker.#shared = null;
      ChunkWorker.memory = null;
    }
  }
}

/**
 * The process's chunk worker's JavaScript heap, from its last report (every
 * few seconds), or null when no worker runs (no log keeps chunks, or every
 * such log chunks on its own thread).
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { chunkWorkerMemory } from "./chunk_client.ts";
 * import { Log } from "./mod.ts";
 * equal(chunkWorkerMemory(), null); // no log keeps chunks yet
 * const log = await Log.open(await Deno.makeTempDir(), { chunks: true, timers: false });
 * await log.append("{}");
 * await log.roll();
 * await log.chunksSettled(); // the worker has answered, so it has reported
 * ok(chunkWorkerMemory()!.heapUsed > 0);
 * await log.close();
 * equal(chunkWorkerMemory(), null);
 * ```
 */
export function chunkWorkerMemory(): WorkerMemory | null {
  return ChunkWorker.memory;
}

/**
 * The chunk worker's steps on this thread, writing through `io`: messages
 * go both ways as copies, in order, a microtask later, as with a `Worker`.
 * One per log.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "./mod.ts";
 * import { REAL_IO } from "./log_io.ts";
 * // A log given an io other than REAL_IO itself chunks on its own thread.
 * const log = await Log.open(await Deno.makeTempDir(), { chunks: true, timers: false, io: { ...REAL_IO } });
 * await log.append("{}");
 * await log.roll();
 * await log.chunksSettled();
 * equal(log.manifest?.chunks.length, 1);
 * await log.close();
 * ```
 */
export class InlineChunkWorker implements ChunkPort {
  readonly #handlers = new Map<string, Handler>();
  readonly #host: ChunkHost;

  /** Steps writing through `io`. */
  constructor(io: LogIo) {
    this.#host = new ChunkHost(io, (msg) => {
      const copy = structuredClone(msg);
      queueMicrotask(() => this.#handlers.get(copy.dir)?.(copy));
    });
  }

  /** Routes the messages about `dir` to `handler`. */
  register(dir: string, handler: Handler): void {
    this.#handlers.set(dir, handler);
  }

  /** Hands a message to the steps. */
  post(msg: ToWorker): void {
    const copy = structuredClone(msg);
    queueMicrotask(() => this.#host.receive(copy));
  }

  /** Lets go of `dir`. */
  release(dir: string): void {
    this.#handlers.delete(dir);
  }
}
