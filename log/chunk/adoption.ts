/**
 * Adopting another log's chunks (a mirror replicating a primary): the
 * primary's chunk files, byte for byte and under the same SHA-256 names, with
 * their manifest entries and `.times` side files, checked before they are
 * kept. A replica's manifest lists the primary's chunks, not chunks of its
 * own, so that chunk names are identical on every machine serving a stream.
 *
 * Crash order (as for a chunk the worker makes): the chunk file and its time
 * index are written atomically and durably first ({@linkcode storeAdoptedChunk});
 * then the worker lists them in the manifest (message `adopt`); then the
 * replica's sealed segments whose rows the chunks hold are deleted
 * ({@linkcode coveredBy}). A crash before the manifest leaves orphan files
 * that the next open deletes (the mirror fetches them again); after it,
 * the covered segments are found and deleted on the next open.
 *
 * @module
 */

import { ChunkCorruptError, ChunkCursor, type ChunkEntry, chunkPath, CHUNKS_DIR } from "./chunk.ts";
import { checkTimes, decodeTimes, timesPath } from "./times.ts";
import { exists, writeFileAtomic } from "../disk/fs.ts";
import { syncDir } from "../disk/atomic_write.ts";
import { writeAll } from "../../common/write_all.ts";
import { createHash } from "node:crypto";
import { ZstdFrameShape } from "../../common/zstd_frame.ts";

/**
 * A chunk whose bytes (or time index) are not what its manifest entry says:
 * the copy was damaged on its way; fetch it again.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ChunkDigestError } from "./adoption.ts";
 * const err = new ChunkDigestError("ab".repeat(32), "sha-256 is cd…");
 * equal(err.name, "ChunkDigestError");
 * equal(err.sha256.length, 64);
 * ```
 */
export class ChunkDigestError extends Error {
  /** The chunk's name (its SHA-256 as listed). */
  readonly sha256: string;
  /** A chunk named `sha256` whose copy is wrong, and how. */
  constructor(sha256: string, detail: string) {
    super(`chunk ${sha256} refused: ${detail}`);
    this.name = "ChunkDigestError";
    this.sha256 = sha256;
  }
}

/**
 * Why `e` is not a well-formed manifest entry, or `null` when it is.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { checkEntry } from "./adoption.ts";
 * const e = { first: 1, last: 9, rows: 9, bytes: 10, sha256: "a".repeat(64), first_ts: 1, last_ts: 2 };
 * equal(checkEntry(e), null);
 * ok(checkEntry({ ...e, last: 0 }) !== null);
 * ```
 */
export function checkEntry(e: unknown): string | null {
  const c = e as ChunkEntry;
  if (!c || typeof c !== "object") return `not an object: ${JSON.stringify(e)}`;
  const ints = [c.first, c.last, c.rows, c.bytes, c.first_ts, c.last_ts];
  if (!ints.every((n) => Number.isSafeInteger(n) && n >= 0)) {
    return `numbers out of range in ${JSON.stringify(e)}`;
  }
  if (c.first < 1 || c.last < c.first || c.rows < 1 || c.rows > c.last - c.first + 1) {
    return `offsets ${c.first}..${c.last} with ${c.rows} rows do not fit`;
  }
  if (typeof c.sha256 !== "string" || !/^[0-9a-f]{64}$/.test(c.sha256)) {
    return `bad sha256 ${JSON.stringify(c.sha256)}`;
  }
  if (c.last_ts < c.first_ts) return `times ${c.first_ts}..${c.last_ts} decrease`;
  return null;
}

