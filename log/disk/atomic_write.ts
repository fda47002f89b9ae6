/**
 * Durable whole-file writes: write a temporary file, fsync it, rename it over
 * the target and fsync the folder, so that a crash leaves the old file or the
 * new one, never a mix.
 *
 * @module
 */

import { join } from "node:path";
import { type LogIo, REAL_IO } from "./io.ts";

export { syncDir } from "./io.ts";

/**
 * Writes `data` to `path` atomically: temp file, fsync, rename, fsync dir,
 * each through `io`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { writeFileAtomic } from "./atomic_write.ts";
 * const dir = await Deno.makeTempDir();
 * const path = `${dir}/a.txt`;
 * await writeFileAtomic(path, "hello\n");
 * equal(await Deno.readTextFile(path), "hello\n");
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeFileAtomic(
  path: string,
  data: Uint8Array | string,
  io: LogIo = REAL_IO,
): Promise<void> {
  const tmp = `${path}.tmp-${crypto.randomUUID().slice(0, 8)}`;
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const f = await io.open(tmp, { write: true, create: true, truncate: true });
  try {
    await io.write(f, bytes);
    await io.syncData(f);
  } catch (err) {
    f.close();
    // A full disk, say: what was written of it would only keep the disk full.
    await io.remove(tmp).catch(() => {});
    throw err;
  }
  f.close();
  await io.rename(tmp, path);
  await io.syncDir(join(path, ".."));
}
