/**
 * The rules a stream's schema follows, as tables: the limits, the keywords
 * allowed at the top and in a column, the column types and formats, and why
 * some often-tried keywords are refused. {@linkcode compileSchema} checks a
 * schema against them; the validator reports rows in their terms.
 *
 * @module
 */

/**
 * At most this many columns per schema.
 */
export const MAX_COLUMNS = 1024;
/**
 * A property name is 1 to this many characters (code points, as `maxLength` counts).
 */
export const MAX_NAME_CHARS = 256;
/**
 * How deep a value in `enum` or `examples` may nest.
 */
export const MAX_VALUE_DEPTH = 32;

/**
 * The smallest int32.
 */
export const INT32_MIN = -(2 ** 31);
/**
 * The largest int32.
 */
export const INT32_MAX = 2 ** 31 - 1;
/**
 * The largest finite IEEE 754 single-precision value.
 */
export const FLOAT_MAX = 3.4028234663852886e38;

/**
 * The JSON Schema types a column may have (besides `"null"`).
 */
export const BASE_TYPES = ["boolean", "integer", "number", "string", "object", "array"] as const;
/**
 * One of {@linkcode BASE_TYPES}.
 */
export type BaseType = typeof BASE_TYPES[number];
/**
 * {@linkcode BASE_TYPES} as a message lists them.
 */
export const BASE_TYPES_TEXT = "boolean, integer, number, string, object or array";

/**
 * The keywords allowed at the top level of a schema.
 */
export const TOP_KEYWORDS: readonly string[] = [
  "$schema",
  "$id",
  "title",
  "description",
  "type",
  "properties",
  "required",
  "additionalProperties",
];
/**
 * The keywords allowed in a column's schema.
 */
export const COLUMN_KEYWORDS: readonly string[] = [
  "type",
  "format",
  "description",
  "title",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "minLength",
  "maxLength",
  "pattern",
  "enum",
  "examples",
  // object and array columns (OBJECT_KEYWORDS, ARRAY_KEYWORDS)
  "properties",
  "required",
  "additionalProperties",
  "patternProperties",
  "propertyNames",
  "minProperties",
  "maxProperties",
  "dependencies",
  "items",
  "additionalItems",
  "minItems",
  "maxItems",
  "uniqueItems",
  "contains",
];
/**
 * The column keywords that apply to `integer` and `number` only.
 */
export const NUMBER_KEYWORDS: ReadonlySet<string> = new Set([
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
]);
/**
 * The column keywords that apply to `string` only.
 */
export const STRING_KEYWORDS: ReadonlySet<string> = new Set(["minLength", "maxLength", "pattern"]);

/**
 * Why some often-tried keywords are refused, to point the author at what works.
 */
export const KEYWORD_HINTS: Record<string, string> = {
  nullable: 'a nullable column says "type": [T, "null"]',
  default: "every column is required, so a default never applies",
  const: 'use "enum" with one value',
  $ref: "columns and their sub-schemas are declared inline",
  oneOf: `a column has one type: ${BASE_TYPES_TEXT}, optionally with "null"`,
  anyOf: `a column has one type: ${BASE_TYPES_TEXT}, optionally with "null"`,
  allOf: `a column has one type: ${BASE_TYPES_TEXT}, optionally with "null"`,
};

/**
 * The number formats, each with the values it accepts (checked by ajv and for `enum`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { NUMBER_FORMATS } from "./rules.ts";
 * equal(NUMBER_FORMATS.int32(2 ** 31), false);
 * ```
 */
export const NUMBER_FORMATS: Record<string, (value: number) => boolean> = {
  int32: (v) => Number.isInteger(v) && v >= INT32_MIN && v <= INT32_MAX,
  // ajv-formats accepts any integer as int64; past 2^53 a JSON reader may
  // silently round it, so only safe integers are int64 here.
  int64: (v) => Number.isSafeInteger(v),
  float: (v) => Math.abs(v) <= FLOAT_MAX,
  double: () => true,
};
/**
 * What a number format accepts, as a refused row's message says it.
 */
export const FORMAT_RULES: Record<string, string> = {
  int32: `an integer from ${INT32_MIN} to ${INT32_MAX}`,
  int64: "a safe integer, from -(2^53-1) to 2^53-1, which every JSON reader keeps exact",
  float: `a number within ±${FLOAT_MAX}, the float range`,
};

/**
 * Why `required` must list every property, as a refusal says it.
 */
export const MUST_REQUIRE =
  'a row has every column; a column that may be empty says "type": [T, "null"]';

// --- nested columns (object, array) -------------------------------------

/**
 * The column keywords that apply to `object` columns only (their values are
 * sub-schemas or counts that ajv checks, as JSON Schema draft-07 has them).
 */
export const OBJECT_KEYWORDS: ReadonlySet<string> = new Set([
  "properties",
  "required",
  "additionalProperties",
  "patternProperties",
  "propertyNames",
  "minProperties",
  "maxProperties",
  "dependencies",
]);
/**
 * The column keywords that apply to `array` columns only.
 */
export const ARRAY_KEYWORDS: ReadonlySet<string> = new Set([
  "items",
  "additionalItems",
  "minItems",
  "maxItems",
  "uniqueItems",
  "contains",
]);

/**
 * How deep a nested column's value may nest (an object or array inside the
 * column's value counts one level): a row nesting deeper is refused, so
 * encoding, validating and Arrow building never recurse without bound.
 */
export const MAX_ROW_DEPTH = 64;

/**
 * How deep a schema may nest, counting every JSON object and array in it
 * (the schema itself is level 1). A nested column's sub-schema takes about
 * two levels per level of its values (`properties`, then the property), so
 * this leaves room for {@linkcode MAX_ROW_DEPTH} levels and their keywords;
 * a deeper schema is refused before anything walks it recursively.
 */
export const MAX_SCHEMA_DEPTH = 2 * MAX_ROW_DEPTH + 8;