/**
 * Checks a copy of chunk `entry` (and of its time index, when the primary
 * has one) and keeps both in log folder `dir`, atomically and durably. The
 * copy may be given as bytes or as a stream (an HTTP body, an S3 object),
 * which is written to a temporary file as it arrives, never held whole. The
 * chunk is not listed yet: {@linkcode Log.adoptChunks} does that.
 *
 * @throws {ChunkDigestError} when the bytes' size or SHA-256, or the time
 * index, is not the entry's.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { ChunkDigestError, storeAdoptedChunk } from "./adoption.ts";
 * import { compress, sha256Hex } from "./chunk.ts";
 * const dir = await Deno.makeTempDir();
 * await Deno.mkdir(`${dir}/chunks`);
 * const bytes = compress(new TextEncoder().encode('[1,{}]\n'));
 * const entry = { first: 1, last: 1, rows: 1, bytes: bytes.length, sha256: sha256Hex(bytes),
 *   first_ts: 5, last_ts: 5 };
 * await storeAdoptedChunk(dir, entry, bytes, null);
 * const bad = bytes.slice();
 * bad[bad.length - 1] ^= 1;
 * const refused = await storeAdoptedChunk(dir, entry, bad, null).catch((e) => e);
 * ok(refused instanceof ChunkDigestError);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function storeAdoptedChunk(
  dir: string,
  entry: ChunkEntry,
  body: Uint8Array | ReadableStream<Uint8Array>,
  times: Uint8Array | null,
): Promise<void> {
  const bad = checkEntry(entry);
  if (bad !== null) {
    if (!(body instanceof Uint8Array)) await body.cancel().catch(() => {});
    throw new ChunkDigestError(String(entry?.sha256), `manifest entry: ${bad}`);
  }
  await Deno.mkdir(`${dir}/${CHUNKS_DIR}`, { recursive: true });
  const path = chunkPath(dir, entry.sha256);
  // The copy goes to a file of its own first, hashed as it arrives: a merged
  // chunk can be hundreds of MB, and holding it whole would cost that much
  // memory (and fragment the heap) for each one adopted. A crash leaves the
  // temporary file, which the next open deletes (it is no chunk name).
  const tmp = `${path}.tmp-${crypto.randomUUID().slice(0, 8)}`;
  try {
    const hash = createHash("sha256");
    const shape = new ZstdFrameShape(Infinity, { many: true });
    let size = 0;
    const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
    try {
      const pieces = body instanceof Uint8Array ? [body] : body;
      for await (const piece of pieces) {
        size += piece.length;
        if (size > entry.bytes) {
          if (!(body instanceof Uint8Array)) await body.cancel().catch(() => {});
          throw new ChunkDigestError(
            entry.sha256,
            `more than the ${entry.bytes} bytes the manifest says`,
          );
        }
        hash.update(piece);
        try {
          shape.feed(piece);
        } catch (err) {
          if (!(body instanceof Uint8Array)) await body.cancel().catch(() => {});
          throw new ChunkDigestError(entry.sha256, (err as Error).message);
        }
        await writeAll(f, piece);
      }
      await f.sync();
    } finally {
      f.close();
    }
    if (size !== entry.bytes) {
      throw new ChunkDigestError(entry.sha256, `${size} bytes, the manifest says ${entry.bytes}`);
    }
    const sha = hash.digest("hex");
    if (sha !== entry.sha256) throw new ChunkDigestError(entry.sha256, `its SHA-256 is ${sha}`);
    // One whole zstd frame: the decoder would take a frame cut before its
    // checksum for all its rows (common/zstd_frame.ts).
    try {
      shape.finish();
    } catch (err) {
      throw new ChunkDigestError(entry.sha256, (err as Error).message);
    }
    // Its digest is only what the primary says of it: the rows are checked too
    // (a primary that lies, or is broken, lists the digest of bad bytes).
    await checkChunkRows(entry, tmp);
    if (times !== null) {
      let why: string | null;
      try {
        why = checkTimes(decodeTimes(times, `${entry.sha256}.times`), entry);
      } catch (err) {
        why = err instanceof Error ? err.message : String(err);
      }
      if (why !== null) throw new ChunkDigestError(entry.sha256, `time index: ${why}`);
    }
    if (!(await exists(path))) {
      await Deno.rename(tmp, path);
      await syncDir(`${dir}/${CHUNKS_DIR}`);
    }
  } finally {
    await Deno.remove(tmp).catch(() => {});
  }
  if (times !== null) {
    const tp = timesPath(dir, entry.sha256);
    if (!(await exists(tp))) await writeFileAtomic(tp, times);
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

// The chunk decompresses whole (zstd checksum), its lines are `[offset,msg]`
// with the entry's offsets and row count (what verify checks), and each msg
// is JSON of an object; else ChunkDigestError.
async function checkChunkRows(entry: ChunkEntry, path: string): Promise<void> {
  const cursor = new ChunkCursor(path, entry);
  try {
    await cursor.open();
    for (;;) {
      const b = await cursor.read();
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) {
        let row: unknown;
        try {
          row = JSON.parse(utf8.decode(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i])));
        } catch {
          row = undefined;
        }
        if (row === null || typeof row !== "object" || Array.isArray(row)) {
          throw new ChunkDigestError(
            entry.sha256,
            `the row at offset ${b.offsets[i]} is not a JSON object`,
          );
        }
      }
    }
  } catch (err) {
    if (err instanceof ChunkDigestError) throw err;
    if (err instanceof ChunkCorruptError || err instanceof Error) {
      throw new ChunkDigestError(entry.sha256, `its rows: ${err.message}`);
    }
    throw err;
  } finally {
    cursor.close();
  }
}

/**
 * Whether `chunks` (in offset order) hold every offset of `[first, last]`:
 * a replica's sealed segment so covered is no longer the copy.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { coveredBy } from "./adoption.ts";
 * const c = (first: number, last: number) =>
 *   ({ first, last, rows: last - first + 1, bytes: 1, sha256: "", first_ts: 0, last_ts: 0 });
 * equal(coveredBy([c(1, 10), c(11, 20)], 5, 15), true);
 * equal(coveredBy([c(1, 10)], 5, 15), false);
 * ```
 */
