/**
 * The small filesystem helpers every part of the log uses: durable renames
 * and existence checks.
 *
 * @module
 */

export { syncDir, writeFileAtomic } from "./atomic_write.ts";

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
