/**
 * A worker thread's own memory, for the process's metrics: each `Worker` has
 * its own V8 isolate, whose heap the main thread's `Deno.memoryUsage()` does
 * not count. The server's background thread (which runs the chunk and
 * Iceberg workers) reports its own as it starts and every few seconds.
 *
 * @module
 */

/**
 * A worker's JavaScript heap and external memory, bytes.
 */
export interface WorkerMemory {
  heapUsed: number;
  heapTotal: number;
  external: number;
}

/**
 * The message a worker posts with its memory, beside its own messages.
 */
export interface MemoryMessage {
  type: "memory";
  memory: WorkerMemory;
}

/** How often a worker reports its memory, ms. */
export const WORKER_MEMORY_EVERY_MS = 5000;

/**
 * Calls `post` with this thread's memory now and every
 * {@linkcode WORKER_MEMORY_EVERY_MS} after, on a timer that does not keep
 * the thread alive.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { reportWorkerMemory, type WorkerMemory } from "./worker_memory.ts";
 * let first: WorkerMemory | null = null;
 * reportWorkerMemory((m) => first ??= m);
 * ok(first!.heapUsed > 0 && first!.heapTotal >= first!.heapUsed);
 * ```
 */
export function reportWorkerMemory(post: (memory: WorkerMemory) => void): void {
  const now = () => {
    const { heapUsed, heapTotal, external } = Deno.memoryUsage();
    post({ heapUsed, heapTotal, external });
  };
  now();
  Deno.unrefTimer(setInterval(now, WORKER_MEMORY_EVERY_MS));
}
