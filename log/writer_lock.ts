/**
 * One writer per log on a host: the lock file `LOCK` in the log folder,
 * held with `flock` (exclusive) for as long as the writer has the log —
 * `Log.open` for an open log, `truncateLog` while it cuts a closed one. The
 * file says which process holds it, for the error another one gets.
 *
 * @module
 */

import { join } from "node:path";
import { LogLockedError } from "./errors.ts";

/** The name of the lock file in a log folder. */
export const LOCK_FILE = "LOCK";

/**
 * Takes the writer's lock of the log in `dir` (the folder exists); the
 * caller closes the file to release it.
 *
 * @throws {LogLockedError} naming the holder when another writer has it.
 *
 * @example
 * ```ts
 * import { rejects } from "node:assert/strict";
 * import { LogLockedError } from "./errors.ts";
 * import { takeWriterLock } from "./writer_lock.ts";
 * const dir = await Deno.makeTempDir();
 * const lock = await takeWriterLock(dir);
 * await rejects(() => takeWriterLock(dir), LogLockedError);
 * lock.close();
 * (await takeWriterLock(dir)).close();
 * ```
 */
export async function takeWriterLock(dir: string): Promise<Deno.FsFile> {
  const lock = await Deno.open(join(dir, LOCK_FILE), { read: true, write: true, create: true });
  if (!(await lock.tryLock(true))) {
    const holder = new TextDecoder().decode(await Deno.readFile(join(dir, LOCK_FILE))).trim();
    lock.close();
    throw new LogLockedError(dir, holder);
  }
  return lock;
}
