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

import { ArchiveFolder } from "../../common/s3.ts";
import {
  checkManifest,
  ChunkCursor,
  type ChunkEntry,
  compress,
  LineWriter,
  type Manifest,
  sha256Hex,
} from "./chunk.ts";

export { type ArchiveOptions, s3ErrorMessage } from "../../common/s3.ts";

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
 * The archived chunk that begins below the local tier and reaches into it
 * (another writer cut it where the local log did not, e.g. a cluster's
 * earlier leader, whose chunks a new leader's do not share), or `null`. At
 * most one can: archived chunks do not overlap.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { straddlingChunk } from "./archive.ts";
 * const c = (first: number, last: number) =>
 *   ({ first, last, rows: last - first + 1, bytes: 1, sha256: "ab", first_ts: 0, last_ts: 0 });
 * const m = (chunks: ReturnType<typeof c>[]) =>
 *   ({ stream: "t", stream_id: "0".repeat(32), generation: 1, through: 0, chunks, retired: [] });
 * equal(straddlingChunk(m([c(1, 60), c(61, 120)]), m([c(101, 150)]))?.first, 61);
 * equal(straddlingChunk(m([c(1, 100)]), m([c(101, 150)])), null);
 * ```
 */
export function straddlingChunk(archived: Manifest | null, local: Manifest): ChunkEntry | null {
  const localFirst = local.chunks[0]?.first ?? Infinity;
  return (archived?.chunks ?? []).find((c) => c.first < localFirst && c.last >= localFirst) ??
    null;
}

/**
 * The rows of archived chunk `entry` below offset `below`, made into a chunk
 * of their own and uploaded (named by its SHA-256 like every chunk; the same
 * rows always make the same name). Its first append time is the chunk's; its
 * last is at most `lastTs` (the first append time of the chunk that begins at
 * `below`), since archived chunks carry no time index.
 *
 * @example
 * ```ts ignore
 * const cut = straddlingChunk(archived, local);
 * const remade = cut && await remakeBelow(store, cut, local.chunks[0].first, local.chunks[0].first_ts);
 * const merged = mergeManifests(archived, local, remade);
 * ```
 */
export async function remakeBelow(
  store: ArchiveStore,
  entry: ChunkEntry,
  below: number,
  lastTs: number,
): Promise<ChunkEntry> {
  const cursor = new ChunkCursor(
    `${store.uri} ${entry.sha256}`,
    entry,
    () => store.getChunk(entry.sha256),
  );
  const out = new LineWriter();
  let rows = 0;
  let last = 0;
  await cursor.open();
  try {
    reading: while (true) {
      const b = await cursor.read(1 << 20);
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) {
        const o = b.offsets[i];
        if (o >= below) break reading;
        out.add(o, b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]));
        rows++;
        last = o;
      }
    }
  } finally {
    cursor.close();
  }
  if (rows === 0) {
    throw new Error(
      `archived chunk ${entry.sha256} (offsets ${entry.first}..${entry.last}) holds no row below ${below}`,
    );
  }
  const bytes = compress(out.bytes());
  const sha256 = sha256Hex(bytes);
  await store.putChunk(sha256, bytes);
  return {
    first: entry.first,
    last,
    rows,
    bytes: bytes.length,
    sha256,
    first_ts: entry.first_ts,
    last_ts: Math.max(entry.first_ts, Math.min(entry.last_ts, lastTs)),
  };
}

/**
 * The manifest to archive: the archive's own entries below anything kept
 * locally (history the local tier has dropped, never had after a restore, or
 * that another writer archived), followed by the local chunks. Every offset
 * an archived chunk below the local tier covers stays covered: an archived
 * chunk that reaches into the local tier ({@linkcode straddlingChunk}) is
 * listed as `remade`, its rows below the local tier made into a chunk of
 * their own ({@linkcode remakeBelow}), so that no two listed chunks overlap
 * and every reader of the manifest gets each row once. Without `remade` such
 * a chunk is an error, never dropped.
 *
 * @example
 * ```ts
 * import { deepEqual, throws } from "node:assert/strict";
 * import { mergeManifests } from "./archive.ts";
 * const c = (first: number, last: number, sha256 = "ab") =>
 *   ({ first, last, rows: last - first + 1, bytes: 1, sha256, first_ts: 0, last_ts: 0 });
 * const m = (chunks: ReturnType<typeof c>[]) =>
 *   ({ stream: "t", stream_id: "0".repeat(32), generation: 1, through: 0, chunks, retired: [] });
 * const archived = m([c(1, 60), c(61, 120)]);
 * const local = m([c(101, 150)]);
 * throws(() => mergeManifests(archived, local), /61\.\.120/);
 * const merged = mergeManifests(archived, local, c(61, 100, "cd"));
 * deepEqual(merged.chunks.map((x) => [x.first, x.last]), [[1, 60], [61, 100], [101, 150]]);
 * ```
 */
export function mergeManifests(
  archived: Manifest | null,
  local: Manifest,
  remade: ChunkEntry | null = null,
): Manifest {
  const localFirst = local.chunks[0]?.first ?? Infinity;
  const older: ChunkEntry[] = [];
  for (const c of archived?.chunks ?? []) {
    if (c.first >= localFirst) break;
    if (c.last < localFirst) {
      older.push(c);
      continue;
    }
    if (!remade || remade.first !== c.first || remade.last >= localFirst) {
      throw new Error(
        `archived chunk ${c.sha256} (offsets ${c.first}..${c.last}) reaches into the local ` +
          `chunks from ${localFirst}: its rows below ${localFirst} must be made a chunk of ` +
          "their own before the manifests are merged",
      );
    }
    older.push(remade);
  }
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
