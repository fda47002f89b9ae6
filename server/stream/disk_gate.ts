/**
 * Whether a durable stream takes rows, as its disk allows: it stops when a
 * write of its log fails for lack of space (ENOSPC, EDQUOT) or when the
 * free space of its disk falls under a floor (looked at before a commit, at
 * most once a second), and takes rows again by itself once the space is
 * back (looked at every second meanwhile). Reads never pass through here:
 * subscribers keep every row already committed.
 *
 * Invariants:
 * - the gate closes synchronously when the log reports a failed write
 *   (before the rejections of the appends it dropped are seen), so no row
 *   sent after a failure can be stored before the rows the failure dropped
 *   are sent again: an input that resends them keeps its order;
 * - while closed, {@linkcode DiskGate.admit} throws {@linkcode DiskFullError}
 *   and nothing is appended.
 *
 * @module
 */

import { freeBytes } from "../../common/free_space.ts";

/** Default free space under which a stream stops taking rows: 64 MiB. */
export const DEFAULT_MIN_FREE_BYTES: number = 64 << 20;
/** How often the free space is looked at, at most, and how often a stopped stream tries again, ms. */
export const DISK_CHECK_MS = 1000;
/**
 * Free space a stream stopped by a failed write waits for when no floor is
 * set (`minFreeBytes` 0): 1 MiB, so that it does not fail again at once.
 */
const RESUME_FLOOR_BYTES = 1 << 20;

/**
 * A stream takes no rows because its disk is full (nothing of them was
 * stored): answered `507 disk_full` over HTTP, `disk_full` on a publish
 * socket.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { DiskFullError } from "./disk_gate.ts";
 * const err = new DiskFullError("t", "12 bytes free, under the 64 MiB kept free");
 * equal(err.name, "DiskFullError");
 * equal(err.detail, "12 bytes free, under the 64 MiB kept free");
 * ```
 */
export class DiskFullError extends Error {
  /** Why, without the stream's name. */
  readonly detail: string;
  /** The refusal of stream `stream`'s rows, for `detail`. */
  constructor(stream: string, detail: string) {
    super(`stream "${stream}" takes no rows: its disk is full (${detail})`);
    this.name = "DiskFullError";
    this.detail = detail;
  }
}

/** Options of a {@linkcode DiskGate}. */
export interface DiskGateOptions {
  /** Free space under which the stream stops taking rows (0: only a failed write stops it). @default 64 MiB */
  minFreeBytes?: number;
  /** Bytes free on the disk of a path, null when unknown. @default `freeBytes` (common/free_space.ts) */
  free?: (path: string) => Promise<number | null>;
  /** Told each time the stream stops (`detail`) or takes rows again (null). */
  onChange?: (detail: string | null) => void;
}

function shownBytes(n: number): string {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(1)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  return `${n} bytes`;
}

/**
 * The disk gate of the stream `name` whose log is in `dir`.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { DiskFullError, DiskGate } from "./disk_gate.ts";
 * let free = 10;
 * const gate = new DiskGate("t", "/data/t", { minFreeBytes: 100, free: () => Promise.resolve(free) });
 * gate.admit(); // the first look starts now, in the background
 * await gate.looked();
 * equal(gate.full, "10 bytes free on the disk of /data/t, under the 100 bytes kept free");
 * throws(() => gate.admit(), DiskFullError);
 * free = 1 << 30;
 * await gate.ready();
 * equal(gate.full, null);
 * await gate.close();
 * ```
 */
export class DiskGate {
  readonly #name: string;
  readonly #dir: string;
  readonly #minFree: number;
  readonly #free: (path: string) => Promise<number | null>;
  readonly #onChange: (detail: string | null) => void;
  #full: string | null = null;
  #lastLookMs = -Infinity;
  #looking: Promise<void> | null = null;
  #timer: ReturnType<typeof setInterval> | undefined;
  #waiters: (() => void)[] = [];
  #closed = false;

  /** A gate for stream `name`, whose log is in `dir`. */
  constructor(name: string, dir: string, options: DiskGateOptions = {}) {
    const min = options.minFreeBytes ?? DEFAULT_MIN_FREE_BYTES;
    if (!Number.isSafeInteger(min) || min < 0) {
      throw new RangeError(`minFreeBytes must be an integer >= 0, got ${min}`);
    }
    this.#name = name;
    this.#dir = dir;
    this.#minFree = min;
    this.#free = options.free ?? freeBytes;
    this.#onChange = options.onChange ?? (() => {});
  }

  /** Why the stream takes no rows now, or null while it takes them. */
  get full(): string | null {
    return this.#full;
  }

  /** The free space under which the stream stops taking rows (0: none). */
  get minFreeBytes(): number {
    return this.#minFree;
  }

  /**
   * Before rows are appended: throws {@linkcode DiskFullError} while the
   * stream takes no rows; else, at most once a second, starts a look at the
   * free space (its verdict applies to the rows after it).
   */
  admit(): void {
    if (this.#full !== null) throw new DiskFullError(this.#name, this.#full);
    if (this.#minFree === 0 || this.#looking !== null) return;
    const now = performance.now();
    if (now - this.#lastLookMs < DISK_CHECK_MS) return;
    this.#lastLookMs = now;
    this.#looking = this.#look().finally(() => (this.#looking = null));
  }

  /** Resolves once the look at the free space in flight (if any) is done. */
  async looked(): Promise<void> {
    await this.#looking;
  }

  /** A write of the log failed for lack of space (`err`): the stream stops taking rows now. */
  noSpace(err: unknown): void {
    const why = err instanceof Error ? (err.cause instanceof Error ? err.cause : err).message : "";
    this.#stop(`a write to ${this.#dir} failed: ${why || String(err)}`);
  }

  /** Resolves once the stream takes rows (at once if it does), or when the gate is closed. */
  ready(): Promise<void> {
    if (this.#full === null || this.#closed) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /**
   * Stops looking (the stream is closing); whoever waits is let go.
   * Resolves once a look in flight is done.
   */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#wake();
    await this.#looking;
  }

  async #look(): Promise<void> {
    const free = await this.#free(this.#dir).catch(() => null);
    if (free !== null && free < this.#minFree && this.#full === null) {
      this.#stop(
        `${shownBytes(free)} free on the disk of ${this.#dir}, under the ` +
          `${shownBytes(this.#minFree)} kept free`,
      );
    }
  }

  #stop(detail: string): void {
    const was = this.#full;
    this.#full = detail;
    if (was !== null || this.#closed) return;
    this.#onChange(detail);
    // Kept referenced: whoever waits for `ready` (an ingest) waits on it; `close` clears it.
    this.#timer = setInterval(() => void this.#retry(), DISK_CHECK_MS);
  }

  // Every second while stopped: once the space is back (or, when it cannot
  // be known, at each try), the stream takes rows again; a write that
  // fails then stops it again.
  async #retry(): Promise<void> {
    if (this.#full === null || this.#looking !== null) return;
    const look = this.#free(this.#dir).catch(() => null);
    this.#looking = look.then(() => {});
    const free = await look;
    this.#looking = null;
    if (this.#full === null || this.#closed) return;
    if (free !== null && free < Math.max(this.#minFree, RESUME_FLOOR_BYTES)) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#full = null;
    this.#lastLookMs = performance.now();
    this.#onChange(null);
    this.#wake();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }
}
