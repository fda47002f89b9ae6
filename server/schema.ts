/**
 * A stream's row schema: a JSON Schema restricted to flat, typed columns,
 * compiled once into a column model, a validator (ajv) and a generated encoder.
 *
 * Accepted schemas look like this (anything else is refused with a
 * {@linkcode SchemaError} that names the location in JSON Schema's terms):
 *
 * ```json
 * {
 *   "type": "object",
 *   "properties": {
 *     "event_ts": { "type": "integer", "format": "int64" },
 *     "symbol": { "type": "string", "minLength": 1 },
 *     "price": { "type": "number" },
 *     "venue": { "type": ["string", "null"] }
 *   },
 *   "required": ["event_ts", "symbol", "price", "venue"],
 *   "additionalProperties": false
 * }
 * ```
 *
 * Invariants this module keeps:
 * - Column order is the declared order of `properties`. Names JavaScript would
 *   reorder (array indices such as `"0"`) are refused, so the order survives
 *   every object the schema passes through.
 * - Every column is required and no other key is allowed, so a valid row has
 *   exactly the columns, each holding a JSON value of its type (or `null` when
 *   the column is nullable): finite numbers, int32 in range, int64 safe.
 * - For every row `validate` accepts, `encode(row)` is byte-identical to
 *   `JSON.stringify` of a copy of the row with its keys in column order. That
 *   string is what is stored and sent; live and replayed frames share it.
 *
 * @module
 */

import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
// Both packages are CommonJS. Deno's types see `export default` as the
// module's `default` property while at run time the default import is
// `module.exports`; both packages set `module.exports.default` to the plugin,
// and ajv exports its class by name, so these two spellings agree.
import ajvFormats from "ajv-formats";
const addFormats = ajvFormats.default;

/** The storage type of a column, derived from its JSON Schema `type` and `format`. */
export type ColumnType = "boolean" | "int32" | "int64" | "float" | "double" | "string";

/**
 * One column of a stream: a property of the row schema.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { type Column, compileSchema } from "./schema.ts";
 * const { columns } = compileSchema({
 *   type: "object",
 *   properties: { side: { type: ["integer", "null"], format: "int32" } },
 *   required: ["side"],
 * });
 * const side: Column = columns[0];
 * deepEqual(side, { name: "side", type: "int32", nullable: true });
 * ```
 */
export interface Column {
  /** The property name, as declared. */
  name: string;
  /** The storage type. */
  type: ColumnType;
  /** Whether the column accepts `null` (declared as `"type": [T, "null"]`). */
  nullable: boolean;
}

/**
 * A stream's schema was refused when the stream was declared. The message
 * names the location in the schema as a JSON Pointer and says why, e.g.
 * `schema /properties/tags: type "array" is not supported (columns are
 * boolean, integer, number or string)`.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { compileSchema, SchemaError } from "./schema.ts";
 * throws(
 *   () =>
 *     compileSchema({
 *       type: "object",
 *       properties: { tags: { type: "array" } },
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
 * A compiled row schema. `validate` and `encode` do not use `this`, so they
 * may be passed around detached (`const { encode } = schema`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { compileSchema, type RowSchema } from "./schema.ts";
 * const schema: RowSchema = compileSchema({
 *   type: "object",
 *   properties: { symbol: { type: "string" }, price: { type: "number" } },
 *   required: ["symbol", "price"],
 * });
 * const row = { price: 101.5, symbol: "BTC-USD" };
 * equal(schema.validate(row), null);
 * equal(schema.encode(row), '{"symbol":"BTC-USD","price":101.5}');
 * equal(schema.validate({ ...row, extra: 1 }), "must NOT have additional property extra");
 * ```
 */
