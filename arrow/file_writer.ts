/**
 * The Arrow IPC file writer: an Arrow file (zstd-compressed buffers unless
 * told otherwise) written piece by piece. Importing it registers the zstd
 * codec (`zstd.ts`).
 *
 * @module
 */

import {
  CompressionType,
  type RecordBatch,
  RecordBatchFileWriter,
  type Schema,
} from "apache-arrow";
import { ByteCollector } from "./_byte_collector.ts";
import { checkSchema } from "./_check_schema.ts";
import "./zstd.ts";

/**
 * Options of {@linkcode ArrowFileWriter}.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { ArrowFileWriter, type ArrowFileWriterOptions } from "./file_writer.ts";
 * import { toArrow } from "./schema.ts";
 * const plain: ArrowFileWriterOptions = { compression: null };
 * const schema = toArrow({ type: "object", properties: { n: { type: "integer" } }, required: ["n"] });
 * ok(new ArrowFileWriter(schema, plain).start().length > 0);
 * ```
 */
export interface ArrowFileWriterOptions {
  /** Compression of the record batches' buffers. @default "zstd" */
  compression?: "zstd" | null;
}

/**
 * Writes an Arrow IPC **file** (the random-access format: magic, schema,
 * record batches, footer) piece by piece, handing back the bytes to append
 * after each step, so a caller can stream a file of any size to disk.
 * `exportLog` writes its Arrow files with it; a recorder can write the
 * batches of `connectArrow` to a file the same way.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { tableFromIPC } from "apache-arrow";
 * import { ArrowFileWriter } from "./file_writer.ts";
 * import { ArrowRowBuilder } from "./row_builder.ts";
 * const builder = new ArrowRowBuilder({
 *   type: "object",
 *   properties: { n: { type: "integer" } },
 *   required: ["n"],
 * });
 * const writer = new ArrowFileWriter(builder.schema);
 * const parts = [writer.start(), writer.write(builder.fromJson([1], ['{"n":42}'])), writer.finish()];
 * const table = tableFromIPC(new Uint8Array(await new Blob(parts).arrayBuffer()));
 * equal(table.getChild("n")?.get(0), 42n);
 * ```
 */
export class ArrowFileWriter {
  /** The file's schema. */
  readonly schema: Schema;
  readonly #writer: RecordBatchFileWriter;
  readonly #sink = new ByteCollector();
  #started = false;

  /** A writer of a file with `schema`. */
  constructor(schema: Schema, options: ArrowFileWriterOptions = {}) {
    this.schema = schema;
    const compression = options.compression === undefined ? "zstd" : options.compression;
    this.#writer = new RecordBatchFileWriter({
      compressionType: compression === "zstd" ? CompressionType.ZSTD : null,
    });
  }

  /** The file's start: magic and schema. */
  start(): Uint8Array<ArrayBuffer> {
    if (this.#started) throw new TypeError("the Arrow file is already started");
    this.#started = true;
    this.#writer.reset(this.#sink, this.schema);
    return this.#sink.take();
  }

  /** One record batch (of the file's schema). */
  write(batch: RecordBatch): Uint8Array<ArrayBuffer> {
    if (!this.#started) throw new TypeError("start() the Arrow file first");
    checkSchema(batch, this.schema, "this file's");
    this.#writer.write(batch);
    return this.#sink.take();
  }

  /** The file's end: footer and magic. The writer is done after this. */
  finish(): Uint8Array<ArrayBuffer> {
    if (!this.#started) throw new TypeError("start() the Arrow file first");
    this.#writer.close();
    return this.#sink.take();
  }
}
