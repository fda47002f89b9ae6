// compress= (docs/SPEC.md §2.6, §2.6.1): what a subscription asks for and
// how it decodes, and how it falls back when a server refuses: zstd-stream,
// then zstd-dict, then zstd, then text frames from then on (by default only;
// an explicit compress keeps the refusal). Private to client/.

import { isCompressRefusal, type ZstdDecompress } from "./_zstd.ts";
import { type DictDecompress, fetchDictionary } from "./_zstd_dict.ts";
import { fzstdWhole } from "./_zstd_stream.ts";
import type { DictionaryDecoding } from "./_connection.ts";
import type { Compression } from "../wire/subscribe.ts";
import type { ProtocolError } from "./errors.ts";

/** The compression state of one subscription. */
export class CompressChoice {
  #zstd: ZstdDecompress | null;
  #dict: DictionaryDecoding | null;
  #stream: boolean;
  readonly #fallBack: boolean;

  constructor(
    opts: {
      _zstd?: ZstdDecompress | null;
      _zstdDict?: DictDecompress | null;
      _zstdDefault?: boolean;
      _zstdStream?: boolean;
    },
    /** The token of the latest connect (the dictionaries' requests send it). */
    token: () => string | undefined,
    /** The stream's URL on the node connected to (dictionaries come from there). */
    url: () => string,
  ) {
    this.#zstd = opts._zstd ?? null;
    this.#stream = opts._zstdStream ?? false;
    this.#fallBack = opts._zstdDefault ?? false;
    const decompress = this.#zstd ? opts._zstdDict ?? null : null;
    this.#dict = decompress && {
      decompress,
      load: (id: string) => {
        const t = token();
        return fetchDictionary(
          url(),
          id,
          t === undefined ? undefined : { authorization: `Bearer ${t}` },
        );
      },
    };
  }

  /** The `compress=` value to send, or null. */
  get query(): Compression | null {
    return this.#stream ? "zstd-stream" : this.#dict ? "zstd-dict" : this.#zstd ? "zstd" : null;
  }

  /**
   * The decoder of whole zstd frames, or null (text frames): node:zlib's where
   * the runtime has it; while zstd-stream is asked for, fzstd's otherwise (a
   * server without libzstd answers zstd-stream with plain zstd frames).
   */
  get zstd(): ZstdDecompress | null {
    return this.#zstd ?? (this.#stream ? fzstdWhole : null);
  }

  /** The dictionary decoding, or null. */
  get dict(): DictionaryDecoding | null {
    return this.#dict;
  }

  /** Whether compress=zstd-stream is asked for. */
  get stream(): boolean {
    return this.#stream;
  }

  /** After a refused open: whether to ask again, with less. */
  fallBack(err: unknown): boolean {
    if (!(this.query !== null && this.#fallBack && isCompressRefusal(err))) return false;
    // A server that knows compress= but not this value names the value.
    const detail = (err as ProtocolError).detail;
    if (this.#stream && detail.includes("got zstd-stream")) this.#stream = false;
    else if (this.#dict && detail.includes("got zstd-dict")) this.#dict = null;
    else {
      this.#stream = false;
      this.#zstd = this.#dict = null;
    }
    return true;
  }
}