export interface RowSchema {
  /** The schema as declared (a deep-frozen copy; properties in column order). */
  readonly json: Record<string, unknown>;
  /** The columns, in declared order. */
  readonly columns: readonly Column[];
  /**
   * Checks a row. A column's value is `row[name]`; a key the row does not
   * own is never a column value unless the row's prototype supplies one
   * (plain objects and `JSON.parse` results have no such prototype).
   *
   * @returns `null` if the row is valid, else a one-line message in JSON
   * Schema terms, e.g. `/price: must be number` or
   * `must NOT have additional property surprise`.
   */
  validate(row: unknown): string | null;
  /**
   * Encodes a row that `validate` accepted (anything else gives garbage, not
   * an error: the encoder trusts the validator and does no checks of its own).
   *
   * @returns JSON text with the keys in column order and no whitespace:
   * exactly `JSON.stringify` of the row with its keys in that order.
   */
  encode(row: Record<string, unknown>): string;
}

/** At most this many columns per schema. */
const MAX_COLUMNS = 1024;
/** A property name is 1 to this many characters (code points, as `maxLength` counts). */
const MAX_NAME_CHARS = 256;
/** How deep a value in `enum` or `examples` may nest. */
const MAX_VALUE_DEPTH = 32;

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
/** The largest finite IEEE 754 single-precision value. */
const FLOAT_MAX = 3.4028234663852886e38;

const BASE_TYPES = ["boolean", "integer", "number", "string"] as const;
type BaseType = typeof BASE_TYPES[number];
const BASE_TYPES_TEXT = "boolean, integer, number or string";

const TOP_KEYWORDS = [
  "$schema",
  "$id",
  "title",
  "description",
  "type",
  "properties",
  "required",
  "additionalProperties",
];
const COLUMN_KEYWORDS = [
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
];
const NUMBER_KEYWORDS = new Set([
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
]);
const STRING_KEYWORDS = new Set(["minLength", "maxLength", "pattern"]);

/** Why some often-tried keywords are refused, to point the author at what works. */
const KEYWORD_HINTS: Record<string, string> = {
  nullable: 'a nullable column says "type": [T, "null"]',
  default: "every column is required, so a default never applies",
  const: 'use "enum" with one value',
  $ref: "columns are declared inline",
  items: 'type "array" is not supported',
  properties: 'type "object" is not supported; columns are flat',
  oneOf: `a column has one type: ${BASE_TYPES_TEXT}, optionally with "null"`,
  anyOf: `a column has one type: ${BASE_TYPES_TEXT}, optionally with "null"`,
  allOf: `a column has one type: ${BASE_TYPES_TEXT}, optionally with "null"`,
};

const NUMBER_FORMATS: Record<string, (value: number) => boolean> = {
  int32: (v) => Number.isInteger(v) && v >= INT32_MIN && v <= INT32_MAX,
  // ajv-formats accepts any integer as int64; past 2^53 a JSON reader may
  // silently round it, so only safe integers are int64 here.
  int64: (v) => Number.isSafeInteger(v),
  float: (v) => Math.abs(v) <= FLOAT_MAX,
  double: () => true,
};
const FORMAT_RULES: Record<string, string> = {
  int32: `an integer from ${INT32_MIN} to ${INT32_MAX}`,
  int64: "a safe integer, from -(2^53-1) to 2^53-1, which every JSON reader keeps exact",
  float: `a number within ±${FLOAT_MAX}, the float range`,
};

/**
 * How many schemas one ajv instance compiles before it is replaced. A new
 * instance costs ~10 ms (it compiles its meta-schema); each compile leaves a
 * few values in the instance's code scope for good, even after
 * `removeSchema`. Replacing it now and then bounds that at a trivial cost.
 */
const COMPILES_PER_AJV = 256;

let sharedAjv: Ajv | undefined;
let compilesLeft = 0;
let stringFormats: string[] = [];

/**
 * The ajv instance to compile the next schema with. Derived schemas carry no
 * `$id`, and each is removed from ajv's cache after compiling (the validate
 * function keeps what it needs), so streams never collide.
 */
