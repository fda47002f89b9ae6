/**
 * A table in an S3 bucket (`s3://` locations), through the project's S3
 * access (`common/s3.ts`: credentials from the SDK's chain, endpoint and
 * path style from the archive options).
 *
 * One PUT is atomic, so `write` never shows a torn file. `create` (the
 * commit of a table version) asks first whether the name exists and then
 * PUTs with `If-None-Match: *`: S3 itself refuses the PUT when another
 * writer got there between the two (412), so on S3 and stores with
 * conditional writes two writers never both commit version N+1. A store
 * without them (s3rver, which the tests use, ignores the header) leaves a
 * window between the question and the PUT: there the table relies on having
 * a single writer, which streamcast keeps — only the stream's writer
 * commits, and two writers of one log are refused on one host by its lock
 * (a cluster's leader term is the guard across hosts; see docs/SPEC.md).
 *
 * @module
 */

import {
  archiveFolderKey,
  type ArchiveOptions,
  isS3NotFound,
  isS3PreconditionFailed,
  parseS3Uri,
  S3Bucket,
} from "../common/s3.ts";
import type { TableStore } from "./table_store.ts";

/**
 * The table folder of `stream` in an archive: `prefix/NAME/iceberg`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { s3TableKey } from "./s3_table_store.ts";
 * equal(s3TableKey("s3://market-data/prod", "trades"), "prod/trades/iceberg");
 * equal(s3TableKey("s3://market-data", ""), "_/iceberg");
 * ```
 */
export function s3TableKey(uri: string, stream: string): string {
  return `${archiveFolderKey(parseS3Uri(uri).prefix, stream)}/iceberg`;
}

/**
 * The table of `stream` in the archive `opts.uri`, at `s3://bucket/prefix/NAME/iceberg`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { S3TableStore } from "./s3_table_store.ts";
 * const store = new S3TableStore({ uri: "s3://market-data/prod" }, "trades");
 * equal(store.location, "s3://market-data/prod/trades/iceberg");
 * // store.read("metadata/version-hint.text") reads the hint from the bucket.
 * store.close();
 * ```
 */
export class S3TableStore implements TableStore {
  /** `s3://bucket/prefix/NAME/iceberg`. */
  readonly location: string;
  readonly #bucket: S3Bucket;
  readonly #base: string;

  /** The table of `stream` in the archive `opts`. */
  constructor(opts: ArchiveOptions, stream: string) {
    this.#bucket = new S3Bucket(opts);
    this.#base = s3TableKey(opts.uri, stream);
    this.location = `s3://${this.#bucket.bucket}/${this.#base}`;
  }

  #key(path: string): string {
    return `${this.#base}/${path}`;
  }

  async read(path: string): Promise<Uint8Array | null> {
    try {
      return await this.#bucket.getBytes(this.#key(path));
    } catch (err) {
      if (isS3NotFound(err)) return null;
      throw err;
    }
  }

  async write(path: string, bytes: Uint8Array): Promise<void> {
    await this.#bucket.put(this.#key(path), bytes, { contentType: contentType(path) });
  }

  async create(path: string, bytes: Uint8Array): Promise<boolean> {
    if ((await this.read(path)) !== null) return false;
    try {
      await this.#bucket.put(this.#key(path), bytes, {
        contentType: contentType(path),
        ifNoneMatch: true,
      });
    } catch (err) {
      if (isS3PreconditionFailed(err)) return false;
      throw err;
    }
    return true;
  }

  async remove(path: string): Promise<void> {
    await this.#bucket.delete(this.#key(path));
  }

  close(): void {
    this.#bucket.close();
  }
}

function contentType(path: string): string {
  if (path.endsWith(".json")) return "application/json";
  if (path.endsWith(".text")) return "text/plain";
  return "application/octet-stream";
}
