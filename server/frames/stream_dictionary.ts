/**
 * A stream's zstd dictionary for `compress=zstd-dict` (docs/SPEC.md §2.6): built from
 * its log's last rows on first use, one per server run, so that every
 * subscriber greeted with it can fetch it for as long as it is connected.
 *
 * @module
 */

import type { Logger } from "../../common/logger.ts";
import type { Log } from "../../log/mod.ts";
import { buildLogDictionary, dictionaryProblem, type FrameDictionary } from "./frame_dictionary.ts";

/**
 * The dictionary of one stream: null on an ephemeral stream, while the log
 * holds too few rows, or without libzstd (then a warning, once).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Logger } from "../../common/logger.ts";
 * import { StreamDictionary } from "./stream_dictionary.ts";
 * const d = new StreamDictionary("t", null);
 * equal(await d.get(new Logger({ level: "error" })), null); // an ephemeral stream has no dictionary
 * equal(d.byId("00"), null);
 * ```
 */
export class StreamDictionary {
  #name: string;
  #log: Log | null;
  #dict: FrameDictionary | null = null;
  #building: Promise<FrameDictionary | null> | null = null;
  #warned = false;

  /** The dictionary of stream `name`, built from `log` (null: ephemeral, none). */
  constructor(name: string, log: Log | null) {
    this.#name = name;
    this.#log = log;
  }

  /** The dictionary once built (null before). */
  get current(): FrameDictionary | null {
    return this.#dict;
  }

  /**
   * The dictionary, built on the first call (concurrent calls share the
   * build); `logger` takes the one warning (the serving server's logger).
   */
  async get(logger: Logger): Promise<FrameDictionary | null> {
    if (this.#dict || !this.#log) return this.#dict;
    const log = this.#log;
    const d = await (this.#building ??= buildLogDictionary(log).finally(() => {
      this.#building = null;
    }));
    const problem = dictionaryProblem();
    if (problem !== null && !this.#warned) {
      this.#warned = true; // once per stream: zstd-dict subscribers get plain zstd frames
      logger.warn(
        "dictionary_unavailable",
        { stream: this.#name, error: problem },
        `compress=zstd-dict on "${this.#name}": no libzstd through FFI (${problem}); plain zstd`,
      );
    }
    return this.#dict ??= d;
  }

  /** The dictionary with `id`, if it is this stream's. */
  byId(id: string): FrameDictionary | null {
    return this.#dict?.id === id ? this.#dict : null;
  }
}