function getAjv(): Ajv {
  if (sharedAjv !== undefined && compilesLeft > 0) {
    compilesLeft--;
    return sharedAjv;
  }
  const ajv = new Ajv({
    allErrors: false,
    strict: true,
    strictNumbers: true, // `type: "number"` refuses NaN and ±Infinity
    allowUnionTypes: true, // [T, "null"]
    // Not ownProperties: it more than doubles the cost of a row, and a row's
    // column value is `row[name]` either way. Object.prototype holds only
    // functions (and __proto__, which is checked apart from ajv), so an
    // inherited member never passes as a column value; `describe` reports
    // it as the missing property it is.
  });
  addFormats(ajv);
  for (const [name, validate] of Object.entries(NUMBER_FORMATS)) {
    ajv.addFormat(name, { type: "number", validate });
  }
  stringFormats = Object.keys(ajv.formats).filter((name) => !(name in NUMBER_FORMATS)).sort();
  sharedAjv = ajv;
  compilesLeft = COMPILES_PER_AJV - 1;
  return ajv;
}

/**
 * Compiles a stream's JSON Schema: checks it is one this server can store,
 * derives the columns, compiles the validator and generates the encoder.
 * Done once, when the stream is declared.
 *
 * @param json The schema, as parsed JSON.
 * @returns The compiled schema.
 * @throws {SchemaError} If the schema is not a flat object of supported columns.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { RowError } from "./errors.ts";
 * import { compileSchema } from "./schema.ts";
 * const trades = compileSchema({
 *   type: "object",
 *   properties: {
 *     event_ts: { type: "integer", format: "int64" },
 *     symbol: { type: "string" },
 *     price: { type: "number", format: "double" },
 *     side: { type: "integer", format: "int32" },
 *   },
 *   required: ["event_ts", "symbol", "price", "side"],
 *   additionalProperties: false,
 * });
 * const row = { symbol: "ETH-USD", side: -1, price: 3010.25, event_ts: 1717000000000000 };
 * equal(trades.validate(row), null);
 * equal(
 *   trades.encode(row),
 *   '{"event_ts":1717000000000000,"symbol":"ETH-USD","price":3010.25,"side":-1}',
 * );
 * equal(trades.validate({ ...row, price: "3010.25" }), "/price: must be number");
 * equal(
 *   trades.validate({ ...row, side: 2 ** 31 }),
 *   '/side: must match format "int32" (an integer from -2147483648 to 2147483647), got 2147483648',
 * );
 *
 * // How a stream refuses a row on send:
 * function check(row: unknown): void {
 *   const problem = trades.validate(row);
 *   if (problem !== null) throw new RowError("trades", problem);
 * }
 * throws(() => check({ ...row, surprise: 1 }), {
 *   name: "RowError",
 *   message: 'row refused by stream "trades": must NOT have additional property surprise',
 * });
 * ```
 */
export function compileSchema(json: unknown): RowSchema {
  const ajv = getAjv();
  const top = expectObject(json, "");
  for (const key of Object.keys(top)) {
    if (!TOP_KEYWORDS.includes(key)) {
      throw refuse(
        "",
        `keyword ${JSON.stringify(key)} is not supported at the top level ` +
          `(allowed: ${TOP_KEYWORDS.join(", ")})`,
      );
    }
  }
  for (const key of ["$schema", "$id", "title", "description"]) {
    if (Object.hasOwn(top, key) && typeof top[key] !== "string") {
      throw refuse(`/${pointerEscape(key)}`, `must be string, got ${kindOf(top[key])}`);
    }
  }
  if (!Object.hasOwn(top, "type")) throw refuse("", '"type" is missing; it must be "object"');
  if (top.type !== "object") {
    throw refuse("/type", `must be "object", got ${JSON.stringify(top.type)}`);
  }
  if (Object.hasOwn(top, "additionalProperties") && top.additionalProperties !== false) {
    throw refuse(
      "/additionalProperties",
      `only false is supported (a row carries exactly its columns), got ${
        JSON.stringify(top.additionalProperties)
      }`,
    );
  }
  if (!Object.hasOwn(top, "properties")) {
    throw refuse("", '"properties" is missing; it declares the columns');
  }
  if (!isObject(top.properties)) {
    throw refuse(
      "/properties",
      `must be object (column names to column schemas), got ${kindOf(top.properties)}`,
    );
  }
  const properties = top.properties;
  const names = Object.keys(properties);
  if (names.length === 0) throw refuse("/properties", "must declare at least one column");
  if (names.length > MAX_COLUMNS) {
    throw refuse(
      "/properties",
      `declares ${names.length} columns; at most ${MAX_COLUMNS} are supported`,
    );
  }

  const columns: Column[] = [];
  const derived: [string, Record<string, unknown>][] = [];
  for (const name of names) {
    const at = `/properties/${pointerEscape(name)}`;
    checkName(name, at);
    const compiled = compileColumn(name, properties[name], at);
    columns.push(Object.freeze(compiled.column));
    derived.push([name, compiled.derived]);
  }
  checkRequired(top.required, names);

  const encode = generateEncoder(columns);
  const validate = buildValidator(ajv, derived);
  return Object.freeze({
    json: deepFreeze(JSON.parse(JSON.stringify(top))) as Record<string, unknown>,
    columns: Object.freeze(columns),
    validate,
    encode,
  });
}

