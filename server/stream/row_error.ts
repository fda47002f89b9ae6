/**
 * Errors the server raises to its own callers (publishers), as opposed to the
 * wire refusals a subscriber sees (those are close codes, see `wire/close_reason.ts`).
 *
 * @module
 */

/**
 * A row was refused by its stream's schema. Nothing of it was stored.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { RowError } from "./row_error.ts";
 * const err = new RowError("trades", "/price: must be number");
 * equal(err.message, 'row refused by stream "trades": /price: must be number');
 * ```
 */
export class RowError extends TypeError {
  /** The stream that refused the row. */
  readonly stream: string;
  /** What was wrong, in JSON Schema terms. */
  readonly detail: string;
  /** Makes a RowError for `stream` with `detail`. */
  constructor(stream: string, detail: string) {
    super(`row refused by stream "${stream}": ${detail}`);
    this.name = "RowError";
    this.stream = stream;
    this.detail = detail;
  }
}

/**
 * A publish's rows were refused: the first refused row's 0-based `index`,
 * and why (its schema refusal, or its size over the log's row limit).
 * Nothing of the publish was stored.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { RowsRefusedError } from "./row_error.ts";
 * const err = new RowsRefusedError(1, "/v: must be number");
 * equal(err.message, "row 1: /v: must be number");
 * ```
 */
export class RowsRefusedError extends Error {
  /** The first refused row, 0-based. */
  readonly index: number;
  /** Why it was refused. */
  readonly detail: string;
  /** The refusal of row `index` for `detail`. */
  constructor(index: number, detail: string) {
    super(`row ${index}: ${detail}`);
    this.name = "RowsRefusedError";
    this.index = index;
    this.detail = detail;
  }
}
