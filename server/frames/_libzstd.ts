// The system's libzstd through Deno's FFI, for compressed frames with a
// dictionary (compress=zstd-dict, docs/SPEC.md §2.6): Deno 2.9's node:zlib ignores
// the `dictionary` option of its zstd functions, so a dictionary needs this.
// Private to server/. Loaded on first use; null where it cannot be (no
// --allow-ffi, or no libzstd on the machine): the server then offers no
// dictionary and serves plain compress=zstd frames.

const SYMBOLS = {
  ZSTD_createCCtx: { parameters: [], result: "pointer" },
  ZSTD_freeCCtx: { parameters: ["pointer"], result: "usize" },
  ZSTD_createCDict: { parameters: ["buffer", "usize", "i32"], result: "pointer" },
  ZSTD_freeCDict: { parameters: ["pointer"], result: "usize" },
  ZSTD_CCtx_setParameter: { parameters: ["pointer", "i32", "i32"], result: "usize" },
  ZSTD_CCtx_refCDict: { parameters: ["pointer", "pointer"], result: "usize" },
  ZSTD_compress2: {
    parameters: ["pointer", "buffer", "usize", "buffer", "usize"],
    result: "usize",
  },
  ZSTD_compressBound: { parameters: ["usize"], result: "usize" },
  // Streaming (compress=zstd-stream): the two buffer arguments are
  // ZSTD_outBuffer / ZSTD_inBuffer structs ({pointer, size, pos}, 3 × 64 bits).
  ZSTD_compressStream2: { parameters: ["pointer", "buffer", "buffer", "i32"], result: "usize" },
  ZSTD_CCtx_reset: { parameters: ["pointer", "i32"], result: "usize" },
  ZSTD_sizeof_CCtx: { parameters: ["pointer"], result: "usize" },
  ZSTD_isError: { parameters: ["usize"], result: "u32" },
  ZSTD_getErrorName: { parameters: ["usize"], result: "pointer" },
} as const;

type Lib = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

/** libzstd's functions, as loaded through FFI. */
export type Libzstd = Lib;

const NAMES = ["libzstd.so.1", "libzstd.so", "libzstd.1.dylib", "libzstd.dylib", "zstd.dll"];
const C_LEVEL = 100; // ZSTD_c_compressionLevel
const C_CHECKSUM = 201; // ZSTD_c_checksumFlag
const C_DICT_ID = 202; // ZSTD_c_dictIDFlag

let lib: Lib | null | undefined;
let problem: string | null = null;

/** Why libzstd could not be loaded, once tried (null: loaded, or not tried yet). */
export function libzstdProblem(): string | null {
  return problem;
}

/** libzstd, loaded on first use; null where it cannot be ({@linkcode libzstdProblem} says why). */
export function loadLibzstd(): Lib | null {
  return load();
}

function load(): Lib | null {
  if (lib !== undefined) return lib;
  lib = null;
  const g = globalThis as { Deno?: { dlopen?: unknown } };
  if (typeof g.Deno?.dlopen !== "function") {
    problem = "no Deno.dlopen in this runtime";
    return null;
  }
  for (const name of NAMES) {
    try {
      lib = Deno.dlopen(name, SYMBOLS).symbols;
      return lib;
    } catch (err) {
      problem = err instanceof Error ? err.message : String(err);
      if (err instanceof Deno.errors.NotCapable || err instanceof Deno.errors.PermissionDenied) {
        return null; // No --allow-ffi: every name would fail alike.
      }
    }
  }
  return null;
}

/** A compressor bound to one dictionary: frames with a checksum and the content size. */
export interface DictCompressor {
  /** One zstd frame of `src`, using the dictionary. */
  compress(src: Uint8Array): Uint8Array;
}

/**
 * A compressor of zstd frames with `dict` as a raw-content dictionary at
 * `level`, or null when libzstd cannot be loaded here.
 */
export function dictCompressor(dict: Uint8Array, level: number): DictCompressor | null {
  const z = load();
  if (z === null) return null;
  const cctx = z.ZSTD_createCCtx();
  const cdict = z.ZSTD_createCDict(dict, BigInt(dict.length), level);
  if (cctx === null || cdict === null) throw new Error("libzstd: out of memory");
  const check = (r: number | bigint, what: string): number => {
    if (z.ZSTD_isError(r as bigint)) {
      const p = z.ZSTD_getErrorName(r as bigint);
      const msg = p ? Deno.UnsafePointerView.getCString(p) : String(r);
      throw new Error(`libzstd ${what}: ${msg}`);
    }
    return Number(r);
  };
  check(z.ZSTD_CCtx_setParameter(cctx, C_LEVEL, level), "level");
  check(z.ZSTD_CCtx_setParameter(cctx, C_CHECKSUM, 1), "checksum");
  check(z.ZSTD_CCtx_setParameter(cctx, C_DICT_ID, 0), "dictID");
  check(z.ZSTD_CCtx_refCDict(cctx, cdict), "refCDict");
  let out = new Uint8Array(64 * 1024);
  return {
    compress(src: Uint8Array): Uint8Array {
      const bound = Number(z.ZSTD_compressBound(BigInt(src.length)));
      if (bound > out.length) out = new Uint8Array(bound);
      const n = check(
        z.ZSTD_compress2(cctx, out, BigInt(out.length), src, BigInt(src.length)),
        "compress",
      );
      return out.slice(0, n);
    },
  };
}