/**
 * Builds `validate` over ajv. ajv ignores a property named `__proto__`
 * (its `properties` and `additionalProperties` skip that name), so such a
 * column is checked beside ajv: its own compiled subschema, an own-property
 * test, and a walk over the row's own keys in place of `additionalProperties`.
 */
function buildValidator(
  ajv: Ajv,
  derived: readonly [string, Record<string, unknown>][],
): (row: unknown) => string | null {
  const types = new Map(derived.map(([name, prop]) => [name, typeText(prop.type)]));
  const proto = derived.find(([name]) => name === "__proto__")?.[1];
  const rest = derived.filter(([name]) => name !== "__proto__");
  const check = compileValidator(ajv, {
    type: "object",
    // fromEntries defines own properties, so no name can reach a prototype.
    properties: Object.fromEntries(rest),
    required: rest.map(([name]) => name),
    ...(proto === undefined ? { additionalProperties: false } : {}),
  });
  const checkProto = proto === undefined ? undefined : compileValidator(ajv, proto);
  const names = new Set(derived.map(([name]) => name));

  return function validate(row: unknown): string | null {
    if (typeof row !== "object" || row === null || Array.isArray(row)) {
      return `must be object, got ${kindOf(row)}`;
    }
    const fields = row as Record<string, unknown>;
    if (!check(fields)) return describe(firstError(check), fields, "", types);
    if (checkProto === undefined) return null;
    if (!Object.hasOwn(fields, "__proto__")) return "must have required property __proto__";
    if (!checkProto(fields["__proto__"])) {
      return describe(firstError(checkProto), fields, "/__proto__", types);
    }
    for (const key of Object.keys(fields)) {
      if (!names.has(key)) return `must NOT have additional property ${display(key)}`;
    }
    return null;
  };
}

function firstError(check: ValidateFunction): ErrorObject {
  return (check.errors as ErrorObject[])[0];
}

