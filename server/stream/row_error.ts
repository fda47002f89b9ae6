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
