/**
 * Chunks and the manifest: sealed history as immutable, content-addressed,
 * zstd-compressed NDJSON.
 *
 * A chunk decompresses to lines `[offset,msg]\n` — every line exactly the wire
 * frame for that offset, the last one included ending in `\n` — so chunks
 * concatenate, and reading the chunks in order and then subscribing at
 * `through + 1` yields what one subscription from the first offset would. A
 * chunk is named by the SHA-256 of its compressed bytes (lowercase hex) and
 * stored as `ROOT/NAME/chunks/SHA256.ndjson.zst`, one zstd frame. A merge
 * decompresses its inputs and compresses them again as one frame, streaming
 * (Deno's zstd stops at the end of the first frame of a concatenation, so
 * chunks are never merged by concatenating their compressed bytes).
 *
 * The manifest (`ROOT/NAME/manifest.json`) lists the chunks in offset order and
 * is rewritten atomically, `generation` bumped on every change.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { once } from "node:events";
import zlib from "node:zlib";
import { join } from "node:path";
import type { RecordBatch } from "../segment/reader.ts";
import { type LogIo, REAL_IO } from "../disk/io.ts";

/** One chunk as the manifest lists it. */
export interface ChunkEntry {
  /** First offset in the chunk. */
  first: number;
  /** Last offset in the chunk. */
  last: number;
  /** Rows (lines) in the chunk. */
  rows: number;
  /** Compressed size in bytes. */
  bytes: number;
  /** SHA-256 of the compressed bytes, lowercase hex. */
  sha256: string;
  /** Append time of the first row, µs since the epoch. */
  first_ts: number;
  /** Append time of the last row, µs since the epoch. */
  last_ts: number;
}

/** A chunk replaced by a merge, kept readable until `until_us`. */
export interface RetiredChunk {
  /** SHA-256 of the chunk. */
  sha256: string;
  /** Compressed size. */
  bytes: number;
  /** When the file may be deleted, µs since the epoch. */
  until_us: number;
}

/** The manifest of a stream's chunks. */
export interface Manifest {
  /** The stream name. */
  stream: string;
  /** The stream id. */
  stream_id: string;
  /** Bumped on every change. */
  generation: number;
  /** Last offset covered by the chunks (0: none). */
  through: number;
  /** The chunks, in offset order. */
  chunks: ChunkEntry[];
  /** Chunks replaced by merges, still readable for a while. */
  retired: RetiredChunk[];
  /** The term of the cluster leader that archived it (a cluster's archive only). */
  term?: number;
}

/**
 * A manifest as a running log shows it: the log's own, shared with every
 * caller without a copy (it is replaced whole at each change, never changed
 * in place), so it must not be changed by them either.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { emptyManifest, type SharedManifest } from "./chunk.ts";
 * const m: SharedManifest = emptyManifest("t", "id");
 * equal(m.chunks.length, 0);
 * // m.chunks.push(...) and m.generation = 1 do not type-check.
 * ```
 */
export type SharedManifest =
  & Readonly<Omit<Manifest, "chunks" | "retired">>
  & {
    readonly chunks: readonly Readonly<ChunkEntry>[];
    readonly retired: readonly Readonly<RetiredChunk>[];
  };

/** The manifest's file name in a log folder. */
export const MANIFEST_FILE = "manifest.json";
/** The folder of chunk files in a log folder. */
export const CHUNKS_DIR = "chunks";

/** An empty manifest for a stream. */
export function emptyManifest(stream: string, streamId: string): Manifest {
  return { stream, stream_id: streamId, generation: 0, through: 0, chunks: [], retired: [] };
}

/** Path of the chunk file named `sha256` in log folder `dir`. */
export function chunkPath(dir: string, sha256: string): string {
  return join(dir, CHUNKS_DIR, `${sha256}.ndjson.zst`);
}

