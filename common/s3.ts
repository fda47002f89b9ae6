/**
 * S3 access shared by the log's archive (`log/chunk/archive.ts`) and the client's
 * archive reader and cursor copies (`client/s3.ts`): `s3://` URIs, the
 * objects of one bucket, and the folder layout of an archived stream:
 *
 * ```text
 * s3://bucket/prefix/NAME/manifest.json               the manifest (written after its chunks)
 * s3://bucket/prefix/NAME/chunks/SHA256.ndjson.zst    a chunk, as stored locally
 * ```
 *
 * The unnamed stream's folder is `_`.
 *
 * The AWS SDK (`@aws-sdk/client-s3`) is loaded on first use, by a dynamic
 * import: a program that never touches S3 never loads it. Credentials and
 * region come from the SDK's standard chain (`AWS_ACCESS_KEY_ID`,
 * `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, profiles); an S3-compatible store is
 * reached with an endpoint and path-style addressing. Nothing here ever
 * prints a credential.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { archiveFolderKey, parseS3Uri } from "./s3.ts";
 * const loc = parseS3Uri("s3://market-data/prod");
 * equal(loc.bucket, "market-data");
 * equal(archiveFolderKey(loc.prefix, "trades"), "prod/trades");
 * ```
 *
 * @module
 */

import type { S3Client } from "@aws-sdk/client-s3";

type S3Sdk = typeof import("@aws-sdk/client-s3");

/**
 * Where an S3 archive (or an object in one) is and how to reach it.
 */
export interface ArchiveOptions {
  /** `s3://bucket/prefix` (the prefix may be empty). */
  uri: string;
  /** Endpoint of an S3-compatible store, e.g. `http://127.0.0.1:9000`. @default AWS_ENDPOINT_URL_S3, else AWS's */
  endpoint?: string;
  /** Path-style addressing (`http://host/bucket/key`), as most S3-compatible stores want. @default false */
  forcePathStyle?: boolean;
  /** Region. @default AWS_REGION, else "us-east-1" */
  region?: string;
  /**
   * How long a request may wait to connect, and then for its next byte,
   * before it fails (and is tried again later), ms. @default DEFAULT_S3_TIMEOUT_MS
   */
  timeoutMs?: number;
}

/**
 * How long an S3 request waits to connect, or for its next byte, before it
 * fails, ms: a store that stopped answering (a blackholed route) fails the
 * upload and it is tried again, instead of holding it for as long as TCP
 * takes to give up (many minutes) while retention waits for it.
 */
export const DEFAULT_S3_TIMEOUT_MS = 60_000;

/**
 * A parsed `s3://` URI.
 */
export interface S3Location {
  /** The bucket. */
  bucket: string;
  /** The key prefix, without a trailing slash ("" for the bucket's root). */
  prefix: string;
}

/**
 * Parses `s3://bucket/prefix`; a `TypeError` names the URI when it is not one.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { parseS3Uri } from "./s3.ts";
 * deepStrictEqual(parseS3Uri("s3://market-data/prod/"), { bucket: "market-data", prefix: "prod" });
 * ```
 */
export function parseS3Uri(uri: string): S3Location {
  const m = typeof uri === "string"
    ? /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(uri)
    : null;
  if (!m) {
    throw new TypeError(
      `archive must be s3://bucket/prefix with a valid bucket name, got ${JSON.stringify(uri)}`,
    );
  }
  return { bucket: m[1], prefix: (m[2] ?? "").replace(/\/+$/, "") };
}

const OPTION_TYPES: Record<keyof ArchiveOptions, string> = {
  uri: "string",
  endpoint: "string",
  forcePathStyle: "boolean",
  region: "string",
  timeoutMs: "number",
};

/**
 * Checks S3 options as a caller passed them: a `TypeError` for an unknown
 * key or a wrong type, naming `where`, the option and what was seen. With
 * `uri: false` the `uri` key is not expected (options of one object whose
 * URI is given apart).
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { checkArchiveOptions } from "./s3.ts";
 * checkArchiveOptions({ uri: "s3://archive/prod", forcePathStyle: true }, "archive");
 * throws(() => checkArchiveOptions({ uri: "s3://archive/prod", pathStyle: true }, "archive"), {
 *   name: "TypeError",
 *   message: "archive: unknown option pathStyle",
 * });
 * ```
 */
