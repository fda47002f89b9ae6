/**
 * The S3 archive of a log's chunks: `s3://bucket/prefix` holds, per stream,
 * `prefix/NAME/chunks/SHA256.ndjson.zst` (the chunk bytes as stored locally)
 * and `prefix/NAME/manifest.json` (written after the chunks it lists). The
 * unnamed stream's folder is `_`.
 *
 * The S3 access (URIs, the client, credentials from the SDK's chain, the
 * folder layout) is `common/s3.ts`, shared with the client; this module adds
 * what the log knows: a checked manifest, and how to merge one.
 *
 * @module
 */

import { ArchiveFolder } from "../common/s3.ts";
import { checkManifest, type Manifest } from "./chunk.ts";

export { type ArchiveOptions, s3ErrorMessage } from "../common/s3.ts";

/**
 * One stream's folder in an archive, with its manifest checked as the log's
 * (the S3 access is `common/s3.ts`'s {@linkcode ArchiveFolder}).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArchiveStore } from "./archive.ts";
 * const store = new ArchiveStore({ uri: "s3://market-data/prod" }, "trades");
 * equal(store.manifestKey, "prod/trades/manifest.json");
 * // Requests need a reachable bucket, so this part is type-checked but not run.
 * async function archivedThrough(): Promise<number> {
 *   return (await store.getManifest())?.through ?? 0;
 * }
 * store.close();
 * ```
 */
export class ArchiveStore extends ArchiveFolder {
  /** The archived manifest, or null when there is none. */
  async getManifest(): Promise<Manifest | null> {
    const m = await this.getManifestJson();
    if (m === null) return null;
    const problem = checkManifest(m);
    if (problem) throw new Error(`archive manifest ${this.uri}: ${problem}`);
    return m as Manifest;
  }

  /** Writes the manifest. */
  putManifest(m: Manifest): Promise<void> {
    return this.putManifestJson(m);
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
