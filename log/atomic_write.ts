/**
 * Durable whole-file writes: write a temporary file, fsync it, rename it over
 * the target and fsync the folder, so that a crash leaves the old file or the
 * new one, never a mix.
 *
 * @module
 */

import { join } from "node:path";
import { writeAll } from "../common/write_all.ts";

/**
 * fsync a directory so that a create or rename in it is durable.
 *
 * @example
 * ```ts
 * import { syncDir } from "./atomic_write.ts";
 * await syncDir(await Deno.makeTempDir());
 * ```
 */
export async function syncDir(dir: string): Promise<void> {
  const d = await Deno.open(dir, { read: true });
  try {
    await d.sync();
  } finally {
    d.close();
  }
}

/**
 * Writes `data` to `path` atomically: temp file, fsync, rename, fsync dir.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { writeFileAtomic } from "./atomic_write.ts";
 * const path = `${await Deno.makeTempDir()}/a.txt`;
 * await writeFileAtomic(path, "hello\n");
 * equal(await Deno.readTextFile(path), "hello\n");
 * ```
 */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = `${path}.tmp-${crypto.randomUUID().slice(0, 8)}`;
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
  try {
    await writeAll(f, bytes);
    await f.sync();
  } finally {
    f.close();
  }
  await Deno.rename(tmp, path);
  await syncDir(join(path, ".."));
}