export function checkArchiveOptions(value: unknown, where: string, uri = true): void {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(`${where} must be an object, got ${describe(value)}`);
  }
  for (const [key, v] of Object.entries(value)) {
    const type = (OPTION_TYPES as Record<string, string | undefined>)[key];
    if (type === undefined || (key === "uri" && !uri)) {
      throw new TypeError(`${where}: unknown option ${key}`);
    }
    if (v !== undefined && typeof v !== type) {
      throw new TypeError(`${where}.${key} must be a ${type}, got ${describe(v)}`);
    }
  }
  const o = value as ArchiveOptions;
  if (uri) parseS3Uri(o.uri);
  if (o.endpoint !== undefined) {
    try {
      new URL(o.endpoint);
    } catch {
      throw new RangeError(`${where}.endpoint must be a URL, got ${JSON.stringify(o.endpoint)}`);
    }
  }
  if (o.timeoutMs !== undefined && !(Number.isSafeInteger(o.timeoutMs) && o.timeoutMs >= 1)) {
    throw new RangeError(
      `${where}.timeoutMs must be a whole number of ms >= 1, got ${o.timeoutMs}`,
    );
  }
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") return `string ${JSON.stringify(v)}`;
  if (typeof v === "object" || typeof v === "function") return `a ${typeof v}`;
  return `${typeof v} ${String(v)}`;
}

/**
 * The folder of `stream` under `prefix` (the unnamed stream's is `_`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { archiveFolderKey } from "./s3.ts";
 * equal(archiveFolderKey("prod", ""), "prod/_");
 * equal(archiveFolderKey("", "trades"), "trades");
 * ```
 */
export function archiveFolderKey(prefix: string, stream: string): string {
  return [prefix, stream === "" ? "_" : stream].filter(Boolean).join("/");
}

let sdk: Promise<S3Sdk> | null = null;

/** The AWS SDK, loaded on first use. */
function loadSdk(): Promise<S3Sdk> {
  sdk ??= import("@aws-sdk/client-s3");
  return sdk;
}

function env(key: string): string | undefined {
  try {
    return (globalThis as { Deno?: { env: { get(k: string): string | undefined } } }).Deno?.env
      .get(key);
  } catch {
    // No permission to read the environment: the options decide.
    return undefined;
  }
}

/**
 * Makes an S3 client for the options (credentials from the SDK's chain),
 * loading the SDK the first time.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { s3Client } from "./s3.ts";
 * const client = await s3Client({ uri: "s3://archive/prod", region: "eu-west-1" });
 * equal(await client.config.region(), "eu-west-1"); // no request is made until one is sent
 * client.destroy();
 * ```
 */
export async function s3Client(opts: ArchiveOptions): Promise<S3Client> {
  const { S3Client } = await loadSdk();
  return new S3Client({
    region: opts.region ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION") ?? "us-east-1",
    endpoint: opts.endpoint ?? env("AWS_ENDPOINT_URL_S3") ?? undefined,
    forcePathStyle: opts.forcePathStyle ?? false,
    maxAttempts: 2,
    requestHandler: {
      connectionTimeout: opts.timeoutMs ?? DEFAULT_S3_TIMEOUT_MS,
      requestTimeout: opts.timeoutMs ?? DEFAULT_S3_TIMEOUT_MS,
      // Without it, a request past its timeout is only warned about.
      throwOnRequestTimeout: true,
    },
  });
}

/**
 * Describes an S3 failure without anything secret in it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { s3ErrorMessage } from "./s3.ts";
 * const err = Object.assign(new Error("The specified key does not exist."), {
 *   name: "NoSuchKey",
 *   $metadata: { httpStatusCode: 404 },
 * });
 * equal(s3ErrorMessage(err), "NoSuchKey (HTTP 404): The specified key does not exist.");
 * ```
 */
export function s3ErrorMessage(err: unknown): string {
  if (err && typeof err === "object") {
    const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
    const status = e.$metadata?.httpStatusCode;
    return `${e.name ?? "Error"}${status ? ` (HTTP ${status})` : ""}: ${e.message ?? ""}`.trim();
  }
  return String(err);
}

/**
 * Whether an S3 failure means "no such object".
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { isS3NotFound } from "./s3.ts";
 * equal(isS3NotFound({ name: "NoSuchKey" }), true);
 * equal(isS3NotFound(new Error("timeout")), false);
 * ```
 */
export function isS3NotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null;
  return e?.name === "NoSuchKey" || e?.name === "NotFound" || e?.$metadata?.httpStatusCode === 404;
}

