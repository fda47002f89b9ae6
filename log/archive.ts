/**
 * The S3 archive of a log's chunks: `s3://bucket/prefix` holds, per stream,
 * `prefix/NAME/chunks/SHA256.ndjson.zst` (the chunk bytes as stored locally)
 * and `prefix/NAME/manifest.json` (written after the chunks it lists). The
 * unnamed stream's folder is `_`.
 *
 * Credentials and region come from the AWS SDK's standard chain
 * (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, profiles); an
 * S3-compatible store is reached with an endpoint and path-style addressing.
 * Nothing here ever prints a credential.
 *
 * @module
 */

import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import { checkManifest, type Manifest } from "./chunk.ts";

/** Where an archive is and how to reach it. */
export interface ArchiveOptions {
  /** `s3://bucket/prefix` (the prefix may be empty). */
  uri: string;
  /** Endpoint of an S3-compatible store, e.g. `http://127.0.0.1:9000` (or `AWS_ENDPOINT_URL_S3`). */
  endpoint?: string;
  /** Path-style addressing (`http://host/bucket/key`), as most S3-compatible stores want. */
  forcePathStyle?: boolean;
  /** Region. @default AWS_REGION, else "us-east-1" */
  region?: string;
}

/** A parsed `s3://` URI. */
export interface S3Location {
  /** The bucket. */
  bucket: string;
  /** The key prefix, without a trailing slash ("" for the bucket's root). */
  prefix: string;
}

/**
 * Parses `s3://bucket/prefix`.
 *
 * @example
 * ```ts
 * import { parseS3Uri } from "./archive.ts";
 * console.log(parseS3Uri("s3://market-data/prod/")); // { bucket: "market-data", prefix: "prod" }
 * ```
 */
export function parseS3Uri(uri: string): S3Location {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(uri);
  if (!m) {
    throw new TypeError(
      `archive must be s3://bucket/prefix with a valid bucket name, got ${JSON.stringify(uri)}`,
    );
  }
  return { bucket: m[1], prefix: (m[2] ?? "").replace(/\/+$/, "") };
}

/** The archive folder name of a stream. */
export function archiveName(stream: string): string {
  return stream === "" ? "_" : stream;
}

/** Makes an S3 client for the options (credentials from the SDK's chain). */
export function s3Client(opts: ArchiveOptions): S3Client {
  const env = (k: string) => {
    try {
      return Deno.env.get(k);
    } catch {
      return undefined;
    }
  };
  return new S3Client({
    region: opts.region ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION") ?? "us-east-1",
    endpoint: opts.endpoint ?? env("AWS_ENDPOINT_URL_S3") ?? undefined,
    forcePathStyle: opts.forcePathStyle ?? false,
    maxAttempts: 2,
  });
}

/** Describes an S3 failure without anything secret in it. */
export function s3ErrorMessage(err: unknown): string {
  if (err && typeof err === "object") {
    const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
    const status = e.$metadata?.httpStatusCode;
    return `${e.name ?? "Error"}${status ? ` (HTTP ${status})` : ""}: ${e.message ?? ""}`.trim();
  }
  return String(err);
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === "NoSuchKey" || e?.name === "NotFound" || e?.$metadata?.httpStatusCode === 404;
}

/** One stream's folder in an archive. */
export class ArchiveStore {
  /** The client. */
  readonly s3: S3Client;
  /** The bucket. */
  readonly bucket: string;
  /** `prefix/NAME` (no trailing slash). */
  readonly base: string;
  /** The archive URI as given (safe to show: it holds no credentials). */
  readonly uri: string;

  /** The archive folder of `stream` in `opts.uri`. */
  constructor(opts: ArchiveOptions, stream: string, client?: S3Client) {
    const loc = parseS3Uri(opts.uri);
    this.uri = opts.uri;
    this.bucket = loc.bucket;
    this.base = [loc.prefix, archiveName(stream)].filter(Boolean).join("/");
    this.s3 = client ?? s3Client(opts);
  }

  /** Key of a chunk. */
  chunkKey(sha256: string): string {
    return `${this.base}/chunks/${sha256}.ndjson.zst`;
  }

  /** Key of the manifest. */
  get manifestKey(): string {
    return `${this.base}/manifest.json`;
  }

  /** The archived manifest, or null when there is none. */
  async getManifest(): Promise<Manifest | null> {
    let text: string;
    try {
      const res = await this.s3.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.manifestKey }),
      );
      text = await res.Body!.transformToString();
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
    const m = JSON.parse(text);
    const problem = checkManifest(m);
    if (problem) throw new Error(`archive manifest ${this.uri}: ${problem}`);
    return m;
  }

  /** Writes the manifest. */
  async putManifest(m: Manifest): Promise<void> {
    await this.s3.send(
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: this.manifestKey,
        Body: new TextEncoder().encode(JSON.stringify(m) + "\n"),
        ContentType: "application/json",
      }),
    );
  }

  /** Uploads a chunk's bytes. */
  async putChunk(sha256: string, bytes: Uint8Array): Promise<void> {
    await this.s3.send(
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: this.chunkKey(sha256),
        Body: bytes,
        ContentType: "application/zstd",
        CacheControl: "public, max-age=31536000, immutable",
      }),
    );
  }

  /** The chunk's bytes as a stream (throws when missing). */
  async getChunk(sha256: string): Promise<ReadableStream<Uint8Array>> {
    const res = await this.s3.send(
      new GetObjectCommand({ Bucket: this.bucket, Key: this.chunkKey(sha256) }),
    );
    return res.Body!.transformToWebStream() as ReadableStream<Uint8Array>;
  }

  /** The chunk's bytes. */
  async getChunkBytes(sha256: string): Promise<Uint8Array> {
    const res = await this.s3.send(
      new GetObjectCommand({ Bucket: this.bucket, Key: this.chunkKey(sha256) }),
    );
    return await res.Body!.transformToByteArray();
  }

  /** Deletes a chunk. */
  async deleteChunk(sha256: string): Promise<void> {
    await this.s3.send(
      new DeleteObjectCommand({ Bucket: this.bucket, Key: this.chunkKey(sha256) }),
    );
  }

  /** The SHA-256 of every chunk stored. */
  async listChunks(): Promise<Set<string>> {
    const out = new Set<string>();
    let token: string | undefined;
    do {
      const res = await this.s3.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: `${this.base}/chunks/`,
          ContinuationToken: token,
        }),
      );
      for (const o of res.Contents ?? []) {
        const sha = /([0-9a-f]{64})\.ndjson\.zst$/.exec(o.Key ?? "")?.[1];
        if (sha) out.add(sha);
      }
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (token);
    return out;
  }

  /** Closes the client. */
  close(): void {
    this.s3.destroy();
  }
}

/**
 * The manifest to archive: the archive's own entries older than anything kept
 * locally (history the local tier has dropped, or never had after a restore),
 * followed by the local chunks.
 */
export function mergeManifests(archived: Manifest | null, local: Manifest): Manifest {
  const localFirst = local.chunks[0]?.first ?? Infinity;
  const older = (archived?.chunks ?? []).filter((c) => c.last < localFirst);
  const chunks = [...older, ...local.chunks];
  return {
    stream: local.stream,
    stream_id: local.stream_id,
    generation: Math.max(local.generation, (archived?.generation ?? 0) + 1),
    through: chunks.length ? chunks[chunks.length - 1].last : (archived?.through ?? 0),
    chunks,
    retired: [],
  };
}
