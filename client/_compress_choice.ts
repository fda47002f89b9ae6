// compress= (docs/SPEC.md §2.6): what a subscription asks for and how it
// decodes, and how it falls back when a server refuses: zstd-dict, then
// zstd, then text frames from then on (by default only; an explicit
// compress: "zstd" keeps the refusal). Private to client/.

import { isCompressRefusal, type ZstdDecompress } from "./_zstd.ts";
import { type DictDecompress, fetchDictionary } from "./_zstd_dict.ts";
import type { DictionaryDecoding } from "./_connection.ts";
import type { Compression } from "./wire.ts";
import type { ProtocolError } from "./errors.ts";

/** The compression state of one subscription. */
export class CompressChoice {
  #zstd: ZstdDecompress | null;
  #dict: DictionaryDecoding | null;
  readonly #fallBack: boolean;

  constructor(
    opts: {
      _zstd?: ZstdDecompress | null;
      _zstdDict?: DictDecompress | null;
      _zstdDefault?: boolean;
      token?: string;
    },
    /** The stream's URL on the node connected to (dictionaries come from there). */
    url: () => string,
  ) {
    this.#zstd = opts._zstd ?? null;
    this.#fallBack = opts._zstdDefault ?? false;
    const decompress = this.#zstd ? opts._zstdDict ?? null : null;
    const token = opts.token;
    const headers = token === undefined ? undefined : { authorization: `Bearer ${token}` };
    this.#dict = decompress && {
      decompress,
      load: (id: string) => fetchDictionary(url(), id, headers),
    };
  }

  /** The `compress=` value to send, or null. */
  get query(): Compression | null {
    return this.#dict ? "zstd-dict" : this.#zstd ? "zstd" : null;
  }

  /** The decoder of zstd frames, or null (text frames). */
  get zstd(): ZstdDecompress | null {
    return this.#zstd;
  }

  /** The dictionary decoding, or null. */
  get dict(): DictionaryDecoding | null {
    return this.#dict;
  }

  /** After a refused open: whether to ask again, with less. */
  fallBack(err: unknown): boolean {
    if (!(this.#zstd && this.#fallBack && isCompressRefusal(err))) return false;
    // A server that knows compress=zstd but not zstd-dict names the value.
    if (this.#dict && (err as ProtocolError).detail.includes("got zstd-dict")) this.#dict = null;
    else this.#zstd = this.#dict = null;
    return true;
  }
}
