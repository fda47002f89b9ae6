// compress=zstd-dict (docs/SPEC.md §2.6): frames compressed with the
// stream's raw-content dictionary. The decoder is @bokuweb/zstd-wasm (the
// zstd library as WebAssembly; node:zlib's zstd takes no dictionary in
// Deno 2.9), loaded only when a subscription asks for it; the dictionary is
// fetched once per id from /{name}/dictionaries/{id} and checked against its
// id (a SHA-256 prefix). Private to client/. Browser-safe at module load.

import { headUrl } from "./head.ts";

/** Decompresses one zstd frame made with `dict` (throws on corrupt data). */
export type DictDecompress = (bytes: Uint8Array, dict: Uint8Array) => Uint8Array;

let loaded: Promise<DictDecompress | null> | null = null;

/**
 * The WebAssembly zstd decoder with dictionaries, where it loads (Deno and
 * Node, with read access to the package); null elsewhere (a browser, whose
 * bundle ships no decoder, or no permission).
 */
export function loadDictZstd(): Promise<DictDecompress | null> {
  return loaded ??= (async () => {
    const g = globalThis as { Deno?: unknown; process?: unknown };
    if (g.Deno === undefined && g.process === undefined) return null;
    // A specifier the bundler cannot see: the browser bundle must not pull it in.
    const spec = "@bokuweb/zstd-wasm";
    try {
      const m = await import(spec);
      await m.init();
      const dctx = m.createDCtx();
      return (bytes: Uint8Array, dict: Uint8Array) => {
        try {
          return m.decompressUsingDict(dctx, bytes, dict) as Uint8Array;
        } catch (err) {
          // Its messages say "Failed to compress with code N" for any failure.
          const code = /code (-?\d+)/.exec(String(err))?.[1];
          throw new Error(`the frame does not decode with the dictionary (zstd error ${code})`);
        }
      };
    } catch {
      return null;
    }
  })();
}

const cache = new Map<string, Promise<Uint8Array>>();

/**
 * The dictionary `id` of the stream at `url`, fetched once per id (and
 * fetched again after a failure); rejects unless the bytes' SHA-256 starts
 * with `id`.
 */
export function fetchDictionary(
  url: string,
  id: string,
  headers: HeadersInit | undefined,
): Promise<Uint8Array> {
  if (!/^[0-9a-f]{32}$/.test(id)) {
    return Promise.reject(new Error(`the greeting's dictionary is not 32 hex digits: ${id}`));
  }
  let p = cache.get(id);
  if (!p) {
    const at = headUrl(url).replace(/\/head$/, `/dictionaries/${id}`);
    p = (async () => {
      const res = await fetch(at, { headers });
      if (!res.ok) {
        await res.body?.cancel();
        throw new Error(`GET ${at} answered ${res.status}`);
      }
      const bytes = new Uint8Array(await res.arrayBuffer());
      const sha = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
      const hex = Array.from(sha, (b) => b.toString(16).padStart(2, "0")).join("");
      if (!hex.startsWith(id)) throw new Error(`GET ${at}: the bytes' SHA-256 is ${hex}`);
      return bytes;
    })();
    cache.set(id, p);
    p.catch(() => cache.delete(id));
  }
  return p;
}