/** SHA-256 of bytes, lowercase hex. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** Checks the shape of a parsed manifest; returns an error string or null. */
export function checkManifest(m: unknown): string | null {
  if (!m || typeof m !== "object") return "not an object";
  const x = m as Manifest;
  if (typeof x.stream_id !== "string" || !/^[0-9a-f]{32}$/.test(x.stream_id)) {
    return "bad stream_id";
  }
  if (!Number.isInteger(x.generation) || !Number.isInteger(x.through)) {
    return "bad generation or through";
  }
  if (!Array.isArray(x.chunks)) return "chunks is not an array";
  let prev = 0;
  for (const c of x.chunks) {
    if (
      !c || !Number.isInteger(c.first) || !Number.isInteger(c.last) || c.first > c.last ||
      c.first <= prev || typeof c.sha256 !== "string" || !/^[0-9a-f]{64}$/.test(c.sha256)
    ) {
      return `bad chunk entry ${JSON.stringify(c)}`;
    }
    prev = c.last;
  }
  if (x.chunks.length > 0 && x.through !== prev) return `through ${x.through} is not ${prev}`;
  if (x.term !== undefined && !(Number.isSafeInteger(x.term) && x.term >= 0)) return "bad term";
  if (!Array.isArray(x.retired)) x.retired = [];
  return null;
}

/** Compressed bytes a chunk cursor feeds its decompressor at a time. */
const PUMP_BYTES = 64 * 1024;
const ZSTD_LEVEL = 3;
// zstd's own content checksum: a reader that streams a chunk (without hashing
// it whole) still detects a damaged one instead of handing out wrong rows.
const ZSTD_PARAMS = {
  [zlib.constants.ZSTD_c_compressionLevel]: ZSTD_LEVEL,
  [zlib.constants.ZSTD_c_checksumFlag]: 1,
};

/** zstd-compresses `bytes` (level 3). */
export function compress(bytes: Uint8Array): Uint8Array {
  return zlib.zstdCompressSync(bytes, { params: ZSTD_PARAMS });
}

/** Appends the wire line `[offset,payload]\n` for every record of `batch` to `out`. */
export class LineWriter {
  #buf: Uint8Array = new Uint8Array(1 << 20);
  #len = 0;

  /** Bytes written. */
  get length(): number {
    return this.#len;
  }

  /** Appends the lines of a batch. */
  addBatch(batch: RecordBatch): void {
    for (let i = 0; i < batch.count; i++) {
      const s = batch.starts[i];
      this.add(batch.offsets[i], batch.buf.subarray(s, s + batch.lengths[i]));
    }
  }

