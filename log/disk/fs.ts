/**
 * The small filesystem helpers every part of the log uses: durable renames,
 * existence checks, and reading and writing a manifest.
 *
 * @module
 */

import { join } from "node:path";
import { checkManifest, type Manifest, MANIFEST_FILE } from "../chunk/chunk.ts";
import { LogCorruptError } from "../errors.ts";
import { readCheckedJson, writeCheckedJson } from "./meta_file.ts";
import { type LogIo, REAL_IO } from "./io.ts";

export { syncDir, writeFileAtomic } from "./atomic_write.ts";

/** The members of a manifest written before manifests carried a checksum. */
const MANIFEST_MEMBERS = ["stream", "stream_id", "generation", "through", "chunks", "retired"];

/**
 * Whether `path` exists.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { exists } from "./fs.ts";
 * equal(await exists("/nonexistent/x"), false);
 * ```
 */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/**
 * Reads and checks the manifest of the log in `dir`; `null` when there is
 * none. Throws `LogCorruptError` naming the file when its checksum does not
 * match or it does not parse.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readManifest } from "./fs.ts";
 * equal(await readManifest(await Deno.makeTempDir()), null);
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
 * import { readManifest, writeManifest } from "./fs.ts";
 * import { emptyManifest } from "../chunk/chunk.ts";
 * const dir = await Deno.makeTempDir();
 * await writeManifest(dir, emptyManifest("t", "0".repeat(32)));
 * equal((await readManifest(dir))?.generation, 0);
 * ```
 */
export async function writeManifest(
  dir: string,
  m: Manifest,
  io: LogIo = REAL_IO,
): Promise<void> {
  await writeCheckedJson(join(dir, MANIFEST_FILE), m, io);
}
