/**
 * The manifest file, `manifest.json`: reading it checked (its checksum, then
 * its shape) and writing it atomically with its checksum (see
 * `../disk/meta_file.ts`). One written before manifests carried a checksum
 * still reads.
 *
 * @module
 */

import { join } from "node:path";
import { checkManifest, type Manifest, MANIFEST_FILE } from "./chunk.ts";
import { LogCorruptError } from "../errors.ts";
import { readCheckedJson, writeCheckedJson } from "../disk/meta_file.ts";
import { type LogIo, REAL_IO } from "../disk/io.ts";

/** The members of a manifest written before manifests carried a checksum. */
const MANIFEST_MEMBERS = ["stream", "stream_id", "generation", "through", "chunks", "retired"];

/**
 * Reads and checks the manifest of the log in `dir`; `null` when there is
 * none. Throws `LogCorruptError` naming the file when its checksum does not
 * match or it does not parse.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readManifest } from "./manifest_file.ts";
 * const dir = await Deno.makeTempDir();
 * equal(await readManifest(dir), null);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readManifest(dir: string): Promise<Manifest | null> {
  const path = join(dir, MANIFEST_FILE);
  const r = await readCheckedJson<Manifest>(path, MANIFEST_MEMBERS);
  if (r === null) return null;
  const problem = checkManifest(r.value);
  if (problem) throw new LogCorruptError(path, 0, problem);
  return r.value;
}

/**
 * Writes the manifest of the log in `dir`, with its checksum, atomically
 * (through `io`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readManifest, writeManifest } from "./manifest_file.ts";
 * import { emptyManifest } from "./chunk.ts";
 * const dir = await Deno.makeTempDir();
 * await writeManifest(dir, emptyManifest("t", "0".repeat(32)));
 * equal((await readManifest(dir))?.generation, 0);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeManifest(
  dir: string,
  m: Manifest,
  io: LogIo = REAL_IO,
): Promise<void> {
  await writeCheckedJson(join(dir, MANIFEST_FILE), m, io);
}
