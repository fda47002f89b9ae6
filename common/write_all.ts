/**
 * Whole writes to a file: `FsFile.write` may write fewer bytes than asked.
 *
 * @module
 */

/**
 * Writes all of `bytes` at the file's position.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { writeAll } from "./write_all.ts";
 * const path = await Deno.makeTempFile();
 * const f = await Deno.open(path, { write: true });
 * await writeAll(f, new TextEncoder().encode("hello"));
 * f.close();
 * equal(await Deno.readTextFile(path), "hello");
 * await Deno.remove(path);
 * ```
 */
export async function writeAll(f: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  let done = 0;
  while (done < bytes.length) done += await f.write(bytes.subarray(done));
}
