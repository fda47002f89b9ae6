/**
 * How a schema is refused: {@linkcode SchemaError}, with the location in the
 * schema as a JSON Pointer.
 *
 * @module
 */

import { display } from "./_json.ts";

/**
 * A stream's schema was refused when the stream was declared. The message
 * names the location in the schema as a JSON Pointer and says why, e.g.
 * `schema /properties/tags: type "list" is not supported (columns are
 * boolean, integer, number, string, object or array)`.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { compileSchema } from "./compile.ts";
 * import { SchemaError } from "./schema_error.ts";
 * throws(
 *   () =>
 *     compileSchema({
 *       type: "object",
 *       properties: { tags: { type: "list" } },
 *       required: ["tags"],
 *     }),
 *   SchemaError,
 * );
 * ```
 */
export class SchemaError extends Error {
  /** Always `"SchemaError"`. */
  override name = "SchemaError";
}

/**
 * The error refusing a schema at `at` (a JSON Pointer, `""` for the top) for `why`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { refuse } from "./schema_error.ts";
 * equal(refuse("/type", 'must be "object"').message, 'schema /type: must be "object"');
 * ```
 */
export function refuse(at: string, why: string): SchemaError {
  return new SchemaError(`schema${at === "" ? "" : ` ${display(at)}`}: ${why}`);
}