/** Checks one property schema; returns its column and the schema ajv compiles for it. */
function compileColumn(
  name: string,
  spec: unknown,
  at: string,
): { column: Column; derived: Record<string, unknown> } {
  const prop = expectObject(spec, at);
  for (const key of Object.keys(prop)) {
    if (!COLUMN_KEYWORDS.includes(key)) {
      const hint = KEYWORD_HINTS[key] ?? `a column allows ${COLUMN_KEYWORDS.join(", ")}`;
      throw refuse(at, `keyword ${JSON.stringify(key)} is not supported (${hint})`);
    }
  }
  if (!Object.hasOwn(prop, "type")) {
    throw refuse(at, `"type" is missing (one of ${BASE_TYPES_TEXT}, optionally with "null")`);
  }
  const { base, nullable } = parseType(prop.type, at);

  let type: ColumnType;
  const format = prop.format;
  if (format !== undefined && typeof format !== "string") {
    throw refuse(`${at}/format`, `must be string, got ${kindOf(format)}`);
  }
  switch (base) {
    case "boolean":
      if (format !== undefined) throw refuse(at, 'keyword "format" does not apply to "boolean"');
      type = "boolean";
      break;
    case "integer":
      if (format !== undefined && format !== "int32" && format !== "int64") {
        throw refuse(
          `${at}/format`,
          `format ${JSON.stringify(format)} is not supported for "integer" (int32 or int64)`,
        );
      }
      type = format ?? "int64";
      break;
    case "number":
      if (format !== undefined && format !== "float" && format !== "double") {
        throw refuse(
          `${at}/format`,
          `format ${JSON.stringify(format)} is not supported for "number" (float or double)`,
        );
      }
      type = format ?? "double";
      break;
    case "string":
      if (format !== undefined && !stringFormats.includes(format)) {
        throw refuse(
          `${at}/format`,
          `unknown format ${JSON.stringify(format)} for "string" (known: ${
            stringFormats.join(", ")
          })`,
        );
      }
      type = "string";
      break;
  }

  for (const key of Object.keys(prop)) {
    const value = prop[key];
    const where = `${at}/${key}`;
    if (NUMBER_KEYWORDS.has(key)) {
      if (base !== "integer" && base !== "number") {
        throw refuse(at, `keyword ${JSON.stringify(key)} does not apply to "${base}"`);
      }
      if (typeof value !== "number" || !Number.isFinite(value)) {
        throw refuse(where, `must be number, got ${kindOf(value)}`);
      }
      if (key === "multipleOf" && !(value > 0)) {
        throw refuse(where, `must be > 0, got ${value}`);
      }
    } else if (STRING_KEYWORDS.has(key)) {
      if (base !== "string") {
        throw refuse(at, `keyword ${JSON.stringify(key)} does not apply to "${base}"`);
      }
      if (key === "pattern") {
        if (typeof value !== "string") throw refuse(where, `must be string, got ${kindOf(value)}`);
        try {
          new RegExp(value, "u"); // ajv compiles patterns with the u flag
        } catch (err) {
          if (!(err instanceof SyntaxError)) throw err;
          throw refuse(where, `must be a regular expression: ${err.message}`);
        }
      } else if (!Number.isSafeInteger(value) || (value as number) < 0) {
        throw refuse(where, `must be a non-negative integer, got ${JSON.stringify(value)}`);
      }
    } else if (key === "title" || key === "description") {
      if (typeof value !== "string") throw refuse(where, `must be string, got ${kindOf(value)}`);
    } else if (key === "enum") {
      if (!Array.isArray(value) || value.length === 0) {
        throw refuse(where, "must be a non-empty array of the column's values");
      }
      value.forEach((item, i) => {
        if (!(item === null ? nullable : isOfType(item, type))) {
          throw refuse(
            `${where}/${i}`,
            `${JSON.stringify(item) ?? kindOf(item)} is not a value of the column (${
              JSON.stringify(nullable ? [base, "null"] : base)
            }${base === type ? "" : `, ${type}`})`,
          );
        }
      });
    } else if (key === "examples") {
      if (!Array.isArray(value)) throw refuse(where, `must be array, got ${kindOf(value)}`);
      value.forEach((item, i) => checkJsonValue(item, `${where}/${i}`, 0));
    }
  }

  // An integer column is int64 unless it says int32, so the format (and its
  // safe-integer rule) is always there for ajv.
  const derived = base === "integer" ? { ...prop, format: type } : { ...prop };
  return { column: { name, type, nullable }, derived };
}

function parseType(type: unknown, at: string): { base: BaseType; nullable: boolean } {
  let base: unknown = type;
  let nullable = false;
  if (Array.isArray(type)) {
    const others = type.filter((t) => t !== "null");
    if (type.length !== 2 || others.length !== 1 || typeof others[0] !== "string") {
      throw refuse(
        `${at}/type`,
        `a list of types must be [T, "null"] with T one of ${BASE_TYPES_TEXT}, got ${
          JSON.stringify(type)
        }`,
      );
    }
    base = others[0];
    nullable = true;
  } else if (typeof type !== "string") {
    throw refuse(`${at}/type`, `must be string or [T, "null"], got ${kindOf(type)}`);
  }
  if (!BASE_TYPES.includes(base as BaseType)) {
    throw refuse(
      at,
      `type ${JSON.stringify(base)} is not supported (columns are ${BASE_TYPES_TEXT})`,
    );
  }
  return { base: base as BaseType, nullable };
}

