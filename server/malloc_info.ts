/**
 * glibc malloc's own account of its memory (`mallinfo2`), for the process's
 * metrics: how much of the native memory it holds is in use and how much is
 * free but still held (fragmentation, or memory a thread's arena keeps after
 * a peak) — which RSS alone cannot tell apart.
 *
 * @module
 */

/** What `mallinfo2` says, bytes, summed over every arena. */
export interface MallocInfo {
  /** Held from the system by the arenas (the main heap and the other threads' arenas). */
  arenas: number;
  /** Allocated and not freed, in the arenas. */
  inUse: number;
  /** Free chunks the arenas still hold. */
  free: number;
  /** Allocations served by their own mmap (at or above the mmap threshold). */
  mmapped: number;
}

// mallinfo2's struct: ten size_t fields (arena, ordblks, smblks, hblks, hblkhd,
// usmblks, fsmblks, uordblks, fordblks, keepcost); the indexes of those read.
const FIELDS = 10;
const ARENA = 0;
const HBLKHD = 4;
const UORDBLKS = 7;
const FORDBLKS = 8;

const SYMBOLS = {
  mallinfo2: { parameters: [], result: { struct: Array<"usize">(FIELDS).fill("usize") } },
} as const;
let libc: Deno.DynamicLibrary<typeof SYMBOLS> | null | undefined;

// libc, opened once (null: not to be had here).
function open(): Deno.DynamicLibrary<typeof SYMBOLS> | null {
  if (libc !== undefined) return libc;
  libc = null;
  if (Deno.build.os !== "linux") return null;
  try {
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return null;
    libc = Deno.dlopen("libc.so.6", SYMBOLS);
  } catch {
    // Not glibc, or a glibc older than 2.33 (no mallinfo2): nothing to say.
    libc = null;
  }
  return libc;
}

/**
 * glibc malloc's totals now, or null off Linux, without the `ffi`
 * permission already granted (it never prompts), or where `libc.so.6` has
 * no `mallinfo2` (not glibc, or glibc before 2.33). Each call walks every
 * arena's free lists under its lock: cheap at a metrics scrape, not for a
 * hot path.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { mallocInfo } from "./malloc_info.ts";
 * const m = mallocInfo();
 * // On Linux with glibc and FFI granted: something is in use, within what the arenas hold.
 * if (m !== null) ok(m.inUse > 0 && m.inUse + m.free <= m.arenas);
 * ```
 */
export function mallocInfo(): MallocInfo | null {
  const lib = open();
  if (lib === null) return null;
  const r = lib.symbols.mallinfo2();
  const v = new BigUint64Array(r.buffer, r.byteOffset, FIELDS);
  const n = (i: number) => Number(v[i]);
  return { arenas: n(ARENA), inUse: n(UORDBLKS), free: n(FORDBLKS), mmapped: n(HBLKHD) };
}
