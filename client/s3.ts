/**
 * The client's uses of S3 (Deno only: it needs the AWS SDK): reading archived
 * chunks during a catch-up, and keeping a copy of a cursor in object storage
 * so that a consumer whose machine is lost can resume elsewhere.
 *
 * Credentials and region come from the AWS SDK's standard chain.
 *
 * @example
 * ```ts
 * import { connect, type Subscription } from "./mod.ts";
 * import { FileCursor } from "./file_cursor.ts";
 * import { BackedUpCursor, S3ChunkSource, S3Cursor } from "./s3.ts";
 * // Needs a server and a reachable bucket, so this example is type-checked but not run.
 * function consume(url: string): Promise<Subscription> {
 *   return connect(url, {
 *     cursor: new BackedUpCursor(
 *       new FileCursor(".trades.cursor"),
 *       new S3Cursor("s3://streamcast/consumer1/trades.cursor"), // used on a new machine
 *     ),
 *     catchUp: { archive: new S3ChunkSource({ uri: "s3://market-data/prod" }, "trades") },
 *   });
 * }
 * ```
 *
 * @module
 */

import {
  ArchiveFolder,
  type ArchiveOptions,
  checkArchiveOptions,
  parseS3Uri,
  S3Bucket,
} from "../common/s3.ts";
import { Logger } from "../common/logger.ts";
import type { ChunkSource, ManifestInfo } from "./catch_up.ts";
import { checkCursor, checkCursorStore, type Cursor, type CursorStore } from "./cursor.ts";

export type { ArchiveOptions } from "../common/s3.ts";

/**
 * Archived chunks of one stream, for `connect(url, { catchUp: { archive } })`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { S3ChunkSource } from "./s3.ts";
 * const archive = new S3ChunkSource({ uri: "s3://market-data/prod" }, "trades");
 * equal(archive.name, "s3://market-data/prod"); // no request is made until one is needed
 * archive.close();
 * ```
 */
export class S3ChunkSource implements ChunkSource {
  readonly #store: ArchiveFolder;
  /** The archive URI. */
  readonly name: string;

  /**
   * The archived chunks of `stream` under `archive`. A wrong option is a
   * `TypeError` (a wrong shape) or a `RangeError` (a bad endpoint) here.
   */
  constructor(archive: ArchiveOptions, stream: string) {
    checkArchiveOptions(archive, "S3ChunkSource archive");
    if (typeof stream !== "string") {
      throw new TypeError(`S3ChunkSource stream must be a string, got ${typeof stream}`);
    }
    this.#store = new ArchiveFolder(archive, stream);
    this.name = archive.uri;
  }

  /** The archived manifest (its shape checked). */
  async manifest(): Promise<ManifestInfo | null> {
    const m = await this.#store.getManifestJson();
    if (m === null) return null;
    const problem = manifestProblem(m);
    if (problem) throw new TypeError(`archive manifest ${this.name}: ${problem}`);
    return m as ManifestInfo;
  }

  /** A chunk's bytes. */
  chunk(sha256: string): Promise<Uint8Array> {
    return this.#store.getChunkBytes(sha256);
  }

  /** Releases the S3 client. */
  close(): void {
    this.#store.close();
  }
}

/**
 * A cursor kept as one small JSON object in S3 (`s3://bucket/key`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { S3Cursor } from "./s3.ts";
 * const c = new S3Cursor("s3://streamcast/consumer1/trades.cursor");
 * equal(c.uri, "s3://streamcast/consumer1/trades.cursor");
 * // Requests need a reachable bucket, so this part is type-checked but not run.
 * async function roundTrip(): Promise<number | undefined> {
 *   await c.save({ offset: 1862, streamId: null });
 *   return (await c.load())?.offset; // 1862
 * }
 * c.close();
 * ```
 */
export class S3Cursor implements CursorStore {
  /** The cursor's URI. */
  readonly uri: string;
  readonly #key: string;
  readonly #objects: S3Bucket;

