/**
 * The process's open-files limit (`RLIMIT_NOFILE`), and the connections it
 * leaves room for.
 *
 * Every accepted connection holds a descriptor, and so does every log file,
 * chunk, archive upload and cluster link. A process at its limit cannot
 * accept (EMFILE), nor open the next segment. So `serve` raises its soft
 * limit to the hard one at start, as Go programs (since 1.19) and nginx
 * (`worker_rlimit_nofile`) do — the soft limit is often 1024 for historical
 * reasons (`select`'s `FD_SETSIZE`), while the hard one is much higher — and
 * accepts no more connections than the limit leaves once a reserve is set
 * aside ({@linkcode connectionBound}).
 *
 * Deno's own executable raises the soft limit to the hard one as it starts;
 * `serve` does it again itself, so that it does not hang on the runtime.
 * Deno has no `setrlimit` API: this calls libc's `getrlimit`/`setrlimit` through
 * FFI (`struct rlimit` is two `rlim_t`, 64-bit on 64-bit Linux). Off Linux,
 * without the `ffi` permission, or without glibc, reading falls back to
 * `/proc/self/limits` and raising says why it cannot.
 *
 * @module
 */

/** Linux's `RLIMIT_NOFILE` resource number (x86_64 and aarch64). */
const RLIMIT_NOFILE = 7;
/** `RLIM_INFINITY`: no limit. */
const RLIM_INFINITY = 0xffff_ffff_ffff_ffffn;

/**
 * Descriptors set aside per stream beyond those open at start: its next
 * segment and index while the last ones close, chunks being sealed, merged
 * and read, an archive upload, its upstream, its cluster links.
 */
export const DESCRIPTORS_PER_STREAM = 8;
/** Descriptors set aside per replay reader (`maxReplayReaders`): a chunk and a segment open at once. */
export const DESCRIPTORS_PER_REPLAY_READER = 2;
/**
 * Descriptors set aside for connections that are not counted WebSockets:
 * plain requests (`/_/health`, `POST`, `/head`), upgrades being refused,
 * connections accepted and not yet answered.
 */
export const DESCRIPTORS_FOR_REQUESTS = 64;

/** A process's open-files limit: soft (what it may use now) and hard (up to what it may raise it). */
export interface OpenFilesLimit {
  /** The limit in force. */
  soft: number;
  /** The most the soft limit may be raised to without privileges. */
  hard: number;
}

type Libc = Deno.DynamicLibrary<{
  getrlimit: { parameters: ["i32", "buffer"]; result: "i32" };
  setrlimit: { parameters: ["i32", "buffer"]; result: "i32" };
}>;

// libc through FFI, or why it cannot be had.
function libc(): Libc | string {
  if (Deno.build.os !== "linux") return `not on Linux (${Deno.build.os})`;
  if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") {
    return "no permission to call libc (--allow-ffi)";
  }
  try {
    return Deno.dlopen("libc.so.6", {
      getrlimit: { parameters: ["i32", "buffer"], result: "i32" },
      setrlimit: { parameters: ["i32", "buffer"], result: "i32" },
    });
  } catch (err) {
    return `cannot load libc.so.6: ${err instanceof Error ? err.message : String(err)}`;
  }
}

// An rlim_t as a number (RLIM_INFINITY and anything past 2^53 as Infinity).
function fromRlim(v: bigint): number {
  return v === RLIM_INFINITY || v > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(v);
}

function getLimit(lib: Libc): OpenFilesLimit {
  const buf = new BigUint64Array(2);
  if (lib.symbols.getrlimit(RLIMIT_NOFILE, buf) !== 0) {
    throw new Error("getrlimit(RLIMIT_NOFILE) failed");
  }
  return { soft: fromRlim(buf[0]), hard: fromRlim(buf[1]) };
}

// "Max open files  1024  4096  files" in /proc/self/limits.
async function limitFromProc(): Promise<OpenFilesLimit | null> {
  try {
    const text = await Deno.readTextFile("/proc/self/limits");
    const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(text);
    if (!m) return null;
    const n = (s: string) => (s === "unlimited" ? Infinity : Number(s));
    return { soft: n(m[1]), hard: n(m[2]) };
  } catch {
    // No procfs (not Linux, or not mounted): the limit is unknown.
    return null;
  }
}

/**
 * This process's open-files limit, or null where it cannot be read (neither
 * libc through FFI nor `/proc/self/limits`).
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { openFilesLimit } from "./open_files.ts";
 * const limit = await openFilesLimit();
 * if (limit !== null) ok(limit.soft <= limit.hard);
 * ```
 */
export async function openFilesLimit(): Promise<OpenFilesLimit | null> {
  const lib = libc();
  if (typeof lib === "string") return await limitFromProc();
  try {
    return getLimit(lib);
  } finally {
    lib.close();
  }
}

