/**
 * The key file: a keyed stream's latest row per key, saved in its log's
 * folder at each seal so that a restart reads it and then only the rows
 * after it, not the whole log.
 *
 * ```text
 * keys.ndjson, UTF-8 lines each ending in "\n":
 *   {"keys":1,"stream_id":"<32 hex>","columns":["symbol",…],"end":E,"count":K}
 *   [offset,row]        K lines, one per key, offsets increasing, each < E
 *   …
 *   {"crc32":"1a2b3c4d"}
 *   crc32 = CRC-32 (IEEE, 8 lowercase hex digits) of the UTF-8 bytes of every
 *           line before it (newlines included).
 * ```
 *
 * It is written whole and atomically (a temporary file, synced, renamed over
 * the old one, the folder synced: `writeFileAtomic`, through the log's I/O
 * seam), so a crash leaves the old file or the new one. Reading checks the
 * checksum, the header (this log's stream id, these key columns) and every
 * line; any damage is a {@linkcode KeyFileError}, and the owner rebuilds from
 * the log instead.
 *
 * @module
 */

import { crc32 } from "node:zlib";
import { join } from "node:path";
import type { LogIo } from "../../log/mod.ts";
import { writeFileAtomic } from "../../log/disk/atomic_write.ts";
import type { KeyEntry } from "./key_index.ts";

/** The key file's name in the log's folder. */
export const KEY_FILE = "keys.ndjson";

/** The format version in the key file's header. */
const VERSION = 1;

/** A key file that cannot be used: missing members, a bad checksum, another log's. */
export class KeyFileError extends Error {
  override name = "KeyFileError";
}

/** What a key file holds. */
export interface KeyFileBody {
  /** The stream id of the log it was saved from. */
  streamId: string;
  /** The key columns. */
  columns: readonly string[];
  /** The offset after the last row the entries hold the state of. */
  end: number;
  /** The latest row per key, in offset order. */
  entries: readonly KeyEntry[];
}

function crcHex(bytes: Uint8Array): string {
  return (crc32(bytes) >>> 0).toString(16).padStart(8, "0");
}

/**
 * The bytes of a key file holding `body`.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { decodeKeyFile, encodeKeyFile } from "./key_file.ts";
 * const body = { streamId: "0".repeat(32), columns: ["s"], end: 3, entries: [{ offset: 2, json: '{"s":"a"}' }] };
 * deepStrictEqual(decodeKeyFile(encodeKeyFile(body), body.streamId, ["s"]), body);
 * ```
 */
export function encodeKeyFile(body: KeyFileBody): Uint8Array {
  const pieces = [headerBytes(body)];
  for (let i = 0; i < body.entries.length; i += SLICE_ENTRIES) {
    pieces.push(linesBytes(body.entries, i, i + SLICE_ENTRIES));
  }
  return withTrailer(pieces);
}

/**
 * {@linkcode encodeKeyFile}, a slice of entries at a time, awaiting
 * `pause()` between slices: a large index is encoded without holding the
 * event loop for all of it.
 */
export async function encodeKeyFileInSlices(
  body: KeyFileBody,
  pause: () => Promise<void>,
): Promise<Uint8Array> {
  const pieces = [headerBytes(body)];
  for (let i = 0; i < body.entries.length; i += SLICE_ENTRIES) {
    if (i > 0) await pause();
    pieces.push(linesBytes(body.entries, i, i + SLICE_ENTRIES));
  }
  return withTrailer(pieces);
}

/** Entries encoded at once (one slice). */
const SLICE_ENTRIES = 16_384;

function headerBytes(body: KeyFileBody): Uint8Array {
  const head = {
    keys: VERSION,
    stream_id: body.streamId,
    columns: body.columns,
    end: body.end,
    count: body.entries.length,
  };
  return new TextEncoder().encode(JSON.stringify(head) + "\n");
}

// The `[offset,row]` lines of entries `from` to `to` (each ending in a newline).
function linesBytes(entries: readonly KeyEntry[], from: number, to: number): Uint8Array {
  const parts: string[] = [];
  for (let i = from; i < Math.min(to, entries.length); i++) {
    parts.push(`[${entries[i].offset},${entries[i].json}]\n`);
  }
  return new TextEncoder().encode(parts.join(""));
}

// The pieces joined, then the checksum line of all of them.
function withTrailer(pieces: Uint8Array[]): Uint8Array {
  let size = 0;
  let sum = 0;
  for (const p of pieces) {
    size += p.length;
    sum = crc32(p, sum);
  }
  const trailer = new TextEncoder().encode(
    `{"crc32":"${(sum >>> 0).toString(16).padStart(8, "0")}"}\n`,
  );
  const out = new Uint8Array(size + trailer.length);
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  out.set(trailer, at);
  return out;
}