  /**
   * A cursor at `uri` (`s3://bucket/key`); endpoint and path style as for
   * archives. A wrong option is a `TypeError` (a wrong shape) or a
   * `RangeError` (a bad endpoint) here.
   */
  constructor(uri: string, options: Omit<ArchiveOptions, "uri"> = {}) {
    checkArchiveOptions(options, "S3Cursor options", false);
    const loc = parseS3Uri(uri);
    if (!loc.prefix) throw new TypeError(`a cursor URI needs a key: s3://bucket/key, got ${uri}`);
    this.uri = uri;
    this.#key = loc.prefix;
    this.#objects = new S3Bucket({ ...options, uri });
  }

  /** The saved cursor, or `null` when none was saved. */
  async load(): Promise<Cursor | null> {
    const text = await this.#objects.getText(this.#key);
    if (text === null) return null;
    const v = JSON.parse(text);
    return checkCursor({ offset: v?.offset, streamId: v?.stream_id ?? null }, `cursor ${this.uri}`);
  }

  /** Saves the cursor (one PUT: atomic in S3). */
  async save(cursor: Cursor): Promise<void> {
    const c = checkCursor(cursor, `S3Cursor.save(${this.uri})`);
    await this.#objects.put(
      this.#key,
      new TextEncoder().encode(JSON.stringify({ offset: c.offset, stream_id: c.streamId }) + "\n"),
      { contentType: "application/json" },
    );
  }

  /** Releases the S3 client. */
  close(): void {
    this.#objects.close();
  }
}

/**
 * Options of {@linkcode BackedUpCursor}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { MemoryCursor } from "./cursor.ts";
 * import { BackedUpCursor, type BackedUpCursorOptions } from "./s3.ts";
 * const failures: unknown[] = [];
 * const options: BackedUpCursorOptions = {
 *   uploadEveryMs: 5_000,
 *   onError: (err) => failures.push(err),
 * };
 * const failing = { load: async () => null, save: () => Promise.reject(new Error("503")) };
 * const cursor = new BackedUpCursor(new MemoryCursor(), failing, options);
 * await cursor.save({ offset: 1, streamId: null });
 * await cursor.close(); // the copy fails: onError is told, and the consumer goes on
 * equal(failures.length, 1);
 * ```
 */
export interface BackedUpCursorOptions {
  /** Ship the latest cursor to the remote at most this long after a save. @default 10000 */
  uploadEveryMs?: number;
  /**
   * Told when shipping the cursor to the remote fails (the consumer goes on;
   * the next save tries again).
   * @default a warn event `cursor_upload_failed` through `common/logger.ts`'s Logger (stderr)
   */
  onError?: (err: unknown) => void;
}

const BACKED_UP_OPTIONS = new Set(["uploadEveryMs", "onError"]);

/** The default {@linkcode BackedUpCursorOptions.onError}: a warning on stderr. */
function warnUploadFailed(err: unknown): void {
  new Logger({ level: "warn" }).warn(
    "cursor_upload_failed",
    { error: err instanceof Error ? err : String(err) },
    `streamcast: cursor upload failed: ${err}`,
  );
}

/**
 * A local cursor with a remote copy: `load` reads the local one and falls
 * back to the remote only when there is none (a new machine); `save` writes
 * the local one every time and ships it to the remote at most every
 * `uploadEveryMs` (in the background; `flush()` ships it now). A remote
 * failure is reported to `onError` and never stops the consumer.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { MemoryCursor } from "./cursor.ts";
 * import { BackedUpCursor } from "./s3.ts";
 * // In use the remote is an S3Cursor; any CursorStore will do.
 * const local = new MemoryCursor();
 * const remote = new MemoryCursor();
 * const cursor = new BackedUpCursor(local, remote, { uploadEveryMs: 5_000 });
 * await cursor.save({ offset: 42, streamId: null });
 * equal(local.value?.offset, 42);
 * equal(remote.saves, 0); // shipped within uploadEveryMs, or now by flush() or close()
 * await cursor.close();
 * equal(remote.value?.offset, 42);
 * ```
 */
