/**
 * The log's I/O seam: every call by which the log and its chunk worker change
 * what is on disk — opening a file for writing, writing, syncing, cutting,
 * renaming, removing, syncing a folder — goes through one {@linkcode LogIo}.
 * Reads do not: they cannot change what a crash leaves.
 *
 * The real one ({@linkcode REAL_IO}) calls Deno. A test gives the log
 * another to see every write and sync in order, to fail one (a full disk, an
 * I/O error), or to compute what a crash at any of them would leave on disk.
 *
 * @module
 */

/**
 * How the log changes what is on disk (see the module doc).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { type LogIo, REAL_IO } from "./io.ts";
 * let syncs = 0;
 * const counting: LogIo = { ...REAL_IO, syncData: (f) => (syncs++, REAL_IO.syncData(f)) };
 * const path = await Deno.makeTempFile();
 * const f = await counting.open(path, { write: true });
 * await counting.write(f, new Uint8Array([1, 2, 3]));
 * await counting.syncData(f);
 * f.close();
 * equal(syncs, 1);
 * await Deno.remove(path);
 * ```
 */
export interface LogIo {
  /** Opens `path` with `options`, for a file the log writes (or may write). */
  open(path: string, options: Deno.OpenOptions): Promise<Deno.FsFile>;
  /** Writes all of `bytes` at the file's position (a failure may leave part of them written). */
  write(file: Deno.FsFile, bytes: Uint8Array): Promise<void>;
  /** Flushes the file's data (and its size) to disk. */
  syncData(file: Deno.FsFile): Promise<void>;
  /** Cuts the file to `length` bytes (not synced). */
  truncate(file: Deno.FsFile, length: number): Promise<void>;
  /** Renames `from` to `to`, replacing `to` (durable once the folder is synced). */
  rename(from: string, to: string): Promise<void>;
  /** Removes the file `path` (durable once the folder is synced). */
  remove(path: string): Promise<void>;
  /** Makes the folder `path` and its parents. */
  mkdir(path: string): Promise<void>;
  /** Flushes the folder `dir`'s entries to disk: creates, renames and removes in it. */
  syncDir(dir: string): Promise<void>;
}

/**
 * fsync a directory so that a create, rename or remove in it is durable.
 *
 * @example
 * ```ts
 * import { syncDir } from "./io.ts";
 * const dir = await Deno.makeTempDir();
 * await syncDir(dir);
 * await Deno.remove(dir, { recursive: true });
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
 * The real filesystem. The write is synchronous: it only copies into the OS's
 * page cache (microseconds), while an async write pays a thread hand-off
 * that, measured, left the committer idle most of the time; the syncs, which
 * wait on the disk, stay asynchronous.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { REAL_IO } from "./io.ts";
 * const path = await Deno.makeTempFile();
 * const file = await REAL_IO.open(path, { write: true });
 * await REAL_IO.write(file, new TextEncoder().encode("xy"));
 * await REAL_IO.truncate(file, 1);
 * await REAL_IO.syncData(file);
 * file.close();
 * equal(await Deno.readTextFile(path), "x");
 * await Deno.remove(path);
 * ```
 */
export const REAL_IO: LogIo = {
  open: (path, options) => Deno.open(path, options),
  write: (file, bytes) => {
    let done = 0;
    while (done < bytes.length) done += file.writeSync(bytes.subarray(done));
    return Promise.resolve();
  },
  syncData: (file) => file.syncData(),
  truncate: (file, length) => file.truncate(length),
  rename: (from, to) => Deno.rename(from, to),
  remove: (path) => Deno.remove(path),
  mkdir: (path) => Deno.mkdir(path, { recursive: true }),
  syncDir,
};