/**
 * Reads back a key file's bytes, checking them: its checksum, that it is of
 * the log with `streamId` and of `columns`, and each line. Throws
 * {@linkcode KeyFileError} naming what is wrong.
 */
export function decodeKeyFile(
  bytes: Uint8Array,
  streamId: string,
  columns: readonly string[],
): KeyFileBody {
  // The trailer: the last line.
  let cut = bytes.length - 1;
  if (cut < 0 || bytes[cut] !== 0x0a) throw new KeyFileError("it does not end with a newline");
  while (cut > 0 && bytes[cut - 1] !== 0x0a) cut--;
  const trailer = new TextDecoder().decode(bytes.subarray(cut));
  const m = /^\{"crc32":"([0-9a-f]{8})"\}\n$/.exec(trailer);
  if (!m) throw new KeyFileError("its last line is not a checksum");
  const sum = crcHex(bytes.subarray(0, cut));
  if (sum !== m[1]) throw new KeyFileError(`checksum mismatch: ${sum}, the file says ${m[1]}`);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, cut));
  } catch {
    throw new KeyFileError("it is not UTF-8");
  }
  const lines = text.split("\n");
  lines.pop(); // after the last newline
  let head: Record<string, unknown>;
  try {
    head = JSON.parse(lines[0]);
  } catch {
    throw new KeyFileError("its header is not JSON");
  }
  if (head.keys !== VERSION) {
    throw new KeyFileError(`format ${JSON.stringify(head.keys)} is not ${VERSION}`);
  }
  if (head.stream_id !== streamId) {
    throw new KeyFileError(`it is of stream id ${head.stream_id}, the log's is ${streamId}`);
  }
  if (JSON.stringify(head.columns) !== JSON.stringify(columns)) {
    throw new KeyFileError(
      `its key is ${JSON.stringify(head.columns)}, the stream's ${JSON.stringify(columns)}`,
    );
  }
  const end = head.end;
  const count = head.count;
  if (
    !Number.isSafeInteger(end) || !Number.isSafeInteger(count) ||
    lines.length !== count as number + 1
  ) {
    throw new KeyFileError("its header's end or count does not fit its lines");
  }
  const entries: KeyEntry[] = [];
  let last = 0;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const comma = line.indexOf(",");
    const offset = Number(line.slice(1, comma));
    if (
      line[0] !== "[" || !line.endsWith("]") || comma === -1 || !Number.isSafeInteger(offset) ||
      offset <= last || offset >= (end as number)
    ) {
      throw new KeyFileError(`line ${i + 1} is not an [offset,row] in order below ${end}`);
    }
    last = offset;
    entries.push({ offset, json: line.slice(comma + 1, -1) });
  }
  return { streamId, columns, end: end as number, entries };
}

/**
 * Writes `body` as the key file of the log folder `dir`, atomically, through `io`;
 * with `pause`, encoded a slice at a time (see {@linkcode encodeKeyFileInSlices}).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readKeyFile, saveKeyFile } from "./key_file.ts";
 * import { REAL_IO } from "../../log/disk/io.ts";
 * const dir = await Deno.makeTempDir();
 * const id = "0".repeat(32);
 * await saveKeyFile(dir, { streamId: id, columns: ["s"], end: 5, entries: [] }, REAL_IO);
 * equal((await readKeyFile(dir, id, ["s"]))?.end, 5);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function saveKeyFile(
  dir: string,
  body: KeyFileBody,
  io: LogIo,
  pause?: () => Promise<void>,
): Promise<void> {
  const bytes = pause ? await encodeKeyFileInSlices(body, pause) : encodeKeyFile(body);
  await writeFileAtomic(join(dir, KEY_FILE), bytes, io);
}

/**
 * Reads the key file of the log folder `dir`: null when there is none;
 * throws {@linkcode KeyFileError} when it cannot be used. Temporary files a
 * crash left while saving it are removed.
 */
export async function readKeyFile(
  dir: string,
  streamId: string,
  columns: readonly string[],
): Promise<KeyFileBody | null> {
  for await (const e of Deno.readDir(dir)) {
    if (e.isFile && e.name.startsWith(`${KEY_FILE}.tmp-`)) {
      await Deno.remove(join(dir, e.name)).catch(() => {});
    }
  }
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(join(dir, KEY_FILE));
  } catch (err) {
    // No file: a log never sealed with a key, or a key newly given.
    if (err instanceof Deno.errors.NotFound) return null;
    throw new KeyFileError(`cannot read it: ${(err as Error).message}`);
  }
  return decodeKeyFile(bytes, streamId, columns);
}