export class BackedUpCursor implements CursorStore {
  readonly #local: CursorStore;
  readonly #remote: CursorStore;
  readonly #every: number;
  readonly #onError: (err: unknown) => void;
  #latest: Cursor | null = null;
  #shipped: Cursor | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #shipping: Promise<void> = Promise.resolve();

  /**
   * Pairs a local store with a remote copy. A wrong argument is a
   * `TypeError` (a wrong shape) or a `RangeError` (a value out of range) here.
   */
  constructor(local: CursorStore, remote: CursorStore, options: BackedUpCursorOptions = {}) {
    checkCursorStore(local, "BackedUpCursor local");
    checkCursorStore(remote, "BackedUpCursor remote");
    if (options === null || typeof options !== "object") {
      throw new TypeError(`BackedUpCursor options must be an object, got ${typeof options}`);
    }
    for (const key of Object.keys(options)) {
      if (!BACKED_UP_OPTIONS.has(key)) {
        throw new TypeError(`BackedUpCursor: unknown option ${key}`);
      }
    }
    const { uploadEveryMs, onError } = options;
    if (uploadEveryMs !== undefined && typeof uploadEveryMs !== "number") {
      throw new TypeError(
        `BackedUpCursor uploadEveryMs must be a number, got ${typeof uploadEveryMs}`,
      );
    }
    if (uploadEveryMs !== undefined && !(Number.isFinite(uploadEveryMs) && uploadEveryMs >= 0)) {
      throw new RangeError(
        `BackedUpCursor uploadEveryMs must be a number >= 0, got ${uploadEveryMs}`,
      );
    }
    if (onError !== undefined && typeof onError !== "function") {
      throw new TypeError(`BackedUpCursor onError must be a function, got ${typeof onError}`);
    }
    this.#local = local;
    this.#remote = remote;
    this.#every = uploadEveryMs ?? 10_000;
    this.#onError = onError ?? warnUploadFailed;
  }
  /** The local cursor, else the remote one. */
  async load(): Promise<Cursor | null> {
    return (await this.#local.load()) ?? (await this.#remote.load());
  }

  /** Saves locally now; ships to the remote within `uploadEveryMs`. */
  async save(cursor: Cursor): Promise<void> {
    await this.#local.save(cursor);
    this.#latest = cursor;
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        void this.flush();
      }, this.#every);
    }
  }

  /** Ships the latest cursor to the remote now (and waits for it). */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#shipping = this.#shipping.then(async () => {
      const c = this.#latest;
      if (!c || (this.#shipped && this.#shipped.offset === c.offset)) return;
      try {
        await this.#remote.save(c);
        this.#shipped = c;
      } catch (err) {
        this.#onError(err);
      }
    });
    return this.#shipping;
  }

  /** Ships the latest cursor and stops the timer. */
  async close(): Promise<void> {
    await this.flush();
  }
}

/** What is wrong with an archived manifest's shape, or `null`. */
function manifestProblem(m: unknown): string | null {
  const x = m as Partial<ManifestInfo> | null;
  if (!x || typeof x !== "object") return "not an object";
  if (typeof x.stream_id !== "string") return "stream_id is not a string";
  if (!Number.isSafeInteger(x.through)) return "through is not an integer";
  if (!Array.isArray(x.chunks)) return "chunks is not an array";
  for (const c of x.chunks) {
    if (
      !c || typeof c !== "object" || !Number.isSafeInteger(c.first) ||
      !Number.isSafeInteger(c.last) || typeof c.sha256 !== "string"
    ) {
      return `a chunk entry is not {first, last, sha256}: ${JSON.stringify(c).slice(0, 80)}`;
    }
  }
  return null;
}