  /** Appends one line. */
  add(offset: number, payload: Uint8Array): void {
    const digits = String(offset);
    const need = this.#len + payload.length + digits.length + 4;
    if (need > this.#buf.length) {
      let cap = this.#buf.length * 2;
      while (cap < need) cap *= 2;
      const next = new Uint8Array(cap);
      next.set(this.#buf.subarray(0, this.#len));
      this.#buf = next;
    }
    const b = this.#buf;
    let o = this.#len;
    b[o++] = 91; // [
    for (let i = 0; i < digits.length; i++) b[o++] = digits.charCodeAt(i);
    b[o++] = 44; // ,
    b.set(payload, o);
    o += payload.length;
    b[o++] = 93; // ]
    b[o++] = 10; // \n
    this.#len = o;
  }

  /** The bytes written so far. */
  bytes(): Uint8Array {
    return this.#buf.subarray(0, this.#len);
  }
}

/** A chunk's lines did not parse or did not match what the manifest says. */
export class ChunkCorruptError extends Error {
  /** The chunk's path or name. */
  readonly chunk: string;
  /** Makes the error. */
  constructor(chunk: string, detail: string) {
    super(`corrupt chunk ${chunk}: ${detail}`);
    this.name = "ChunkCorruptError";
    this.chunk = chunk;
  }
}

/**
 * Parses decompressed chunk bytes (whole lines) into a record batch whose
 * payloads are the `msg` parts of the lines. Checks that offsets increase.
 * Returns the batch and the bytes consumed (a trailing partial line is left).
 */
export function parseLines(
  buf: Uint8Array,
  name: string,
  prevOffset: number,
): { batch: RecordBatch; used: number } {
  const offsets: number[] = [];
  const starts: number[] = [];
  const lengths: number[] = [];
  let pos = 0;
  let prev = prevOffset;
  while (pos < buf.length) {
    const nl = buf.indexOf(10, pos);
    if (nl < 0) break;
    if (buf[pos] !== 91) {
      throw new ChunkCorruptError(name, `line at byte ${pos} does not start with [`);
    }
    let o = 0;
    let i = pos + 1;
    while (i < nl && buf[i] >= 48 && buf[i] <= 57) o = o * 10 + (buf[i++] - 48);
    if (buf[i] !== 44 || i === pos + 1 || buf[nl - 1] !== 93) {
      throw new ChunkCorruptError(name, `line at byte ${pos} is not [offset,msg]`);
    }
    if (o <= prev) throw new ChunkCorruptError(name, `offset ${o} after ${prev}`);
    prev = o;
    offsets.push(o);
    starts.push(i + 1);
    lengths.push(nl - 1 - (i + 1));
    pos = nl + 1;
  }
  const n = offsets.length;
  return {
    batch: {
      buf,
      count: n,
      offsets: Float64Array.from(offsets),
      times: new Float64Array(n),
      starts: Int32Array.from(starts),
      lengths: Int32Array.from(lengths),
    },
    used: pos,
  };
}

/** Fails one cursor's read with the error given. */
type Failer = (err: Error) => void;

// Deno 2.9's node:zlib throws a zstd error that arises while it goes on
// decompressing in a later tick (more output than one block) as an uncaught
// error, instead of emitting "error" on the stream: seen with a chunk whose
// frame header was damaged (readers fuzz seed 785806326 chunk case 24). Such
// an error is taken here and given to the cursor whose decompressor was the
// last to run: the continuation that throws runs right after its own output.
let lastActive: Failer | null = null;
let guarded = false;

function guardZstdErrors(): void {
  if (guarded) return;
  guarded = true;
  globalThis.addEventListener("error", (e: ErrorEvent) => {
    const fail = lastActive;
    const err = e.error;
    if (!fail || !(err instanceof Error) || !err.message.startsWith("Zstd decompress error")) {
      return;
    }
    e.preventDefault();
    lastActive = null;
    fail(err);
  });
}

/**
 * Reads a chunk file's lines as record batches, decompressing as it goes
 * (memory stays bounded by the block size, not the chunk size).
 */
export class ChunkCursor {
  readonly path: string;
  readonly #entry: ChunkEntry;
  readonly #source: (() => Promise<ReadableStream<Uint8Array>>) | null;
  #file: Deno.FsFile | null = null;
  #stream: ReadableStreamDefaultReader<Uint8Array> | null = null;
  #z: zlib.ZstdDecompress | null = null;
  #out: Uint8Array[] = [];
  #outBytes = 0;
  #ended = false;
  #error: Error | null = null;
  #carry: Uint8Array = new Uint8Array(0);
  #prev = 0;
  #rows = 0;
  #waiter: (() => void) | null = null;
  #pumping = false;
  readonly #failer: Failer = (e) => {
    if (lastActive === this.#failer) lastActive = null;
    this.#error ??= new ChunkCorruptError(this.path, `zstd: ${e.message}`);
    this.#ended = true;
    this.#wake();
  };

  /**
   * A cursor over the chunk described by `entry`, read from the file at
   * `path`, or from `source` (an archive download; `path` then only names it).
   */
  constructor(
    path: string,
    entry: ChunkEntry,
    source: (() => Promise<ReadableStream<Uint8Array>>) | null = null,
  ) {
    this.path = path;
    this.#entry = entry;
    this.#source = source;
  }

  get #open(): boolean {
    return this.#file !== null || this.#stream !== null;
  }

