/**
 * One writer per log on a host: the lock file `LOCK` in the log folder,
 * held with `flock` (exclusive) for as long as the writer has the log —
 * `Log.open` for an open log, `truncateLog` while it cuts a closed one. The
 * file says which process holds it, for the error another one gets.
 *
 * @module
 */

import { join } from "node:path";
import { writeAll } from "../../common/write_all.ts";
import { LogLockedError } from "../errors.ts";
import { META_FILE } from "../log_meta.ts";

/** The name of the lock file in a log folder. */
export const LOCK_FILE = "LOCK";

/**
 * How long a lock that this process's id holds, but no log of this isolate,
 * is tried again before it is refused, ms. Closing the lock file releases
 * the lock only once every copy of its descriptor is closed, and a child
 * process that another thread of this process is starting holds a copy from
 * its fork until its exec: reopening a log right after closing it can find
 * the lock held for that moment. Another isolate of this process (a worker,
 * a test module beside this one) that really holds the log is refused after
 * this wait.
 */
export const SELF_HELD_WAIT_MS = 2000;

// The log folders whose lock this isolate holds (their real paths): a second
// writer in the same isolate is refused at once.
const held = new Set<string>();

/**
 * The writer's lock of one log, held until {@linkcode WriterLock.close}.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { takeWriterLock } from "./writer_lock.ts";
 * const dir = await Deno.makeTempDir();
 * const lock = await takeWriterLock(dir);
 * equal(lock.closed, false);
 * lock.close();
 * equal(lock.closed, true);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class WriterLock {
  #file: Deno.FsFile | null;
  readonly #key: string;

  constructor(file: Deno.FsFile, key: string) {
    this.#file = file;
    this.#key = key;
    held.add(key);
  }

  /** The lock file, open (for the holder's id); throws once closed. */
  get file(): Deno.FsFile {
    if (this.#file === null) throw new Deno.errors.BadResource(`lock ${this.#key} is closed`);
    return this.#file;
  }

  /** Whether the lock is released. */
  get closed(): boolean {
    return this.#file === null;
  }

  /** Releases the lock; a second call does nothing. */
  close(): void {
    if (this.#file === null) return;
    held.delete(this.#key);
    const file = this.#file;
    this.#file = null;
    file.close();
  }
}

/**
 * Takes the writer's lock of the log in `dir` (the folder exists); the
 * caller closes it to release it.
 *
 * @throws {LogLockedError} naming the holder when another writer has it.
 *
 * @example
 * ```ts
 * import { rejects } from "node:assert/strict";
 * import { LogLockedError } from "../errors.ts";
 * import { takeWriterLock } from "./writer_lock.ts";
 * const dir = await Deno.makeTempDir();
 * const lock = await takeWriterLock(dir);
 * await rejects(() => takeWriterLock(dir), LogLockedError);
 * lock.close();
 * (await takeWriterLock(dir)).close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function takeWriterLock(dir: string): Promise<WriterLock> {
  const key = await Deno.realPath(dir);
  const path = join(dir, LOCK_FILE);
  const holderOf = async () => new TextDecoder().decode(await Deno.readFile(path)).trim();
  if (held.has(key)) throw new LogLockedError(dir, await holderOf());
  const lock = await Deno.open(path, { read: true, write: true, create: true });
  try {
    const deadline = performance.now() + SELF_HELD_WAIT_MS;
    while (!(await lock.tryLock(true))) {
      const holder = await holderOf();
      if (holder !== `pid ${Deno.pid}` || held.has(key) || performance.now() >= deadline) {
        throw new LogLockedError(dir, holder);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  } catch (err) {
    lock.close();
    throw err;
  }
  return new WriterLock(lock, key);
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
 * const tmp = await Deno.makeTempDir();
 * const dir = `${tmp}/trades`;
 * await rejects(() => claimLogFolder(dir, false), Deno.errors.NotFound);
 * (await claimLogFolder(dir, true)).close();
 * await Deno.remove(tmp, { recursive: true });
 * ```
 */
export async function claimLogFolder(dir: string, create: boolean): Promise<WriterLock> {
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
    await lock.file.truncate(0);
    await writeAll(lock.file, new TextEncoder().encode(`pid ${Deno.pid}\n`));
  } catch (err) {
    lock.close();
    throw err;
  }
  return lock;
}