export function coveredBy(chunks: readonly ChunkEntry[], first: number, last: number): boolean {
  let at = first;
  for (const c of chunks) {
    if (c.last < at) continue;
    if (c.first > at) return false;
    at = c.last + 1;
    if (at > last) return true;
  }
  return at > last;
}

/**
 * The manifest chunk list after adopting `incoming` into `current`: the
 * current chunks that overlap none of the incoming ones, then the incoming
 * ones, in offset order (a chunk already listed is kept once). `removed` are
 * the current chunks no longer listed (a merge upstream replaced them).
 *
 * @throws {RangeError} when the result would list overlapping chunks.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { adoptedList } from "./adoption.ts";
 * const c = (first: number, last: number, sha256: string) =>
 *   ({ first, last, rows: last - first + 1, bytes: 1, sha256, first_ts: 0, last_ts: 0 });
 * const { chunks, removed } = adoptedList([c(1, 10, "a"), c(11, 20, "b")], [c(1, 20, "m")]);
 * deepStrictEqual(chunks.map((x) => x.sha256), ["m"]);
 * equal(removed.length, 2);
 * ```
 */
export function adoptedList(
  current: readonly ChunkEntry[],
  incoming: readonly ChunkEntry[],
): { chunks: ChunkEntry[]; removed: ChunkEntry[] } {
  const shas = new Set(incoming.map((e) => e.sha256));
  const overlaps = (a: ChunkEntry) =>
    !shas.has(a.sha256) && incoming.some((b) => a.first <= b.last && b.first <= a.last);
  const kept = current.filter((c) => !overlaps(c));
  const keptShas = new Set(kept.map((c) => c.sha256));
  const chunks = [...kept, ...incoming.filter((e) => !keptShas.has(e.sha256))]
    .sort((a, b) => a.first - b.first);
  for (let i = 1; i < chunks.length; i++) {
    if (chunks[i].first <= chunks[i - 1].last) {
      throw new RangeError(
        `adopted chunks overlap: ${chunks[i - 1].first}..${chunks[i - 1].last} and ` +
          `${chunks[i].first}..${chunks[i].last}`,
      );
    }
  }
  const listed = new Set(chunks.map((c) => c.sha256));
  return { chunks, removed: current.filter((c) => !listed.has(c.sha256)) };
}
