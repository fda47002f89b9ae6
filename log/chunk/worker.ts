/**
 * The chunk worker: the service (`common/background_thread.ts`) that turns
 * sealed segments into chunks, keeps the manifest, merges small chunks,
 * deletes replaced ones after a grace period and applies retention — on the
 * process's background thread, off the writer's. One serves every log of a
 * process; it talks to the logs only through the typed messages of
 * `protocol.ts` and holds no state shared with them. What it does with
 * them is `host.ts`, on the real filesystem; the steps, and why each
 * survives a crash, are `steps.ts`.
 *
 * @module
 */

import type { FromWorker, ToWorker } from "./protocol.ts";
import { ChunkHost } from "./host.ts";
import { REAL_IO } from "../disk/io.ts";

/**
 * Starts the chunk worker on the calling thread: `post` answers the logs;
 * the returned function takes their messages.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { serve } from "./worker.ts";
 * import type { FromWorker } from "./protocol.ts";
 * const said: FromWorker[] = [];
 * serve((m) => said.push(m))({ type: "sync", dir: "/nowhere", id: 1 });
 * equal(said[0].type, "error"); // that log was never opened
 * ```
 */
export function serve(post: (msg: FromWorker) => void): (msg: ToWorker) => void {
  const host = new ChunkHost(REAL_IO, post);
  return (msg) => host.receive(msg);
}
