/**
 * A sink for apache-arrow's IPC writers that hands back the bytes written
 * since the last take, so a message or a piece of a file can be sent on.
 *
 * @module
 */

import { AsyncByteQueue } from "apache-arrow";

/**
 * Collects what an apache-arrow writer emits, synchronously.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { ByteCollector } from "./_byte_collector.ts";
 * const sink = new ByteCollector();
 * sink.write(new Uint8Array([1, 2]));
 * sink.write(new Uint8Array([3]));
 * equal(sink.size, 3);
 * deepStrictEqual(sink.take(), new Uint8Array([1, 2, 3]));
 * ```
 */
export class ByteCollector extends AsyncByteQueue<Uint8Array> {
  #chunks: Uint8Array[] = [];
  #bytes = 0;

  override write(value: Uint8Array): void {
    if (value.byteLength === 0) return;
    this.#chunks.push(value);
    this.#bytes += value.byteLength;
  }

  /** Bytes collected so far. */
  get size(): number {
    return this.#bytes;
  }

  /** The bytes collected since the last take, as one array (copied). */
  take(): Uint8Array<ArrayBuffer> {
    const out = new Uint8Array(this.#bytes);
    let o = 0;
    for (const c of this.#chunks) {
      out.set(c, o);
      o += c.byteLength;
    }
    this.#chunks = [];
    this.#bytes = 0;
    return out;
  }
}
