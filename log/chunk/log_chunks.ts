/**
 * What a log's owner sees of its chunks (`Log.chunks`) and of their archive
 * (`Log.archive`): how far they reach, the manifest, the chunk worker's last
 * error, waiting for the worker, changing the chunk policy; how far the
 * archive has got. A log that keeps no chunks has both too: they answer null
 * and wait for nothing.
 *
 * @module
 */

import type { SharedManifest } from "./chunk.ts";
import type { ChunkLink } from "./link.ts";
import type { ArchiveState, ChunkPolicy } from "./protocol.ts";
import type { ResolvedOptions } from "../options.ts";

/**
 * A log's chunks: the sealed history the chunk worker keeps as chunks.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../log.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir, { chunks: true, timers: false });
 * await log.appendMany(["{}", "{}"]);
 * await log.roll();
 * await log.chunks.settled();
 * equal(log.chunks.through, 2);
 * equal(log.chunks.manifest?.chunks.length, 1);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class LogChunks {
  readonly #dir: string;
  readonly #opts: ResolvedOptions;
  readonly #link: () => ChunkLink | null;

  /** The chunks of the log in `dir`, through its link to the worker (null: no chunks). */
  constructor(dir: string, opts: ResolvedOptions, link: () => ChunkLink | null) {
    this.#dir = dir;
    this.#opts = opts;
    this.#link = link;
  }

  /**
   * Last offset a client can read as chunks over HTTP (the local manifest's,
   * or the archive's when replay from it is on); null without chunks.
   */
  get through(): number | null {
    const link = this.#link();
    const m = link?.manifest;
    if (!link || !m) return null;
    const a = this.#opts.replayArchive ? link.archiveState?.through ?? 0 : 0;
    return Math.max(m.through, a);
  }

  /** The chunk manifest, shared, not copied (null when the log keeps no chunks). */
  get manifest(): SharedManifest | null {
    return this.#link()?.manifest ?? null;
  }

  /** The last error the chunk worker reported for this log, if any. */
  get error(): string | null {
    return this.#link()?.error ?? null;
  }

  /**
   * Whether the chunk worker's thread has stopped (an error it did not
   * catch): the log takes rows, but nothing is chunked, archived or dropped
   * by retention until it is opened again.
   */
  get stopped(): boolean {
    return this.#link()?.stopped ?? false;
  }

  /**
   * Resolves once the chunk worker has done everything asked of it so far
   * (chunking, merging, retention; with `maintain`, a maintenance round now)
   * and the log has taken the results in.
   */
  async settled(maintain = false): Promise<void> {
    await this.#link()?.settled(maintain);
  }

  /**
   * The retention in force (see `ChunkPolicy`): bytes of chunks kept at
   * most and the age past which they go, ms; null for no bound (and both
   * null when the log keeps no chunks).
   */
  get retention(): { bytes: number | null; ageMs: number | null } {
    const p = this.#opts.chunks;
    return { bytes: p?.retainBytes ?? null, ageMs: p?.retainAgeMs ?? null };
  }

  /** Rows retention dropped since the log was opened. */
  get droppedRows(): number {
    return this.#link()?.retainedRows ?? 0;
  }

  /** Bytes of the chunks the manifest lists (0 without chunks). */
  get bytes(): number {
    let n = 0;
    for (const c of this.#link()?.manifest?.chunks ?? []) n += c.bytes;
    return n;
  }

  /** Changes the chunk policy: merges and retention (next maintenance), `archiveTerm` (at once). */
  setRetention(policy: Partial<ChunkPolicy>): void {
    const link = this.#link();
    if (!link?.running || !this.#opts.chunks) {
      throw new TypeError(`log ${this.#dir} keeps no chunks`);
    }
    this.#opts.chunks = link.setPolicy(policy);
  }
}

/** A log's archive: its chunks, producer journal and manifest in S3 (`ArchiveOptions`). */
export class LogArchive {
  readonly #opts: ResolvedOptions;
  readonly #link: () => ChunkLink | null;

  /** The archive of a log, through its link to the chunk worker (null: no chunks). */
  constructor(opts: ResolvedOptions, link: () => ChunkLink | null) {
    this.#opts = opts;
    this.#link = link;
  }

  /** How far the archive has got (null without an archive, or before its first report). */
  get state(): ArchiveState | null {
    const a = this.#link()?.archiveState;
    return a ? structuredClone(a) : null;
  }

  /** The archive's URI, or null. */
  get uri(): string | null {
    return this.#opts.chunks?.archive?.uri ?? null;
  }

  /**
   * Resolves once the archive holds everything chunked so far (or after
   * `ms`); `false` if it timed out.
   */
  async settled(ms = 30_000): Promise<boolean> {
    const link = this.#link();
    return link ? await link.archiveSettled(ms) : true;
  }
}
