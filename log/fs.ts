/**
 * The small filesystem helpers every part of the log uses: whole writes,
 * durable renames, existence checks, and reading a manifest.
 *
 * @module
 */

import { join } from "node:path";
import { checkManifest, type Manifest, MANIFEST_FILE } from "./chunk.ts";
import { LogCorruptError } from "./segment_reader.ts";
import { writeAll } from "../common/write_all.ts";

/** fsync a directory so that a create or rename in it is durable. */
export async function syncDir(dir: string): Promise<void> {
  const d = await Deno.open(dir, { read: true });
  try {
    await d.sync();
  } finally {
    d.close();
  }
}

/** Writes `data` to `path` atomically: temp file, fsync, rename, fsync dir. */
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

/** Whether `path` exists. */
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
 * none. Throws `LogCorruptError` naming the file when it does not parse.
 */
export async function readManifest(dir: string): Promise<Manifest | null> {
  const path = join(dir, MANIFEST_FILE);
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
  let m: Manifest;
  try {
    m = JSON.parse(text);
  } catch {
    throw new LogCorruptError(path, 0, "not valid JSON");
  }
  const problem = checkManifest(m);
  if (problem) throw new LogCorruptError(path, 0, problem);
  return m;
}
