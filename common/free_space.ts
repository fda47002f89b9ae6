/**
 * Free space on the filesystem holding a path, as an unprivileged process
 * may use it (`f_bavail × f_frsize`: what `df` shows as available).
 *
 * Deno has no `statvfs`. On Linux (x86-64 and arm64, whose glibc and musl
 * lay `struct statvfs` out alike: 64-bit fields, `f_frsize` at byte 8,
 * `f_bavail` at byte 32) it is called through FFI on a thread of the
 * runtime's blocking pool, so a slow filesystem never stalls the event
 * loop: one system call, no process. Elsewhere, or without the `ffi`
 * permission, `df -P -k PATH` is run instead (with the `run` permission);
 * without either, free space is unknown (null) and only a failed write
 * tells of a full disk.
 *
 * @module
 */

// sizeof(struct statvfs) on 64-bit Linux: 11 longs and 6 ints of padding.
const STATVFS_BYTES = 112;

type StatvfsLib = Deno.DynamicLibrary<{
  statvfs: { parameters: ["buffer", "buffer"]; result: "i32"; nonblocking: true };
}>;

let lib: StatvfsLib | null | undefined;

function statvfsLib(): StatvfsLib | null {
  if (lib !== undefined) return lib;
  lib = null;
  if (Deno.build.os !== "linux" || !["x86_64", "aarch64"].includes(Deno.build.arch)) return lib;
  try {
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return lib;
    for (const name of ["libc.so.6", "libc.so"]) {
      try {
        lib = Deno.dlopen(name, {
          statvfs: { parameters: ["buffer", "buffer"], result: "i32", nonblocking: true },
        });
        break;
      } catch {
        // Not this name: the next one.
      }
    }
  } catch {
    // FFI refused: df, or nothing.
  }
  return lib;
}

async function viaStatvfs(l: StatvfsLib, path: string): Promise<number | null> {
  const buf = new Uint8Array(STATVFS_BYTES);
  const rc = await l.symbols.statvfs(new TextEncoder().encode(path + "\0"), buf);
  if (rc !== 0) return null;
  const v = new DataView(buf.buffer);
  return Number(v.getBigUint64(32, true) * v.getBigUint64(8, true));
}

async function viaDf(path: string): Promise<number | null> {
  try {
    if (Deno.permissions.querySync({ name: "run", command: "df" }).state !== "granted") {
      return null;
    }
    const out = await new Deno.Command("df", {
      args: ["-P", "-k", path],
      stdout: "piped",
      stderr: "null",
    })
      .output();
    if (!out.success) return null;
    // "Filesystem 1024-blocks Used Available Capacity Mounted on", then one line.
    const line = new TextDecoder().decode(out.stdout).trim().split("\n").at(-1) ?? "";
    const avail = Number(line.split(/\s+/)[3]);
    return Number.isFinite(avail) ? avail * 1024 : null;
  } catch {
    return null; // no df here
  }
}

/**
 * Bytes free for this process on the filesystem holding `path` (see the
 * module doc), or null when that cannot be known here.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { freeBytes } from "./free_space.ts";
 * const dir = await Deno.makeTempDir();
 * const free = await freeBytes(dir);
 * ok(free === null || free >= 0);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function freeBytes(path: string): Promise<number | null> {
  const l = statvfsLib();
  if (l !== null) {
    const n = await viaStatvfs(l, path);
    if (n !== null) return n;
  }
  return await viaDf(path);
}

/**
 * Whether `err` (or its cause) is the system's "no space left" (ENOSPC) or
 * "quota exceeded" (EDQUOT).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { isNoSpace } from "./free_space.ts";
 * const err = Object.assign(new Error("No space left on device (os error 28)"), { code: "ENOSPC" });
 * equal(isNoSpace(new Error("append failed", { cause: err })), true);
 * equal(isNoSpace(new Error("bad")), false);
 * ```
 */
export function isNoSpace(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (code === "ENOSPC" || code === "EDQUOT") return true;
    if (/\(os error (28|122)\)/.test(e.message)) return true;
  }
  return false;
}
