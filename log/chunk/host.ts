/**
 * What the chunk worker does with the messages of `protocol.ts`: one
 * queue of steps (`steps.ts`) per log, run in order, and an archiver
 * beside it for a log with an archive. The process's `Worker`
 * (`worker.ts`) runs one host with the real filesystem; a log given
 * an I/O seam runs its own on its thread (`client.ts`).
 *
 * @module
 */

import { emptyManifest } from "./chunk.ts";
import type { FromWorker, SealedSegment, ToWorker } from "./protocol.ts";
import { Archiver } from "./archiver.ts";
import {
  adoptChunks,
  type ChunkLogState,
  chunkSegment,
  compactChunks,
  loadChunks,
  retainChunks,
} from "./steps.ts";
import type { LogIo } from "../disk/io.ts";

interface HostedLog extends ChunkLogState {
  queue: Promise<void>;
  archive: Archiver | null;
  /** Sealed segments handed over and not chunked yet, oldest first. */
  sealed: SealedSegment[];
  /** The log's clock as its last message gave it, µs. */
  nowUs: number;
}

// Chunks the sealed segments handed over, oldest first. One that fails (a
// full disk, say) stays first and is tried again before any later one, at
// the next seal or maintenance: a later segment listed past it could be
// merged across its rows, and it then taken for listed and deleted.
async function chunkSealed(st: HostedLog): Promise<void> {
  while (st.sealed.length > 0) {
    await chunkSegment(st, st.sealed[0]);
    st.sealed.shift();
  }
}

/**
 * The chunk worker's message handler, for every log it serves.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ChunkHost } from "./host.ts";
 * import type { FromWorker } from "./protocol.ts";
 * import { REAL_IO } from "../disk/io.ts";
 * const said: FromWorker[] = [];
 * const host = new ChunkHost(REAL_IO, (m) => said.push(m));
 * host.receive({ type: "sync", dir: "/nowhere", id: 1 });
 * equal(said[0].type, "error"); // that log was never opened
 * ```
 */
export class ChunkHost {
  readonly #io: LogIo;
  readonly #post: (msg: FromWorker) => void;
  readonly #logs = new Map<string, HostedLog>();

  /** A host writing through `io` and answering through `post`. */
  constructor(io: LogIo, post: (msg: FromWorker) => void) {
    this.#io = io;
    this.#post = post;
  }

  #enqueue(dir: string, work: (st: HostedLog) => Promise<void>, nowUs?: number): void {
    const st = this.#logs.get(dir);
    if (st && nowUs !== undefined) st.nowUs = Math.max(st.nowUs, nowUs);
    if (!st) {
      this.#post({ type: "error", dir, message: `log ${dir} is not open in the chunk worker` });
      return;
    }
    st.queue = st.queue.then(() => work(st)).catch((err) => {
      this.#post({ type: "error", dir, message: err instanceof Error ? err.message : String(err) });
    });
  }

  /** Handles one message from a log. */
  receive(msg: ToWorker): void {
    switch (msg.type) {
      case "open": {
        // Registered at once, so that messages sent right after "open" queue
        // behind the loading of the manifest.
        const st: HostedLog = {
          dir: msg.dir,
          stream: msg.stream,
          manifest: emptyManifest(msg.stream, msg.streamId),
          policy: msg.policy,
          io: this.#io,
          post: this.#post,
          queue: Promise.resolve(),
          archive: null,
          sealed: [],
          nowUs: 0,
        };
        this.#logs.set(msg.dir, st);
        this.#enqueue(msg.dir, async (s) => {
          await loadChunks(s, msg.streamId);
          if (s.policy.archive) {
            // What a node that does not upload learns of the archive lets its retention drop more.
            s.archive = new Archiver(
              s,
              () => this.#enqueue(s.dir, (st) => retainChunks(st, st.nowUs)),
            );
            s.archive.kick();
          }
        });
        break;
      }
      case "seal":
        this.#logs.get(msg.dir)?.sealed.push(msg.segment);
        this.#enqueue(msg.dir, async (st) => {
          await chunkSealed(st);
          await compactChunks(st, msg.nowUs);
          await retainChunks(st, msg.nowUs);
        }, msg.nowUs);
        break;
      case "maintain":
        this.#enqueue(msg.dir, async (st) => {
          await chunkSealed(st);
          await compactChunks(st, msg.nowUs);
          await retainChunks(st, msg.nowUs);
          st.archive?.kick();
        }, msg.nowUs);
        break;
      case "policy":
        this.#enqueue(msg.dir, (st) => {
          st.policy = msg.policy;
          st.archive?.kick();
          return Promise.resolve();
        });
        break;
      case "adopt":
        this.#enqueue(msg.dir, (st) => adoptChunks(st, msg.chunks, msg.nowUs), msg.nowUs);
        break;
      case "sync":
        this.#enqueue(msg.dir, (st) => {
          this.#post({ type: "synced", dir: st.dir, id: msg.id });
          return Promise.resolve();
        });
        break;
      case "close":
        if (!this.#logs.has(msg.dir)) {
          this.#post({ type: "closed", dir: msg.dir });
          break;
        }
        this.#enqueue(msg.dir, async (st) => {
          if (st.archive) {
            // A planned stop ships what it can (bounded), then lets go.
            await st.archive.idle(msg.archiveWaitMs ?? 0);
            st.archive.close();
          }
          this.#logs.delete(st.dir);
          this.#post({ type: "closed", dir: st.dir });
        });
        break;
    }
  }
}