/**
 * Whether an S3 failure means a conditional write found its condition
 * false (412: with `ifNoneMatch`, the object exists).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { isS3PreconditionFailed } from "./s3.ts";
 * equal(isS3PreconditionFailed({ $metadata: { httpStatusCode: 412 } }), true);
 * equal(isS3PreconditionFailed({ $metadata: { httpStatusCode: 404 } }), false);
 * ```
 */
export function isS3PreconditionFailed(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null;
  return e?.name === "PreconditionFailed" || e?.$metadata?.httpStatusCode === 412;
}

/**
 * How an object is stored.
 */
export interface PutObjectOptions {
  /** The `Content-Type`. @default "application/octet-stream" */
  contentType?: string;
  /** The `Cache-Control`. @default none */
  cacheControl?: string;
  /**
   * Write only if no object has the key (`If-None-Match: *`): S3 answers
   * 412 when one has, which {@linkcode isS3PreconditionFailed} tells. A
   * store without conditional writes ignores it. @default false
   */
  ifNoneMatch?: boolean;
}

/**
 * The objects of one bucket, over one S3 client made on first use.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { S3Bucket } from "./s3.ts";
 * const bucket = new S3Bucket({ uri: "s3://streamcast/consumer1" });
 * equal(bucket.bucket, "streamcast");
 * // Requests need a reachable bucket, so this part is type-checked but not run.
 * async function roundTrip(): Promise<string | null> {
 *   await bucket.put("consumer1/trades.cursor", new TextEncoder().encode("{}\n"));
 *   return await bucket.getText("consumer1/trades.cursor"); // "{}\n"
 * }
 * bucket.close();
 * ```
 */
export class S3Bucket {
  /** The bucket. */
  readonly bucket: string;
  readonly #opts: ArchiveOptions;
  #client: Promise<S3Client> | null = null;

  /** The bucket of `opts.uri`; no request is made until one is asked for. */
  constructor(opts: ArchiveOptions) {
    this.bucket = parseS3Uri(opts.uri).bucket;
    this.#opts = opts;
  }

  #s3(): Promise<S3Client> {
    return (this.#client ??= s3Client(this.#opts));
  }