function checkName(name: string, at: string): void {
  let chars = 0;
  for (const _ of name) chars++;
  if (chars < 1 || chars > MAX_NAME_CHARS) {
    throw refuse(at, `property name must be 1 to ${MAX_NAME_CHARS} characters, got ${chars}`);
  }
  if (!name.isWellFormed()) {
    const index = [...name].findIndex((c) => !c.isWellFormed());
    throw refuse(
      at,
      `property name ${JSON.stringify(name)} is not well-formed Unicode ` +
        `(a lone surrogate at character ${index})`,
    );
  }
  if (isArrayIndex(name)) {
    throw refuse(
      at,
      `property name ${JSON.stringify(name)} is an array index: JavaScript objects list ` +
        "such keys first, in numeric order, so the column order could not be the declared " +
        `order (use e.g. ${JSON.stringify(`c${name}`)})`,
    );
  }
}

/** Whether JavaScript orders `key` as an integer key (ECMA-262 "array index"). */
function isArrayIndex(key: string): boolean {
  return /^(?:0|[1-9][0-9]{0,9})$/.test(key) && Number(key) < 2 ** 32 - 1;
}

const MUST_REQUIRE = 'a row has every column; a column that may be empty says "type": [T, "null"]';

function checkRequired(required: unknown, names: readonly string[]): void {
  const declared = new Set(names);
  if (required === undefined) {
    throw refuse("", `"required" is missing; it must list every property (${MUST_REQUIRE})`);
  }
  if (!Array.isArray(required)) {
    throw refuse("/required", `must be array of property names, got ${kindOf(required)}`);
  }
  const seen = new Set<string>();
  required.forEach((name, i) => {
    if (typeof name !== "string") {
      throw refuse(`/required/${i}`, `must be string, got ${kindOf(name)}`);
    }
    if (!declared.has(name)) {
      throw refuse(`/required/${i}`, `${JSON.stringify(name)} is not a property`);
    }
    if (seen.has(name)) throw refuse(`/required/${i}`, `${JSON.stringify(name)} is listed twice`);
    seen.add(name);
  });
  for (const name of names) {
    if (!seen.has(name)) {
      throw refuse(
        "/required",
        `must list every property, missing ${JSON.stringify(name)} (${MUST_REQUIRE})`,
      );
    }
  }
}

function compileValidator(ajv: Ajv, schema: Record<string, unknown>): ValidateFunction {
  let check: ValidateFunction;
  try {
    check = ajv.compile(schema);
  } catch (err) {
    // The checks above should leave nothing for ajv to refuse; if it still
    // does, the stream is refused all the same, in ajv's words.
    if (!(err instanceof Error)) throw err;
    throw new SchemaError(`schema: ${err.message}`);
  } finally {
    ajv.removeSchema(schema);
  }
  return check;
}

/**
 * Generates `encode` for `columns`: `JSON.stringify` of an object literal
 * that copies the row's columns in column order, so the output is a
 * key-ordered JSON.stringify by construction. Names reach the generated code
 * only as JSON.stringify'd literals (valid JS string literals since ES2019,
 * lone surrogates escaped), never raw; `__proto__` is written as a computed
 * key, the one literal key form that defines an own property of that name.
 *
 * Concatenating the JSON text directly (`'{"price":' + r["price"] + …`) was
 * measured too (bench/encode_bench.ts): it is about as fast on its own when
 * the numbers repeat, slower when they do not (`"" + number` goes through
 * V8's number-string cache, JSON.stringify does not), and it returns a rope
 * that costs more than the whole encode to flatten when the row is written
 * out. The literal copy with its fixed shape stays on V8's fast
 * JSON.stringify path and returns a flat string.
 */
