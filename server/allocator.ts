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
 * import { throws } from "node:assert/strict";
 * import { pinMmapThreshold } from "./allocator.ts";
 * throws(() => pinMmapThreshold(1024), RangeError); // below one page
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

/** How often `serve` returns the free memory malloc holds to the system, seconds (0: never). */
export const DEFAULT_MALLOC_TRIM_EVERY_S = 60;

/**
 * Calls glibc's `malloc_trim(0)` every `seconds`, through FFI, on a thread
 * of the runtime's blocking pool (the event loop does not wait for it), and
 * `onTrim` with how long each call took, ms. Returns a function that stops
 * it, or null where it cannot run: `seconds` 0, off Linux, without the `ffi`
 * permission already granted (it never prompts), or where `libc.so.6` is
 * not glibc's. The timer does not keep the process alive.
 *
 * Why: each thread other than the main one allocates from a malloc arena of
 * its own, and an arena keeps the memory freed in it (only its top is ever
 * given back), so a long-running server's arenas hold their high-water mark
 * — measured at the end of a 90-minute cluster soak: 55 of a follower's
 * 82 MiB of malloc memory and 142 of a leader's 208 MiB were free chunks.
 * `malloc_trim(0)` returns the whole free pages inside every arena to the
 * system (`madvise`), so RSS follows what is in use.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { trimMallocEvery } from "./allocator.ts";
 * equal(trimMallocEvery(0), null); // never
 * const took: number[] = [];
 * const stop = trimMallocEvery(0.01, (ms) => took.push(ms));
 * if (stop !== null) { // Linux with glibc, FFI granted
 *   while (took.length < 2) await new Promise((r) => setTimeout(r, 10));
 *   stop();
 *   ok(took.every((ms) => ms >= 0));
 * }
 * ```
 */
export function trimMallocEvery(
  seconds: number,
  onTrim: (ms: number) => void = () => {},
): (() => void) | null {
  if (!Number.isFinite(seconds) || seconds < 0) {
    throw new RangeError(`malloc trim interval must be seconds >= 0, got ${seconds}`);
  }
  if (seconds === 0 || Deno.build.os !== "linux") return null;
  let lib: Deno.DynamicLibrary<{
    malloc_trim: { parameters: ["usize"]; result: "i32"; nonblocking: true };
  }>;
  try {
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return null;
    lib = Deno.dlopen("libc.so.6", {
      malloc_trim: { parameters: ["usize"], result: "i32", nonblocking: true },
    });
  } catch {
    return null; // not glibc
  }
  let stopped = false;
  let running: Promise<unknown> | null = null;
  const timer = setInterval(() => {
    if (running !== null) return; // the last one still runs
    const t0 = performance.now();
    running = lib.symbols.malloc_trim(0n).then(() => {
      running = null;
      if (stopped) lib.close();
      else onTrim(performance.now() - t0);
    });
  }, seconds * 1000);
  Deno.unrefTimer(timer);
  return () => {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    if (running === null) lib.close();
  };
}