  /** The object's text, or `null` when there is none. */
  async getText(key: string): Promise<string | null> {
    const [s3, { GetObjectCommand }] = [await this.#s3(), await loadSdk()];
    try {
      const res = await s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return await res.Body!.transformToString();
    } catch (err) {
      if (isS3NotFound(err)) return null;
      throw err;
    }
  }

  /** The object's bytes (throws when missing). */
  async getBytes(key: string): Promise<Uint8Array> {
    const [s3, { GetObjectCommand }] = [await this.#s3(), await loadSdk()];
    const res = await s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
    return await res.Body!.transformToByteArray();
  }

  /** The object's bytes as a stream (throws when missing). */
  async getStream(key: string): Promise<ReadableStream<Uint8Array>> {
    const [s3, { GetObjectCommand }] = [await this.#s3(), await loadSdk()];
    const res = await s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
    return res.Body!.transformToWebStream() as ReadableStream<Uint8Array>;
  }

  /** Writes the object (one PUT: atomic in S3). */
  async put(key: string, body: Uint8Array, options: PutObjectOptions = {}): Promise<void> {
    const [s3, { PutObjectCommand }] = [await this.#s3(), await loadSdk()];
    await s3.send(
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: key,
        Body: body,
        ContentType: options.contentType ?? "application/octet-stream",
        CacheControl: options.cacheControl,
        ...(options.ifNoneMatch ? { IfNoneMatch: "*" } : {}),
      }),
    );
  }

  /** Deletes the object. */
  async delete(key: string): Promise<void> {
    const [s3, { DeleteObjectCommand }] = [await this.#s3(), await loadSdk()];
    await s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  /** The keys of every object under `prefix`. */
  async list(prefix: string): Promise<string[]> {
    const [s3, { ListObjectsV2Command }] = [await this.#s3(), await loadSdk()];
    const out: string[] = [];
    let token: string | undefined;
    do {
      const res = await s3.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      for (const o of res.Contents ?? []) if (o.Key) out.push(o.Key);
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (token);
    return out;
  }

  /** Releases the client (once it is made, if a request is still making it). */
  close(): void {
    const client = this.#client;
    this.#client = null;
    // A client that failed to be made has nothing to release.
    client?.then((c) => c.destroy(), () => {});
  }
}

/**
 * One stream's folder in an archive: its chunks and its manifest, as stored
 * (the manifest as unchecked JSON: its checks belong to who reads it).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArchiveFolder } from "./s3.ts";
 * const folder = new ArchiveFolder({ uri: "s3://market-data/prod" }, "trades");
 * equal(folder.manifestKey, "prod/trades/manifest.json");
 * equal(folder.chunkKey("ab"), "prod/trades/chunks/ab.ndjson.zst");
 * // Requests need a reachable bucket, so this part is type-checked but not run.
 * async function archivedChunks(): Promise<number> {
 *   return (await folder.listChunks()).size;
 * }
 * folder.close();
 * ```
 */
export class ArchiveFolder {
  /** The bucket. */
  readonly bucket: string;
  /** `prefix/NAME` (no trailing slash). */
  readonly base: string;
  /** The archive URI as given (safe to show: it holds no credentials). */
  readonly uri: string;
  readonly #objects: S3Bucket;

  /** The archive folder of `stream` in `opts.uri`. */
  constructor(opts: ArchiveOptions, stream: string) {
    const loc = parseS3Uri(opts.uri);
    this.uri = opts.uri;
    this.bucket = loc.bucket;
    this.base = archiveFolderKey(loc.prefix, stream);
    this.#objects = new S3Bucket(opts);
  }

  /** Key of a chunk. */
  chunkKey(sha256: string): string {
    return `${this.base}/chunks/${sha256}.ndjson.zst`;
  }

  /** Key of the manifest. */
  get manifestKey(): string {
    return `${this.base}/manifest.json`;
  }

  /** The archived manifest as parsed JSON, or `null` when there is none. */
  async getManifestJson(): Promise<unknown> {
    const text = await this.#objects.getText(this.manifestKey);
    if (text === null) return null;
    try {
      return JSON.parse(text);
    } catch {
      throw new TypeError(
        `archive manifest ${this.uri}: not JSON: ${JSON.stringify(text.slice(0, 80))}`,
      );
    }
  }

  /** Writes the manifest (after the chunks it lists). */
  async putManifestJson(manifest: unknown): Promise<void> {
    await this.#objects.put(
      this.manifestKey,
      new TextEncoder().encode(JSON.stringify(manifest) + "\n"),
      { contentType: "application/json" },
    );
  }

  /**
   * Key of another file of the stream's folder (e.g. `producers.log`, the
   * producer journal archived beside the manifest).
   */
  fileKey(name: string): string {
    return `${this.base}/${name}`;
  }

  /** Uploads another file of the folder (see {@linkcode ArchiveFolder.fileKey}). */
  async putFile(name: string, bytes: Uint8Array): Promise<void> {
    await this.#objects.put(this.fileKey(name), bytes, { contentType: "application/octet-stream" });
  }

  /** Another file of the folder, or null when there is none. */
  async getFile(name: string): Promise<Uint8Array | null> {
    try {
      return await this.#objects.getBytes(this.fileKey(name));
    } catch (err) {
      if (isS3NotFound(err)) return null;
      throw err;
    }
  }

  /** Uploads a chunk's bytes. */
  async putChunk(sha256: string, bytes: Uint8Array): Promise<void> {
    await this.#objects.put(this.chunkKey(sha256), bytes, {
      contentType: "application/zstd",
      cacheControl: "public, max-age=31536000, immutable",
    });
  }

  /** The chunk's bytes as a stream (throws when missing). */
  getChunk(sha256: string): Promise<ReadableStream<Uint8Array>> {
    return this.#objects.getStream(this.chunkKey(sha256));
  }

  /** The chunk's bytes (throws when missing). */
  getChunkBytes(sha256: string): Promise<Uint8Array> {
    return this.#objects.getBytes(this.chunkKey(sha256));
  }

  /** Deletes a chunk. */
  deleteChunk(sha256: string): Promise<void> {
    return this.#objects.delete(this.chunkKey(sha256));
  }

  /** The SHA-256 of every chunk stored. */
  async listChunks(): Promise<Set<string>> {
    const out = new Set<string>();
    for (const key of await this.#objects.list(`${this.base}/chunks/`)) {
      const sha = /([0-9a-f]{64})\.ndjson\.zst$/.exec(key)?.[1];
      if (sha) out.add(sha);
    }
    return out;
  }

  /** Releases the client. */
  close(): void {
    this.#objects.close();
  }
}