  /** Opens the file (throws NotFound when it is gone). */
  async open(): Promise<void> {
    if (this.#source) this.#stream = (await this.#source()).getReader();
    else this.#file = await Deno.open(this.path, { read: true });
    const z = zlib.createZstdDecompress();
    this.#z = z;
    guardZstdErrors();
    z.on("data", (b: Uint8Array) => {
      lastActive = this.#failer;
      this.#out.push(b);
      this.#outBytes += b.length;
      this.#wake();
    });
    z.on("end", () => {
      if (lastActive === this.#failer) lastActive = null;
      this.#ended = true;
      this.#wake();
    });
    z.on("error", (e: Error) => this.#failer(e));
  }

  #wake(): void {
    const w = this.#waiter;
    this.#waiter = null;
    w?.();
  }

  async #pump(want: number): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      // Compressed input in small pieces: zstd expands NDJSON ~5-10x, and
      // everything one write decompresses stays queued until read.
      const buf = new Uint8Array(PUMP_BYTES);
      while (!this.#ended && this.#outBytes < want) {
        let piece: Uint8Array | null;
        if (this.#stream) {
          const r = await this.#stream.read();
          piece = r.done ? null : r.value;
        } else {
          const n = await this.#file!.read(buf);
          piece = n === null ? null : buf.slice(0, n);
        }
        if (piece === null) {
          this.#z!.end();
          break;
        }
        lastActive = this.#failer;
        const more = this.#z!.write(piece);
        if (!more) await new Promise((r) => this.#z!.once("drain", r));
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** The next batch of rows (about `maxBytes` of lines); an empty batch at the end. */
  async read(maxBytes = 512 * 1024): Promise<RecordBatch> {
    while (true) {
      if (this.#error) throw this.#error;
      if (this.#outBytes > 0 || this.#carry.length > 0) {
        // About `maxBytes` of what is decompressed, not all of it: the
        // batch's buffer is what a catching-up subscriber holds while it
        // sends it, and the rest waits here, in the decompressor's pieces.
        let take = 0;
        let total = this.#carry.length;
        while (take < this.#out.length && (take === 0 || total < maxBytes)) {
          total += this.#out[take++].length;
        }
        const parts = [this.#carry, ...this.#out.slice(0, take)];
        this.#out = this.#out.slice(take);
        this.#outBytes -= total - this.#carry.length;
        const buf = new Uint8Array(total);
        let o = 0;
        for (const p of parts) {
          buf.set(p, o);
          o += p.length;
        }
        const { batch, used } = parseLines(buf, this.path, this.#prev);
        this.#carry = buf.slice(used);
        if (batch.count > 0) {
          this.#prev = batch.offsets[batch.count - 1];
          this.#rows += batch.count;
          this.#checkBounds(batch);
          return batch;
        }
        // A line longer than what was taken: take more of what is decompressed.
        if (this.#outBytes > 0) continue;
      }
      if (this.#ended) {
        if (this.#carry.length > 0) {
          throw new ChunkCorruptError(this.path, "last line has no newline");
        }
        if (this.#rows !== this.#entry.rows || this.#prev !== this.#entry.last) {
          throw new ChunkCorruptError(
            this.path,
            `holds ${this.#rows} rows through ${this.#prev}; the manifest says ${this.#entry.rows} through ${this.#entry.last}`,
          );
        }
        return parseLines(new Uint8Array(0), this.path, 0).batch;
      }
      const waited = new Promise<void>((r) => (this.#waiter = r));
      this.#pump(maxBytes).catch((err) => {
        // A read cut short by close() is expected; anything else is the reader's error.
        if (this.#open) {
          this.#error = err instanceof Error ? err : new Error(String(err));
          this.#wake();
        }
      });
      await waited;
    }
  }

  #checkBounds(batch: RecordBatch): void {
    if (batch.offsets[0] < this.#entry.first || this.#prev > this.#entry.last) {
      throw new ChunkCorruptError(
        this.path,
        `offsets ${
          batch.offsets[0]
        }..${this.#prev} outside ${this.#entry.first}..${this.#entry.last}`,
      );
    }
  }

  /** Closes the file. */
  close(): void {
    try {
      this.#file?.close();
      this.#stream?.cancel().catch(() => {});
    } catch {
      // already closed
    }
    this.#file = null;
    this.#stream = null;
    this.#z?.destroy();
    this.#z = null;
    if (lastActive === this.#failer) lastActive = null;
    this.#wake();
  }
}

/**
 * Decompresses the chunks at `inputs` in order and compresses their lines
 * again as one zstd frame into `output` (synced; written through `io`),
 * streaming with bounded memory. Returns the output's SHA-256 and size.
 */
export async function mergeChunkFiles(
  inputs: string[],
  output: string,
  io: LogIo = REAL_IO,
): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash("sha256");
  const out = await io.open(output, { write: true, create: true, truncate: true });
  try {
    const comp = zlib.createZstdCompress({ params: ZSTD_PARAMS });
    let bytes = 0;
    const written = (async () => {
      for await (const piece of comp) {
        hash.update(piece);
        await io.write(out, piece);
        bytes += piece.length;
      }
    })();
    // A failed write (a full disk) stops the compressor, so that feeding it
    // (which waits for it to drain) fails too rather than wait forever.
    written.catch((err) => comp.destroy(err));
    for (const path of inputs) {
      const dec = zlib.createZstdDecompress();
      const file = await Deno.open(path, { read: true });
      const fed = (async () => {
        try {
          for await (const b of file.readable) {
            if (!dec.write(b)) await once(dec, "drain");
          }
        } finally {
          dec.end();
        }
      })();
      for await (const d of dec) {
        if (!comp.write(d)) await once(comp, "drain");
      }
      await fed;
    }
    comp.end();
    await written;
    await io.syncData(out);
    return { sha256: hash.digest("hex"), bytes };
  } finally {
    out.close();
  }
}
