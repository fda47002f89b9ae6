/**
 * The `frames=arrow` encoder: rows as Arrow IPC stream messages, one per
 * WebSocket frame, built once per batch and shared by every subscriber.
 *
 * ## `frames=arrow` on the wire
 *
 * With `frames=arrow` the greeting stays the first frame (text, JSON). Every
 * frame after it is a **binary** frame holding exactly one encapsulated Arrow
 * IPC message (the streaming format's unit: `0xFFFFFFFF`, a little-endian
 * int32 metadata length, the flatbuffer `Message`, padding to 8 bytes, then the
 * body), uncompressed:
 *
 * 1. the first binary frame is the **Schema** message: `offset` (Int64) and
 *    then the stream's columns, mapped as `toArrow` maps them (`schema.ts`);
 * 2. every later binary frame is one **RecordBatch** message holding one or
 *    more rows, offsets increasing with no gap and no duplicate across frames
 *    (a batch holds what was coalesced for the subscriber: a commit group or a
 *    catch-up read, at most 4096 rows).
 *
 * There is no end-of-stream marker: the close frame ends the stream, with the
 * same close codes as the other frame modes. The frames concatenated, followed
 * by the 8 bytes `FF FF FF FF 00 00 00 00`, are a valid Arrow IPC stream that
 * any Arrow library reads. `offset` is null in every row of an ephemeral stream.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowFrameEncoder } from "./frame_encoder.ts";
 * import { toArrow } from "./schema.ts";
 * import { compileSchema } from "../schema/compile.ts";
 * const schema = compileSchema({
 *   type: "object",
 *   properties: { symbol: { type: "string" }, price: { type: "number" } },
 *   required: ["symbol", "price"],
 * });
 * equal(String(toArrow(schema)), "Schema<{ 0: symbol: Utf8, 1: price: Float64 }>");
 * const encoder = new ArrowFrameEncoder(schema);
 * const frame = encoder.encode([7], ['{"symbol":"BTC-USD","price":101.5}']);
 * equal(frame instanceof Uint8Array, true);
 * ```
 *
 * @module
 */

import { type RecordBatch, RecordBatchStreamWriter, type Schema } from "apache-arrow";
import type { RecordBatch as LogRecordBatch } from "../log/mod.ts";
import type { RowSchema } from "../schema/row_schema.ts";
import { ByteCollector } from "./_byte_collector.ts";
import { checkSchema } from "./_check_schema.ts";
import { ArrowRowBuilder, type ArrowRowOptions } from "./row_builder.ts";

/**
 * A stream writer that keeps no per-message bookkeeping: the base class
 * remembers a block per record batch for a file footer, which a stream that
 * lives as long as a subscription must not accumulate.
 */
class MessageWriter extends RecordBatchStreamWriter {
  protected override _writeRecordBatch(batch: RecordBatch): this {
    super._writeRecordBatch(batch);
    this._recordBatchBlocks.length = 0;
    return this;
  }
}

/**
 * Encodes rows as Arrow IPC stream messages for `frames=arrow`: one schema
 * message, then one record batch message per frame (see the module doc for
 * the wire). Build one per stream and share it across subscribers: encoding is
 * per batch, not per subscriber.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ArrowFrameEncoder } from "./frame_encoder.ts";
 * import { ArrowFrameDecoder } from "./subscription.ts";
 * const encoder = new ArrowFrameEncoder({
 *   type: "object",
 *   properties: { price: { type: "number" } },
 *   required: ["price"],
 * });
 * const decoder = new ArrowFrameDecoder();
 * decoder.push(encoder.schemaMessage());
 * const batch = decoder.push(encoder.encodeFrames(['[5,{"price":1.5}]', '[6,{"price":2}]']));
 * equal(batch?.numRows, 2);
 * equal(batch?.getChild("price")?.get(1), 2);
 * ```
 */
export class ArrowFrameEncoder {
  /** The builder (its `schema` is the wire schema). */
  readonly builder: ArrowRowBuilder;
  readonly #writer: MessageWriter;
  readonly #sink = new ByteCollector();
  readonly #schemaMessage: Uint8Array<ArrayBuffer>;

  /**
   * An encoder for a stream's schema.
   *
   * @throws {TypeError} If the schema has a column named `offset`.
   */
  constructor(schema: RowSchema | Record<string, unknown>, options: ArrowRowOptions = {}) {
    this.builder = new ArrowRowBuilder(schema, options);
    this.#writer = new MessageWriter();
    this.#writer.reset(this.#sink, this.builder.schema);
    this.#schemaMessage = this.#sink.take();
  }

  /** The wire schema: `offset`, then the stream's columns. */
  get schema(): Schema {
    return this.builder.schema;
  }

  /** The first binary frame: the Arrow IPC schema message (the same bytes every time). */
  schemaMessage(): Uint8Array<ArrayBuffer> {
    return this.#schemaMessage.slice();
  }

  /** One record batch message from an Arrow batch of the wire schema. */
  encodeBatch(batch: RecordBatch): Uint8Array<ArrayBuffer> {
    checkSchema(batch, this.builder.schema, "this encoder's");
    this.#writer.write(batch);
    return this.#sink.take();
  }

  /** One record batch message from rows' JSON text and their offsets (`null`: ephemeral). */
  encode(offsets: ArrayLike<number> | null, rows: readonly string[]): Uint8Array<ArrayBuffer> {
    return this.encodeBatch(this.builder.fromJson(offsets, rows));
  }

  /** One record batch message from wire frames `[offset,msg]`, as a stream fans them out. */
  encodeFrames(frames: readonly string[]): Uint8Array<ArrayBuffer> {
    return this.encodeBatch(this.builder.fromFrames(frames));
  }

  /**
   * One record batch message from records `[from, from + count)` of a log
   * record batch (a catch-up read), parsed from the payload bytes.
   */
  encodeRecords(
    batch: LogRecordBatch,
    from = 0,
    count: number = batch.count - from,
  ): Uint8Array<ArrayBuffer> {
    return this.encodeBatch(this.builder.fromRecords(batch, from, count));
  }
}
