/**
 * One writer per log on a host: the lock file `LOCK` in the log folder,
 * held with `flock` (exclusive) for as long as the writer has the log —
 * `Log.open` for an open log, `truncateLog` while it cuts a closed one. The
 * file says which process holds it, for the error another one gets.
 *
 * @module
 */

import { join } from "node:path";
import { writeAll } from "../common/write_all.ts";
import { LogLockedError } from "./errors.ts";
import { META_FILE } from "./log_meta.ts";

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

/**
 * Takes the log folder `dir` for a writer that opens it: makes the folder
 * (with `create`; else refuses a folder holding no log), takes the writer's
 * lock and writes this process's id in it.
 *
 * @throws {Deno.errors.NotFound} without `create`, when `dir` holds no log.
 * @throws {LogLockedError} naming the holder when another writer has it.
 *
 * @example
 * ```ts
 * import { rejects } from "node:assert/strict";
 * import { claimLogFolder } from "./writer_lock.ts";
 * const dir = `${await Deno.makeTempDir()}/trades`;
 * await rejects(() => claimLogFolder(dir, false), Deno.errors.NotFound);
 * (await claimLogFolder(dir, true)).close();
 * ```
 */
export async function claimLogFolder(dir: string, create: boolean): Promise<Deno.FsFile> {
  if (create) await Deno.mkdir(dir, { recursive: true });
  else {
    try {
      await Deno.stat(join(dir, META_FILE));
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) {
        throw new Deno.errors.NotFound(`no log in ${dir} (${META_FILE} is missing)`);
      }
      throw err;
    }
  }
  const lock = await takeWriterLock(dir);
  try {
    await lock.truncate(0);
    await writeAll(lock, new TextEncoder().encode(`pid ${Deno.pid}\n`));
  } catch (err) {
    lock.close();
    throw err;
  }
  return lock;
}