/** What {@linkcode raiseOpenFilesLimit} did. */
export interface RaisedLimit {
  /** The limit before. */
  before: OpenFilesLimit;
  /** The limit now. */
  after: OpenFilesLimit;
}

/**
 * Raises this process's soft open-files limit to its hard limit (to
 * `/proc/sys/fs/nr_open` when the hard limit is infinite, since Linux caps it
 * there). Throws an `Error` saying why when it cannot: off Linux, without
 * the `ffi` permission (it never prompts), without glibc, or when
 * `setrlimit` refuses.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { raiseOpenFilesLimit } from "./open_files.ts";
 * try {
 *   const { after } = await raiseOpenFilesLimit();
 *   if (after.hard !== Infinity) equal(after.soft, after.hard);
 * } catch (err) {
 *   equal(err instanceof Error, true); // FFI unavailable: the reason
 * }
 * ```
 */
export async function raiseOpenFilesLimit(): Promise<RaisedLimit> {
  const lib = libc();
  if (typeof lib === "string") throw new Error(lib);
  try {
    const before = getLimit(lib);
    let target = before.hard;
    if (target === Infinity) {
      // Linux refuses an infinite RLIMIT_NOFILE; nr_open is the most it takes.
      target = Number((await Deno.readTextFile("/proc/sys/fs/nr_open")).trim());
    }
    if (before.soft >= target) return { before, after: before };
    const hard = before.hard === Infinity ? RLIM_INFINITY : BigInt(before.hard);
    if (lib.symbols.setrlimit(RLIMIT_NOFILE, new BigUint64Array([BigInt(target), hard])) !== 0) {
      throw new Error(`setrlimit(RLIMIT_NOFILE, ${target}) failed`);
    }
    return { before, after: getLimit(lib) };
  } finally {
    lib.close();
  }
}

/**
 * How many descriptors this process holds now (the entries of
 * `/proc/self/fd`, less the one reading them), or null where that cannot be
 * read.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { descriptorsInUse } from "./open_files.ts";
 * const n = await descriptorsInUse();
 * if (n !== null) ok(n >= 3); // stdin, stdout, stderr at least
 * ```
 */
export async function descriptorsInUse(): Promise<number | null> {
  try {
    let n = 0;
    for await (const _ of Deno.readDir("/proc/self/fd")) n++;
    return n - 1;
  } catch {
    // No procfs: unknown.
    return null;
  }
}

/** What {@linkcode connectionBound} counts. */
export interface DescriptorNeeds {
  /** The soft open-files limit in force. */
  softLimit: number;
  /** Descriptors open now (the logs, the listener, the runtime's own). */
  inUse: number;
  /** Streams served (durable or not, followed or a cluster's). */
  streams: number;
  /** Log reads in flight at once for catching-up subscribers (`maxReplayReaders`). */
  maxReplayReaders: number;
}

/** The connections a limit leaves room for, and the descriptors set aside. */
export interface ConnectionBound {
  /** WebSocket connections the server may hold at once (at least 1). */
  bound: number;
  /** Descriptors set aside for everything else. */
  reserve: number;
}

/**
 * The WebSocket connections an open-files limit leaves room for:
 *
 * ```text
 * reserve = in use now
 *         + 8 × streams               (DESCRIPTORS_PER_STREAM)
 *         + 2 × max replay readers    (DESCRIPTORS_PER_REPLAY_READER)
 *         + 64                        (DESCRIPTORS_FOR_REQUESTS)
 * bound   = soft limit − reserve      (at least 1)
 * ```
 *
 * An infinite limit leaves room for any number (`bound` is Infinity).
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { connectionBound } from "./open_files.ts";
 * deepEqual(
 *   connectionBound({ softLimit: 1024, inUse: 40, streams: 1, maxReplayReaders: 16 }),
 *   { bound: 1024 - (40 + 8 + 32 + 64), reserve: 144 },
 * );
 * ```
 */
export function connectionBound(needs: DescriptorNeeds): ConnectionBound {
  const reserve = needs.inUse + DESCRIPTORS_PER_STREAM * needs.streams +
    DESCRIPTORS_PER_REPLAY_READER * needs.maxReplayReaders + DESCRIPTORS_FOR_REQUESTS;
  return { bound: Math.max(1, needs.softLimit - reserve), reserve };
}

/**
 * The connection bound once the streams served differ from those counted at
 * start: each stream created since sets aside its descriptors too, each one
 * deleted gives them back. Infinity stays Infinity; never below 1.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { boundForStreams } from "./open_files.ts";
 * equal(boundForStreams(880, 1, 3), 880 - 2 * 8);
 * equal(boundForStreams(880, 3, 1), 880 + 2 * 8);
 * equal(boundForStreams(10, 1, 100), 1);
 * ```
 */
export function boundForStreams(bound: number, streamsAtStart: number, streamsNow: number): number {
  return Math.max(1, bound - DESCRIPTORS_PER_STREAM * (streamsNow - streamsAtStart));
}
