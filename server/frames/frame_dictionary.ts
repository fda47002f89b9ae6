/**
 * A zstd dictionary for compressed frames (`compress=zstd-dict`, docs/SPEC.md §2.6):
 * raw content, the stream's own most recent frame lines (`[offset,msg]`, up
 * to {@linkcode DICTIONARY_MAX_BYTES}), so that a small live commit
 * compresses against rows like it instead of alone.
 *
 * Invariants:
 * - a dictionary's id is the first 32 hex digits of the SHA-256 of its
 *   bytes: the same id is always the same bytes (served immutable);
 * - one dictionary per stream per server run, built on the first
 *   `compress=zstd-dict` subscribe once the log holds at least
 *   {@linkcode DICTIONARY_MIN_BYTES} of rows, and kept until the server
 *   stops: every subscriber greeted with it can fetch it as long as it is
 *   connected;
 * - it is written to `LOG/dictionaries/ID` before any greeting names it;
 *   files left there by earlier runs are removed then (no connection of an
 *   earlier run survives it);
 * - frames made with it carry a checksum and their content size, and no
 *   dictionary id (a raw-content dictionary has none): `zstd -d -D FILE`
 *   reads them.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { type DictCompressor, dictCompressor, libzstdProblem } from "./_libzstd.ts";
import { ZSTD_FRAME_LEVEL } from "./compressed_frames.ts";
import type { Log } from "../../log/mod.ts";

/**
 * The most bytes of rows a dictionary holds (64 KiB).
 */
export const DICTIONARY_MAX_BYTES = 64 * 1024;

/**
 * The fewest bytes of rows a dictionary is built from (4 KiB): below it,
 * subscribers get plain `compress=zstd` frames (no `dictionary` in the greeting).
 */
export const DICTIONARY_MIN_BYTES = 4 * 1024;

/** The folder of a log's dictionaries, inside the log folder. */
const DICT_DIR = "dictionaries";
/** How many rows back from the end a dictionary is read from, at most. */
const READ_ROWS = 1024;
const utf8 = new TextEncoder();

/**
 * One dictionary and its compressor.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { FrameDictionary } from "./frame_dictionary.ts";
 * const lines = Array.from({ length: 100 }, (_, i) => `[${i},{"symbol":"BTC-USD","px":${i}}]`);
 * const d = FrameDictionary.fromLines(lines);
 * equal(d === null || /^[0-9a-f]{32}$/.test(d.id), true);
 * ```
 */
export class FrameDictionary {
  /** The id: 32 hex digits of the SHA-256 of {@linkcode bytes}. */
  readonly id: string;
  /** The dictionary's bytes (raw content). */
  readonly bytes: Uint8Array;
  readonly #c: DictCompressor;

  private constructor(bytes: Uint8Array, c: DictCompressor) {
    this.bytes = bytes;
    this.id = dictionaryId(bytes);
    this.#c = c;
  }

  /**
   * A dictionary of the last {@linkcode DICTIONARY_MAX_BYTES} of `lines`
   * (each followed by `\n`, whole lines only); null when they hold fewer
   * than {@linkcode DICTIONARY_MIN_BYTES} or libzstd cannot be loaded.
   */
  static fromLines(lines: readonly string[]): FrameDictionary | null {
    const keep: Uint8Array[] = [];
    let size = 0;
    for (let i = lines.length - 1; i >= 0; i--) {
      const b = utf8.encode(lines[i] + "\n");
      if (size + b.length > DICTIONARY_MAX_BYTES) break;
      keep.push(b);
      size += b.length;
    }
    if (size < DICTIONARY_MIN_BYTES) return null;
    const bytes = new Uint8Array(size);
    let p = 0;
    for (let i = keep.length - 1; i >= 0; i--) {
      bytes.set(keep[i], p);
      p += keep[i].length;
    }
    const c = dictCompressor(bytes, ZSTD_FRAME_LEVEL);
    return c === null ? null : new FrameDictionary(bytes, c);
  }

  /** One zstd frame (checksum, content size) of `text`'s UTF-8, with this dictionary. */
  compress(text: string): Uint8Array {
    return this.#c.compress(utf8.encode(text));
  }
}

/**
 * The id of a dictionary's bytes: the first 32 hex digits of their SHA-256.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { dictionaryId } from "./frame_dictionary.ts";
 * equal(dictionaryId(new Uint8Array(0)), "e3b0c44298fc1c149afbf4c8996fb924");
 * ```
 */
export function dictionaryId(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex").slice(0, 32);
}

/**
 * Why this server cannot make dictionaries (libzstd did not load through
 * FFI), or null when it can or has not tried yet.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { dictionaryProblem } from "./frame_dictionary.ts";
 * equal(dictionaryProblem(), null);
 * ```
 */
export function dictionaryProblem(): string | null {
  return libzstdProblem();
}

/**
 * Builds a dictionary from the last rows of `log` (up to 1024 rows back)
 * and writes it to `LOG/dictionaries/ID`, removing the files of earlier
 * runs; null when the log holds too few bytes of rows (or libzstd cannot
 * be loaded).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Log } from "../../log/mod.ts";
 * import { buildLogDictionary } from "./frame_dictionary.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * equal(await buildLogDictionary(log), null);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function buildLogDictionary(log: Log): Promise<FrameDictionary | null> {
  const end = log.endOffset;
  const start = Math.max(log.earliest ?? end, end - READ_ROWS);
  if (start >= end) return null;
  const lines: string[] = [];
  const dec = new TextDecoder();
  const reader = log.reader(start);
  try {
    let bytes = 0;
    while (reader.offset < end && bytes < 8 * DICTIONARY_MAX_BYTES) {
      const b = await reader.read(256 * 1024);
      if (b.count === 0) break;
      for (let i = 0; i < b.count && b.offsets[i] < end; i++) {
        const json = dec.decode(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i]));
        lines.push(`[${b.offsets[i]},${json}]`);
        bytes += b.lengths[i];
      }
    }
  } finally {
    reader.close();
  }
  const d = FrameDictionary.fromLines(lines);
  if (d === null) return null;
  const dir = `${log.dir}/${DICT_DIR}`;
  await Deno.mkdir(dir, { recursive: true });
  for await (const e of Deno.readDir(dir)) {
    if (e.name !== d.id) await Deno.remove(`${dir}/${e.name}`, { recursive: true });
  }
  const tmp = `${dir}/${d.id}.tmp`;
  await Deno.writeFile(tmp, d.bytes);
  await Deno.rename(tmp, `${dir}/${d.id}`);
  return d;
}
