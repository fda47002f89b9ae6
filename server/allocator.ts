/**
 * Pinning glibc's mmap threshold, so that a long-running server's RSS stays
 * near what it uses.
 *
 * Why: glibc serves an allocation of at least `M_MMAP_THRESHOLD` (128 KiB at
 * start) with its own mmap, returned to the system on free — but each such
 * free raises the threshold to the size freed (up to 32 MiB). The server
 * makes big short-lived native allocations all the time: a zstd decompressor
 * per chunk a catching-up subscriber opens (2.4 MB), a zstd compressor per
 * seal and merge in the chunk worker (3.6 MB), WebSocket send copies and read
 * buffers of 64 KiB–1 MiB. Once the threshold has climbed past them they come
 * from the main heap instead, which they fragment, and RSS climbs for minutes
 * and stays up (a soak: the main heap 22 → 75–120 MiB while the JavaScript
 * heap stayed flat). `mallopt(M_MMAP_THRESHOLD, n)` fixes the threshold (and
 * turns the climbing off). The same as running with the environment variable
 * `MALLOC_MMAP_THRESHOLD_=65536`.
 *
 * @module
 */

/** glibc's `M_MMAP_THRESHOLD` parameter of `mallopt`. */
const M_MMAP_THRESHOLD = -3;

/** The threshold pinned by default (64 KiB): the read buffers of 64 KiB are returned too. */
export const DEFAULT_MMAP_THRESHOLD_BYTES = 64 * 1024;

/**
 * Pins glibc's mmap threshold at `bytes` for this process, through FFI
 * (`mallopt`). Does nothing, and returns false, off Linux, without the `ffi`
 * permission already granted (it never prompts), where `libc.so.6` is not
 * glibc's, or when `MALLOC_MMAP_THRESHOLD_` is set in the environment (the
 * operator's choice wins). Returns true once pinned.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { pinMmapThreshold } from "./allocator.ts";
 * equal(typeof pinMmapThreshold(), "boolean");
 * ```
 */
export function pinMmapThreshold(bytes: number = DEFAULT_MMAP_THRESHOLD_BYTES): boolean {
  if (!Number.isSafeInteger(bytes) || bytes < 4096 || bytes > 32 << 20) {
    throw new RangeError(`mmap threshold must be an integer 4096..33554432, got ${bytes}`);
  }
  if (Deno.build.os !== "linux") return false;
  try {
    if (
      Deno.permissions.querySync({ name: "env", variable: "MALLOC_MMAP_THRESHOLD_" }).state ===
        "granted" &&
      Deno.env.get("MALLOC_MMAP_THRESHOLD_") !== undefined
    ) return false;
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return false;
    const lib = Deno.dlopen("libc.so.6", {
      mallopt: { parameters: ["i32", "i32"], result: "i32" },
    });
    try {
      return lib.symbols.mallopt(M_MMAP_THRESHOLD, bytes) === 1;
    } finally {
      lib.close();
    }
  } catch {
    // Not glibc, or FFI refused: the allocator keeps its own ways.
    return false;
  }
}
