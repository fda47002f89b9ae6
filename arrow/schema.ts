/**
 * The mapping between a stream's JSON Schema and an Arrow schema, both ways.
 *
 * | column type (JSON Schema)               | Arrow type |
 * |-----------------------------------------|------------|
 * | `boolean`                               | `Bool`     |
 * | `integer`, `format: "int32"`            | `Int32`    |
 * | `integer`, `format: "int64"` (default)  | `Int64`    |
 * | `number`, `format: "float"`             | `Float32`  |
 * | `number`, `format: "double"` (default)  | `Float64`  |
 * | `string`                                | `Utf8`     |
 *
 * | `object`, `array`, closed and typed     | `Struct`, `List` (any depth) |
 * | any other `object` or `array`           | `Utf8` of JSON text, extension `arrow.json` |
 *
 * A column declared `[T, "null"]` is a nullable field; every other field is
 * not nullable. Scalar columns are mapped by `scalar_type.ts`, nested ones by
 * `nested_type.ts`. Other Arrow types have no column type and are refused by
 * `fromArrow`, by name.
 *
 * @module
 */

import { Field, Schema, Type } from "apache-arrow";
import { compileSchema } from "../schema/compile.ts";
import type { Column, RowSchema } from "../schema/row_schema.ts";
import { isJsonField, nestedField, SCHEMA_KEY, schemaOfArrow } from "./nested_type.ts";
import { scalarArrowType } from "./scalar_type.ts";

function isRowSchema(schema: unknown): schema is RowSchema {
  const s = schema as RowSchema;
  return typeof s === "object" && s !== null && Array.isArray(s.columns) &&
    typeof s.encode === "function";
}

/**
 * `schema` compiled, unless it is compiled already.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { rowSchemaOf } from "./schema.ts";
 * const compiled = rowSchemaOf({ type: "object", properties: { n: { type: "integer" } }, required: ["n"] });
 * equal(rowSchemaOf(compiled), compiled);
 * ```
 */
export function rowSchemaOf(schema: RowSchema | Record<string, unknown>): RowSchema {
  return isRowSchema(schema) ? schema : compileSchema(schema);
}

/**
 * The Arrow schema of a stream's rows: one field per column, in order, typed
 * and nullable as declared (see the module doc for the mapping).
 *
 * @param schema A compiled schema, or a JSON Schema (compiled here).
 * @returns The Arrow schema (without the offset column).
 * @throws {SchemaError} If a JSON Schema is given and refused by `compileSchema`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { toArrow } from "./schema.ts";
 * const schema = toArrow({
 *   type: "object",
 *   properties: {
 *     side: { type: "integer", format: "int32" },
 *     venue: { type: ["string", "null"] },
 *   },
 *   required: ["side", "venue"],
 * });
 * equal(String(schema), "Schema<{ 0: side: Int32, 1: venue: Utf8 }>");
 * equal(schema.fields[1].nullable, true);
 * ```
 */
export function toArrow(schema: RowSchema | Record<string, unknown>): Schema {
  const { columns } = rowSchemaOf(schema);
  return new Schema(columns.map(columnField));
}

/**
 * The Arrow field of one column (nested columns by {@linkcode nestedField}).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { columnField } from "./schema.ts";
 * equal(String(columnField({ name: "px", type: "double", nullable: false }).type), "Float64");
 * ```
 */
export function columnField(c: Column): Field {
  if (c.type === "object" || c.type === "array") return nestedField(c);
  return new Field(c.name, scalarArrowType(c.type), c.nullable);
}

const SUPPORTED_ARROW = "Bool, Int32, Int64, Float32, Float64, Utf8, and Struct and List of them";

function columnOf(field: Field): Record<string, unknown> {
  const t = field.type;
  // Nested columns: the schema as declared when the field carries it, else
  // the one its Struct or List type says.
  const declared = field.metadata.get(SCHEMA_KEY);
  if (
    declared !== undefined &&
    (isJsonField(field) || t.typeId === Type.Struct || t.typeId === Type.List)
  ) {
    try {
      return JSON.parse(declared);
    } catch {
      throw new TypeError(`column ${JSON.stringify(field.name)}: ${SCHEMA_KEY} is not JSON`);
    }
  }
  if (isJsonField(field)) {
    throw new TypeError(
      `column ${JSON.stringify(field.name)}: JSON text (arrow.json) without ${SCHEMA_KEY} ` +
        "metadata does not say whether it holds objects or arrays",
    );
  }
  // A nested column's schema says its nullability; `fromArrow` adds a
  // scalar column's.
  const nested = t.typeId === Type.Struct || t.typeId === Type.List;
  const column = schemaOfArrow(t, nested && field.nullable);
  if (column !== null) return column;
  throw new TypeError(
    `column ${JSON.stringify(field.name)}: Arrow type ${t} is not supported ` +
      `(supported: ${SUPPORTED_ARROW})`,
  );
}

/**
 * The JSON Schema for an Arrow schema: the inverse of {@linkcode toArrow}.
 * Every field becomes a required column (`[T, "null"]` when the field is
 * nullable) with an explicit `format` for integers and numbers, and
 * `additionalProperties: false`; `fromArrow(toArrow(s))` has the columns of
 * `s`, and `toArrow(fromArrow(a))` equals `a`, for every supported type.
 *
 * @param schema An Arrow schema whose fields are Bool, Int32, Int64, Float32,
 *   Float64 or Utf8.
 * @returns A JSON Schema that `compileSchema` accepts.
 * @throws {TypeError} For any other Arrow type (named in the message, e.g.
 *   `Timestamp<MICROSECOND>`), or a name used by two fields.
 * @throws {SchemaError} For a field name no stream column may have.
 *
 * @example
 * ```ts
 * import { deepEqual, throws } from "node:assert/strict";
 * import { Field, Float64, Schema, TimestampMicrosecond, Utf8 } from "apache-arrow";
 * import { fromArrow } from "./schema.ts";
 * deepEqual(
 *   fromArrow(new Schema([new Field("symbol", new Utf8()), new Field("px", new Float64(), true)])),
 *   {
 *     type: "object",
 *     properties: {
 *       symbol: { type: "string" },
 *       px: { type: ["number", "null"], format: "double" },
 *     },
 *     required: ["symbol", "px"],
 *     additionalProperties: false,
 *   },
 * );
 * throws(
 *   () => fromArrow(new Schema([new Field("ts", new TimestampMicrosecond())])),
 *   /Arrow type Timestamp<MICROSECOND> is not supported/,
 * );
 * ```
 */
export function fromArrow(schema: Schema): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const field of schema.fields) {
    if (Object.hasOwn(properties, field.name)) {
      throw new TypeError(`column ${JSON.stringify(field.name)} appears twice in the Arrow schema`);
    }
    const column = columnOf(field);
    const { type } = column;
    const nested = Array.isArray(type) || type === "object" || type === "array";
    // defineProperty: a field named __proto__ must become an own property.
    Object.defineProperty(properties, field.name, {
      value: nested ? column : { ...column, type: field.nullable ? [type, "null"] : type },
      enumerable: true,
      writable: true,
      configurable: true,
    });
    required.push(field.name);
  }
  const json = { type: "object", properties, required, additionalProperties: false };
  compileSchema(json); // throws SchemaError for a name no column may have
  return json;
}
