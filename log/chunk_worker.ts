/**
 * The chunk worker: a worker thread (`common/worker_thread.ts`) that turns
 * sealed segments into chunks, keeps the manifest, merges small chunks,
 * deletes replaced ones after a grace period and applies retention — off the
 * writer's thread. One worker serves every log of a process; it talks to
 * the logs only through the typed messages of `chunk_protocol.ts` and holds
 * no state shared with them. What it does with them is `chunk_host.ts`, on
 * the real filesystem; the steps, and why each survives a crash, are
 * `chunk_steps.ts`.
 *
 * @module
 */

import type { FromWorkerThread, ToWorker } from "./chunk_protocol.ts";
import { ChunkHost } from "./chunk_host.ts";
import { REAL_IO } from "./log_io.ts";
import { reportWorkerMemory } from "../common/worker_memory.ts";
import { parentChannel } from "../common/worker_thread.ts";

const post = parentChannel<ToWorker, FromWorkerThread>((msg) => host.receive(msg));
const host = new ChunkHost(REAL_IO, post);
// Its own heap, for the process's metrics (the main thread's does not count it).
reportWorkerMemory((memory) => post({ type: "memory", memory }));
