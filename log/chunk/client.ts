/**
 * The writer's side of the chunk worker: a service on the process's
 * background thread (`common/background_thread.ts`), shared by every log
 * that keeps chunks — or, for a log given an I/O seam, the same steps on the
 * log's own thread, through the seam (a thread cannot be handed functions).
 *
 * @module
 */

import type { FromWorker, ToWorker } from "./protocol.ts";
import { ChunkHost } from "./host.ts";
import { BackgroundService } from "../../common/background_thread.ts";
import type { LogIo } from "../disk/io.ts";

type Handler = (msg: FromWorker) => void;

/**
 * What a log's link talks to: messages in, messages out, per log folder.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { type ChunkPort, InlineChunkWorker } from "./client.ts";
 * import { REAL_IO } from "../disk/io.ts";
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

const CHUNK_WORKER = new URL("./worker.ts", import.meta.url);

/**
 * A port to the process's chunk worker, shared by every log that keeps
 * chunks (its background thread started with the first user, stopped with
 * the last `release`). An error the thread did not catch reaches each log as
 * an `error` message marked `stopped`: the thread is gone, and nothing posted
 * to this port is answered after it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { sharedChunkWorker } from "./client.ts";
 * const port = sharedChunkWorker();
 * const said = new Promise((r) => port.register("/nowhere", r));
 * port.post({ type: "sync", dir: "/nowhere", id: 1 });
 * equal(((await said) as { type: string }).type, "error"); // never opened
 * port.release("/nowhere");
 * ```
 */
export function sharedChunkWorker(): ChunkPort {
  return BackgroundService.acquire<ToWorker, FromWorker>(CHUNK_WORKER, (dir, failure) => ({
    type: "error",
    dir,
    message: `chunk worker failed: ${failure}`,
    stopped: true,
  }));
}

/**
 * The chunk worker's steps on this thread, writing through `io`: messages
 * go both ways as copies, in order, a microtask later, as with a `Worker`.
 * One per log.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../mod.ts";
 * import { REAL_IO } from "../disk/io.ts";
 * // A log given an io other than REAL_IO itself chunks on its own thread.
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { chunks: true, timers: false, io: { ...REAL_IO } });
 * await log.append("{}");
 * await log.roll();
 * await log.chunks.settled();
 * equal(log.chunks.manifest?.chunks.length, 1);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
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
