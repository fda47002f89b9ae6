/**
 * The zstd codec for Arrow IPC: importing this module registers `node:zlib`'s
 * zstd with apache-arrow's `compressionRegistry`, so zstd-compressed IPC (the
 * buffers of an exported Arrow file) can be written and read.
 *
 * @module
 */

import zlib from "node:zlib";
import { compressionRegistry, CompressionType } from "apache-arrow";

let zstdRegistered = false;

/**
 * Registers zstd (`node:zlib` `zstdCompressSync`/`zstdDecompressSync`) with
 * apache-arrow's `compressionRegistry`. Idempotent; this module calls it when
 * it is first imported, so callers only need it to make the dependency plain.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { compressionRegistry, CompressionType } from "apache-arrow";
 * import { registerZstd } from "./zstd.ts";
 * registerZstd();
 * ok(compressionRegistry.get(CompressionType.ZSTD) !== null);
 * ```
 */
export function registerZstd(): void {
  if (zstdRegistered) return;
  compressionRegistry.set(CompressionType.ZSTD, {
    encode: (data: Uint8Array): Uint8Array => zlib.zstdCompressSync(data),
    decode: (data: Uint8Array): Uint8Array => zlib.zstdDecompressSync(data),
  });
  zstdRegistered = true;
}
registerZstd();
