/**
 * The archive side of the chunk worker: uploading a log's chunks, its
 * producer journal and its manifest to S3, in that order, retrying with
 * backoff, beside (never blocking) the chunking queue.
 *
 * @module
 */

import { join } from "node:path";
import { type ChunkEntry, chunkPath, type Manifest } from "./chunk.ts";
import type { ArchiveState, ChunkPolicy, FromWorker } from "./protocol.ts";
import type { ArchiveStore } from "./archive.ts";
import { PRODUCERS_FILE } from "../producer/journal.ts";
import { backoffDelay } from "../../common/backoff.ts";
import { crashStep } from "./crash_hook.ts";

/** What an archiver reads of the log it uploads, and where it reports. */
export interface ArchivedLog {
  /** The log folder. */
  dir: string;
  /** The stream name. */
  stream: string;
  /** The manifest as the worker keeps it. */
  manifest: Manifest;
  /** The log's chunk policy (its `archive` names the store). */
  policy: ChunkPolicy;
  /** Sends a message to the log. */
  post(msg: FromWorker): void;
}

/**
 * Uploads a log's chunks, then its manifest, retrying with backoff; runs
 * beside the chunking queue so that a slow or absent store delays only the
 * archive.
 *
 * @example
 * ```ts ignore
 * const archiver = new Archiver(log); // a log whose policy names an archive
 * archiver.kick(); // after each manifest change
 * ```
 */
export class Archiver {
  readonly st: ArchivedLog;
  store: ArchiveStore | null = null;
  uploaded: Set<string> | null = null;
  archived: Manifest | null = null;
  state: ArchiveState;
  #dirty = false;
  #running: Promise<void> | null = null;
  // Failed syncs in a row (0: not backing off).
  #failures = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #wakeSleep: (() => void) | null = null;
  closed = false;

  readonly #learned: () => void;

  /**
   * An archiver of `st`, whose policy names an archive; `learned` is told
   * when a node that does not upload (see `#learn`) finds the archive
   * holds more than it last saw.
   */
  constructor(st: ArchivedLog, learned: () => void = () => {}) {
    this.st = st;
    this.#learned = learned;
    this.state = {
      uri: st.policy.archive!.uri,
      through: 0,
      manifest: null,
      uploadedChunks: 0,
      uploadedBytes: 0,
      errors: 0,
      lastError: null,
      syncedUs: 0,
    };
  }