function generateEncoder(columns: readonly Column[]): (row: Record<string, unknown>) => string {
  const fields = columns.map(({ name }) => {
    const key = JSON.stringify(name);
    return `${name === "__proto__" ? `[${key}]` : key}: r[${key}]`;
  });
  const body = `"use strict";\nreturn function encode(r) {\n  return stringify({ ${
    fields.join(", ")
  } });\n};`;
  return new Function("stringify", body)(JSON.stringify);
}

/** Turns ajv's first error into one line in JSON Schema terms. */
function describe(
  error: ErrorObject,
  row: Record<string, unknown>,
  prefix: string,
  types: Map<string, string>,
): string {
  const path = prefix + error.instancePath;
  const name = pointerUnescape(path.slice(1));
  const where = path === "" ? "" : `${display(path)}: `;
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case "required":
      return `${where}must have required property ${display(String(params.missingProperty))}`;
    case "additionalProperties":
      return `${where}must NOT have additional property ${
        display(String(params.additionalProperty))
      }`;
    case "type": {
      if (path !== "" && !Object.hasOwn(row, name)) {
        return `must have required property ${display(name)}`;
      }
      const value = row[name];
      const expected = types.get(name) ?? String(params.type);
      if (typeof value === "number" && !Number.isFinite(value)) {
        return `${where}must be ${expected}, got ${value} (JSON has no NaN or Infinity)`;
      }
      return `${where}must be ${expected}`;
    }
    case "format": {
      const rule = FORMAT_RULES[String(params.format)];
      if (rule !== undefined) {
        return `${where}must match format "${params.format}" (${rule}), got ${row[name]}`;
      }
      return `${where}${error.message}`;
    }
    default:
      return `${where}${error.message}`;
  }
}

/** `"integer"`, or `"integer or null"` with null last whatever order the schema lists them in. */
function typeText(type: unknown): string {
  if (!Array.isArray(type)) return String(type);
  return [...type.filter((t) => t !== "null"), "null"].join(" or ");
}

function isOfType(value: unknown, type: ColumnType): boolean {
  switch (type) {
    case "boolean":
      return typeof value === "boolean";
    case "string":
      return typeof value === "string";
    default:
      return typeof value === "number" && Number.isFinite(value) && NUMBER_FORMATS[type](value);
  }
}

function checkJsonValue(value: unknown, at: string, depth: number): void {
  if (depth > MAX_VALUE_DEPTH) throw refuse(at, `nests deeper than ${MAX_VALUE_DEPTH} levels`);
  if (value === null || typeof value === "string" || typeof value === "boolean") return;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw refuse(at, `must be a JSON value, got ${value}`);
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item, i) => checkJsonValue(item, `${at}/${i}`, depth + 1));
    return;
  }
  if (isObject(value)) {
    for (const [key, item] of Object.entries(value)) {
      checkJsonValue(item, `${at}/${pointerEscape(key)}`, depth + 1);
    }
    return;
  }
  throw refuse(at, `must be a JSON value, got ${kindOf(value)}`);
}

function expectObject(value: unknown, at: string): Record<string, unknown> {
  if (!isObject(value)) throw refuse(at, `must be object, got ${kindOf(value)}`);
  return value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

function refuse(at: string, why: string): SchemaError {
  return new SchemaError(`schema${at === "" ? "" : ` ${display(at)}`}: ${why}`);
}

/**
 * `text` as is when it reads unambiguously on one line, else JSON-quoted
 * (whitespace, quotes, backslashes, control and format characters, lone
 * surrogates), so every message stays one line and every name is recoverable.
 */
function display(text: string): string {
  return /^[^\s"\\\p{C}]+$/u.test(text) ? text : JSON.stringify(text);
}

function pointerEscape(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}

function pointerUnescape(token: string): string {
  return token.replaceAll("~1", "/").replaceAll("~0", "~");
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const item of Object.values(value)) deepFreeze(item);
    Object.freeze(value);
  }
  return value;
}
