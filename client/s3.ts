/**
 * The client's uses of S3 (Deno only: it needs the AWS SDK): reading archived
 * chunks during a catch-up, and keeping a copy of a cursor in object storage
 * so that a consumer whose machine is lost can resume elsewhere.
 *
 * Credentials and region come from the AWS SDK's standard chain.
 *
 * @example
 * ```ts ignore
 * import { connect } from "./mod.ts";
 * import { FileCursor } from "./file_cursor.ts";
 * import { BackedUpCursor, S3ChunkSource, S3Cursor } from "./s3.ts";
 * const sub = await connect("ws://127.0.0.1:8765/trades", {
 *   cursor: new BackedUpCursor(new FileCursor(".trades.cursor"),
 *     new S3Cursor("s3://streamcast/consumer1/trades.cursor")),
 *   catchUp: { archive: new S3ChunkSource({ uri: "s3://market-data/prod" }, "trades") },
 * });
 * ```
 *
 * @module
 */

import { GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { type ArchiveOptions, ArchiveStore, parseS3Uri, s3Client } from "../log/archive.ts";
import type { ChunkSource, ManifestInfo } from "./catch_up.ts";
import { checkCursor, type Cursor, type CursorStore } from "./cursor.ts";

/**
 * Archived chunks of one stream, for `connect(url, { catchUp: { archive } })`.
 *
 * @example
 * ```ts ignore
 * import { S3ChunkSource } from "./s3.ts";
 * const archive = new S3ChunkSource({ uri: "s3://market-data/prod" }, "trades");
 * console.log(archive.name); // s3://market-data/prod
 * ```
 */
export class S3ChunkSource implements ChunkSource {
  readonly #store: ArchiveStore;
  /** The archive URI. */
  readonly name: string;

  /** The archived chunks of `stream` under `archive`. */
  constructor(archive: ArchiveOptions, stream: string) {
    this.#store = new ArchiveStore(archive, stream);
    this.name = archive.uri;
  }

  /** The archived manifest. */
  manifest(): Promise<ManifestInfo | null> {
    return this.#store.getManifest();
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
 * ```ts ignore
 * import { S3Cursor } from "./s3.ts";
 * const c = new S3Cursor("s3://streamcast/consumer1/trades.cursor");
 * await c.save({ offset: 1862, streamId: null });
 * ```
 */
export class S3Cursor implements CursorStore {
  /** The cursor's URI. */
  readonly uri: string;
  readonly #bucket: string;
  readonly #key: string;
  readonly #opts: Omit<ArchiveOptions, "uri">;
  #client: ReturnType<typeof s3Client> | null = null;

  /** A cursor at `uri` (`s3://bucket/key`); endpoint and path style as for archives. */
  constructor(uri: string, options: Omit<ArchiveOptions, "uri"> = {}) {
    const loc = parseS3Uri(uri);
    if (!loc.prefix) throw new TypeError(`a cursor URI needs a key: s3://bucket/key, got ${uri}`);
    this.uri = uri;
    this.#bucket = loc.bucket;
    this.#key = loc.prefix;
    this.#opts = options;
  }

  #s3() {
    return (this.#client ??= s3Client({ uri: this.uri, ...this.#opts }));
  }

  /** The saved cursor, or `null` when none was saved. */
  async load(): Promise<Cursor | null> {
    let text: string;
    try {
      const res = await this.#s3().send(
        new GetObjectCommand({ Bucket: this.#bucket, Key: this.#key }),
      );
      text = await res.Body!.transformToString();
    } catch (err) {
      const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
      if (e?.name === "NoSuchKey" || e?.$metadata?.httpStatusCode === 404) return null;
      throw err;
    }
    const v = JSON.parse(text);
    return checkCursor({ offset: v?.offset, streamId: v?.stream_id ?? null }, `cursor ${this.uri}`);
  }

  /** Saves the cursor (one PUT: atomic in S3). */
  async save(cursor: Cursor): Promise<void> {
    const c = checkCursor(cursor, `S3Cursor.save(${this.uri})`);
    await this.#s3().send(
      new PutObjectCommand({
        Bucket: this.#bucket,
        Key: this.#key,
        Body: new TextEncoder().encode(
          JSON.stringify({ offset: c.offset, stream_id: c.streamId }) + "\n",
        ),
        ContentType: "application/json",
      }),
    );
  }

  /** Releases the S3 client. */
  close(): void {
    this.#client?.destroy();
    this.#client = null;
  }
}

/**
 * A local cursor with a remote copy: `load` reads the local one and falls
 * back to the remote only when there is none (a new machine); `save` writes
 * the local one every time and ships it to the remote at most every
 * `uploadEveryMs` (in the background; `flush()` ships it now). A remote
 * failure is reported to `onError` and never stops the consumer.
 *
 * @example
 * ```ts ignore
 * import { FileCursor } from "./file_cursor.ts";
 * import { BackedUpCursor, S3Cursor } from "./s3.ts";
 * const cursor = new BackedUpCursor(new FileCursor(".c"), new S3Cursor("s3://b/c"), { uploadEveryMs: 5000 });
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

  /** Pairs a local store with a remote copy. */
  constructor(
    local: CursorStore,
    remote: CursorStore,
    options: { uploadEveryMs?: number; onError?: (err: unknown) => void } = {},
  ) {
    this.#local = local;
    this.#remote = remote;
    this.#every = options.uploadEveryMs ?? 10_000;
    this.#onError = options.onError ??
      ((e) => console.error(`streamcast: cursor upload failed: ${e}`));
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