  /** Asks for a sync (coalesced). */
  kick(): void {
    this.#dirty = true;
    if (this.#wakeSleep && this.#failures === 0) this.#wakeSleep();
    this.#running ??= this.#loop().finally(() => (this.#running = null));
  }

  /** Resolves when nothing is left to upload (or after `ms`). */
  async idle(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (this.#running && Date.now() < deadline) {
      // Retry now rather than after the backoff: we are waiting on it.
      this.#failures = 0;
      this.#wakeSleep?.();
      await Promise.race([this.#running, new Promise((r) => setTimeout(r, 50))]);
    }
  }

  async #loop(): Promise<void> {
    while (this.#dirty && !this.closed) {
      this.#dirty = false;
      try {
        await this.#sync();
        this.#failures = 0;
      } catch (err) {
        const { s3ErrorMessage } = await import("./archive.ts");
        this.state.errors++;
        this.state.lastError = s3ErrorMessage(err);
        this.#post();
        this.#dirty = true;
        const delay = backoffDelay(++this.#failures, 250, 30_000);
        await new Promise<void>((r) => {
          this.#wakeSleep = r;
          this.#timer = setTimeout(r, delay);
        });
        clearTimeout(this.#timer);
        this.#wakeSleep = null;
      }
    }
  }

  async #sync(): Promise<void> {
    const st = this.st;
    const term = st.policy.archiveTerm;
    const store = await this.#store();
    // A cluster's node that does not lead uploads nothing (kicked again when it leads).
    if (term === null) return await this.#learn(store);
    if (!this.uploaded) {
      this.archived = await store.getManifest();
      if (this.archived && this.archived.stream_id !== st.manifest.stream_id) {
        throw new Error(
          `${store.uri} holds stream ${this.archived.stream_id}, not ${st.manifest.stream_id}`,
        );
      }
      this.uploaded = await store.listChunks();
    }
    // The term changed meanwhile (this node stopped leading): the next sync decides.
    const moved = () => st.policy.archiveTerm !== term && (this.#dirty = true);
    const local = structuredClone(st.manifest);
    for (const c of local.chunks) {
      if (this.uploaded.has(c.sha256)) continue;
      if (moved()) return;
      let bytes: Uint8Array;
      try {
        bytes = await Deno.readFile(chunkPath(st.dir, c.sha256));
      } catch (err) {
        // Merged away since the snapshot: the next sync has the new list.
        if (err instanceof Deno.errors.NotFound) {
          this.#dirty = true;
          return;
        }
        throw err;
      }
      await store.putChunk(c.sha256, bytes);
      crashStep("archive-chunk-put");
      this.uploaded.add(c.sha256);
      this.state.uploadedChunks++;
      this.state.uploadedBytes += bytes.length;
    }
    const { mergeManifests, remakeBelow, straddlingChunk } = await import("./archive.ts");
    if (moved()) return;
    if (term !== undefined) {
      // Never over a manifest of a later term: that leader's archive is the stream's now.
      const current = await store.getManifest();
      if ((current?.term ?? 0) > term) {
        throw new Error(
          `${store.uri} holds the manifest of term ${current!.term}; this node led term ${term}`,
        );
      }
      this.archived = current;
    }
    // An archived chunk cut elsewhere that reaches into the local chunks: its
    // rows below them become a chunk of their own, so no offset is dropped and
    // none is listed twice.
    const cut = straddlingChunk(this.archived, local);
    let remade: ChunkEntry | null = null;
    if (cut) {
      const from = local.chunks[0];
      remade = await remakeBelow(store, cut, from.first, from.first_ts);
      this.uploaded.add(remade.sha256);
      if (moved()) return;
    }
    const merged = mergeManifests(this.archived, local, remade);
    if (term !== undefined) merged.term = term;
    const same = this.archived && this.archived.through === merged.through &&
      JSON.stringify(this.archived.chunks) === JSON.stringify(merged.chunks);
    if (!same) {
      // The producer journal first (log/producer/table.ts): it then holds a record
      // for every producer commit the manifest's chunks hold, so a restore
      // keeps the producer table (`../restore.ts` keeps the records it covers).
      const journal = await Deno.readFile(join(st.dir, PRODUCERS_FILE)).catch((err) => {
        if (err instanceof Deno.errors.NotFound) return null;
        throw err;
      });
      if (journal !== null) await store.putFile(PRODUCERS_FILE, journal);
      if (moved()) return;
      await store.putManifest(merged);
      this.archived = merged;
    }
    this.state.through = this.archived?.through ?? 0;
    this.state.manifest = this.archived;
    this.state.lastError = null;
    this.state.syncedUs = Date.now() * 1000;
    this.#post();
  }

  async #store(): Promise<ArchiveStore> {
    if (!this.store) {
      const { ArchiveStore } = await import("./archive.ts");
      this.store = new ArchiveStore(this.st.policy.archive!, this.st.stream);
    }
    return this.store;
  }

  // A node that does not upload (a cluster's follower) reads the archive's
  // manifest, which the leader writes after the chunks it lists: its own
  // retention drops a chunk once that manifest covers its rows
  // (`steps.ts`, inArchive), whoever cut the chunks.
  async #learn(store: ArchiveStore): Promise<void> {
    const m = await store.getManifest();
    if (m && m.stream_id !== this.st.manifest.stream_id) {
      throw new Error(
        `${store.uri} holds stream ${m.stream_id}, not ${this.st.manifest.stream_id}`,
      );
    }
    const before = this.archived?.through ?? 0;
    this.archived = m;
    this.state.through = m?.through ?? 0;
    this.state.manifest = m;
    this.state.lastError = null;
    this.state.syncedUs = Date.now() * 1000;
    this.#post();
    if ((m?.through ?? 0) > before) this.#learned();
  }

  #post(): void {
    this.st.post({ type: "archive", dir: this.st.dir, state: structuredClone(this.state) });
  }

  /** Stops: no more uploads, the store let go. */
  close(): void {
    this.closed = true;
    this.#wakeSleep?.();
    this.store?.close();
  }
}
