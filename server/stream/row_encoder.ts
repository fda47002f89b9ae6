/**
 * The one path every row takes into a stream, whichever way it comes
 * (`send`, `sendMany`, `sendJson`, a network publish): validated by the
 * stream's schema, encoded by its encoder (keys in schema order: the bytes
 * stored and sent), and checked against the log's row limit. A row refused
 * on the way is counted (`streamcast_rows_rejected_total`) and never stored.
 *
 * @module
 */

import type { RowSchema } from "../../schema/row_schema.ts";
import { RowError } from "./row_error.ts";
import { utf8Bytes } from "../../wire/utf8_bytes.ts";

/** A counter, as far as refusals are counted. */
export interface RejectCount {
  /** Adds one. */
  inc(): void;
}

/** Why a row was refused: the schema's verdict, its size, or (a text) not JSON. */
export type RowRefusal = RowError | RangeError | SyntaxError;

/** The rows of an all-or-nothing call: their encoded JSON, or the first refused and why. */
export type EncodedRows = string[] | { index: number; refusal: RowRefusal };

/**
 * A stream's row checks and encoder.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { compileSchema } from "../../schema/compile.ts";
 * import { RowEncoder } from "./row_encoder.ts";
 * const schema = compileSchema({ type: "object", properties: { v: { type: "number" } }, required: ["v"] });
 * let rejected = 0;
 * const rows = new RowEncoder("t", schema, 8, { inc: () => void rejected++ });
 * equal(rows.encode({ v: 1 }), '{"v":1}');
 * equal(rows.encodeText('{ "v": 2 }'), '{"v":2}');
 * ok(rows.encode({ v: "x" }) instanceof TypeError); // a RowError
 * ok(rows.encode({ v: 12345678 }) instanceof RangeError); // over 8 bytes
 * ok(rows.encodeText("{") instanceof SyntaxError); // not JSON: not a row, not counted
 * equal(rejected, 2);
 * ```
 */
export class RowEncoder {
  readonly #name: string;
  readonly #schema: RowSchema;
  readonly #maxBytes: number;
  readonly #rejected: RejectCount;

  /** Rows of stream `name` checked by `schema`, at most `maxBytes` bytes each once encoded. */
  constructor(name: string, schema: RowSchema, maxBytes: number, rejected: RejectCount) {
    this.#name = name;
    this.#schema = schema;
    this.#maxBytes = maxBytes;
    this.#rejected = rejected;
  }

  /** The row's encoded JSON, or why it is refused (counted). */
  encode(row: unknown): string | RowRefusal {
    const problem = this.#schema.validate(row);
    if (problem !== null) {
      this.#rejected.inc();
      return new RowError(this.#name, problem);
    }
    return this.#sized(this.#schema.encode(row as Record<string, unknown>));
  }

  /**
   * A row given as JSON text: a text already in the encoded form
   * (`RowSchema.isEncoded`) as it is, any other parsed, then as
   * {@linkcode RowEncoder.encode}; a text that is not JSON is a `SyntaxError`.
   */
  encodeText(text: string): string | RowRefusal {
    if (this.#schema.isEncoded(text)) return this.#sized(text);
    let row: unknown;
    try {
      row = JSON.parse(text);
    } catch (err) {
      return err instanceof SyntaxError
        ? err
        : new SyntaxError(err instanceof Error ? err.message : String(err));
    }
    return this.encode(row);
  }

  /** Every row encoded, or the first one refused (its 0-based index) and why. */
  encodeAll(rows: readonly unknown[]): EncodedRows {
    const jsons: string[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const json = this.encode(rows[i]);
      if (typeof json !== "string") return { index: i, refusal: json };
      jsons[i] = json;
    }
    return jsons;
  }

  // The JSON, or a RangeError when its UTF-8 is over the row limit.
  #sized(json: string): string | RangeError {
    // A string's UTF-8 size is between its length and three times it.
    if (json.length * 3 <= this.#maxBytes) return json;
    const bytes = utf8Bytes(json);
    if (bytes <= this.#maxBytes) return json;
    this.#rejected.inc();
    return new RangeError(`payload is ${bytes} bytes; the limit is ${this.#maxBytes}`);
  }
}
