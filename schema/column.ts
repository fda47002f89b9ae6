/**
 * Compiling one property of a stream's schema into a {@linkcode Column}:
 * its type and format, nullability, and the keywords that may refine it,
 * refused in JSON Schema's terms when they do not fit (see `rules.ts`).
 *
 * @module
 */

import { isObject, kindOf, pointerEscape } from "./_json.ts";
import type { Column, ColumnType } from "./row_schema.ts";
import { deriveNested } from "./nested.ts";
import {
  ARRAY_KEYWORDS,
  BASE_TYPES,
  BASE_TYPES_TEXT,
  type BaseType,
  COLUMN_KEYWORDS,
  KEYWORD_HINTS,
  MAX_NAME_CHARS,
  MAX_VALUE_DEPTH,
  NUMBER_FORMATS,
  NUMBER_KEYWORDS,
  OBJECT_KEYWORDS,
  STRING_KEYWORDS,
} from "./rules.ts";
import { refuse } from "./schema_error.ts";

/**
 * Checks one property schema (at JSON Pointer `at`); returns its column and
 * the schema ajv compiles for it. `stringFormats` are the formats a string
 * column may name (ajv's, from `getAjv`).
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { compileColumn } from "./column.ts";
 * const { column, derived } = compileColumn("n", { type: "integer" }, "/properties/n", []);
 * deepEqual(column, { name: "n", type: "int64", nullable: false });
 * deepEqual(derived, { type: "integer", format: "int64" });
 * ```
 */
export function compileColumn(
  name: string,
  spec: unknown,
  at: string,
  stringFormats: readonly string[],
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
    case "object":
    case "array":
      if (format !== undefined) {
        throw refuse(at, `keyword "format" does not apply to "${base}"`);
      }
      type = base;
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
    } else if (OBJECT_KEYWORDS.has(key) || ARRAY_KEYWORDS.has(key)) {
      // Their values are sub-schemas and counts, which ajv checks (compile.ts).
      const applies = OBJECT_KEYWORDS.has(key) ? "object" : "array";
      if (base !== applies) {
        throw refuse(
          at,
          `keyword ${JSON.stringify(key)} applies to "${applies}" columns, not "${base}"`,
        );
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

  if (type === "object" || type === "array") {
    const schema = JSON.parse(JSON.stringify(prop)) as Record<string, unknown>;
    return { column: { name, type, nullable, schema }, derived: deriveNested(prop) };
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

/**
 * Checks a property name: 1 to {@linkcode MAX_NAME_CHARS} characters of
 * well-formed Unicode, and not an array index (JavaScript would list it
 * first, out of the declared order).
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { checkName } from "./column.ts";
 * checkName("price", "/properties/price");
 * throws(() => checkName("0", "/properties/0"), /is an array index/);
 * ```
 */
export function checkName(name: string, at: string): void {
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

function isOfType(value: unknown, type: ColumnType): boolean {
  switch (type) {
    case "boolean":
      return typeof value === "boolean";
    case "string":
      return typeof value === "string";
    case "object":
      return isObject(value);
    case "array":
      return Array.isArray(value);
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

/**
 * `value` as an object, or a refusal at `at` naming what it was.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { expectObject } from "./column.ts";
 * throws(() => expectObject([], "/properties/x"), /must be object, got array/);
 * ```
 */
export function expectObject(value: unknown, at: string): Record<string, unknown> {
  if (!isObject(value)) throw refuse(at, `must be object, got ${kindOf(value)}`);
  return value;
}
