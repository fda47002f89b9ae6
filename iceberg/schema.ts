/**
 * A stream's columns as an Iceberg table schema, with field ids, and the
 * Arrow schema of the table's Parquet data files (each field carrying its id
 * as `PARQUET:field_id`, which the Parquet writer stores as the column's
 * field id).
 *
 * | column (JSON Schema)                | Iceberg                         |
 * |-------------------------------------|---------------------------------|
 * | (the offset)                        | `streamcast_offset` long, id 1  |
 * | (the append time, µs)               | `streamcast_time` timestamptz, id 2 |
 * | `boolean`                           | `boolean`                       |
 * | `integer`, `format: "int32"`        | `int`                           |
 * | `integer` (int64)                   | `long`                          |
 * | `number`, `format: "float"`         | `float`                         |
 * | `number` (double)                   | `double`                        |
 * | `string`                            | `string`                        |
 * | `object`/`array`, closed and typed  | `struct` / `list`, ids of their own |
 * | any other `object`/`array`          | `string` (the value's JSON text) |
 *
 * A nullable column is optional; every other field is required.
 *
 * Field ids: the first schema's columns take 3, 4, … in order, then the
 * fields inside its nested columns take the next ids (a struct's fields
 * first, then what is inside each, in order; a list's element before what
 * is inside it). A later schema version (columns added at the end, §14)
 * keeps every id and gives its new columns the ids after the highest one
 * used so far, in the same way. The ids are a function of the schema
 * history alone, so they come out the same on every restart.
 *
 * @module
 */

import {
  type DataType,
  Field,
  List,
  Schema,
  Struct,
  TimestampMicrosecond,
  Type,
} from "apache-arrow";
import { scalarArrowType, type ScalarColumnType, scalarColumnType } from "../arrow/scalar_type.ts";
import { columnField } from "../arrow/schema.ts";
import { compileSchema } from "../schema/compile.ts";
import type { Column } from "../schema/row_schema.ts";

/**
 * The name of the offset column (field id 1).
 */
export const OFFSET_FIELD = "streamcast_offset";
/**
 * The name of the append-time column (field id 2).
 */
export const TIME_FIELD = "streamcast_time";
/**
 * The Arrow field metadata key the Parquet writer (arrow-rs) reads a field id from.
 */
export const FIELD_ID_KEY = "PARQUET:field_id";

/**
 * An Iceberg primitive type this table uses.
 */
export type IcebergPrimitive =
  | "boolean"
  | "int"
  | "long"
  | "float"
  | "double"
  | "string"
  | "timestamptz";

/**
 * An Iceberg list type (JSON form).
 */
export interface IcebergList {
  /** Always "list". */
  type: "list";
  /** The element's field id. */
  "element-id": number;
  /** Whether elements are never null. */
  "element-required": boolean;
  /** The element's type. */
  element: IcebergType;
}

/**
 * An Iceberg struct type (JSON form).
 */
export interface IcebergStruct {
  /** Always "struct". */
  type: "struct";
  /** The fields, in order. */
  fields: IcebergField[];
}

/**
 * An Iceberg type, as the table metadata's JSON writes it.
 */
export type IcebergType = IcebergPrimitive | IcebergList | IcebergStruct;

/**
 * One field of an Iceberg struct (or of the table schema).
 */
export interface IcebergField {
  /** The field id, unique in the table. */
  id: number;
  /** The name. */
  name: string;
  /** Whether the value is never null. */
  required: boolean;
  /** The type. */
  type: IcebergType;
}

/**
 * An Iceberg table schema (JSON form, as in the table metadata's `schemas`).
 */
export interface IcebergSchema {
  /** Always "struct". */
  type: "struct";
  /** The schema's id: the index of the stream's schema version it maps. */
  "schema-id": number;
  /** The columns. */
  fields: IcebergField[];
}

/**
 * The table's schemas, one per version of the stream's schema, and the
 * highest field id they use.
 */
export interface TableSchemas {
  /** One per schema version, oldest first; `schema-id` is the version's index. */
  schemas: IcebergSchema[];
  /** The highest field id used by any of them. */
  lastColumnId: number;
}

/** The Iceberg type of each scalar column type (and so of its Arrow type). */
const ICEBERG_TYPE: Record<ScalarColumnType, IcebergPrimitive> = {
  boolean: "boolean",
  int32: "int",
  int64: "long",
  float: "float",
  double: "double",
  string: "string",
};

/** The scalar column type of each Iceberg primitive but `timestamptz` (the append time's). */
const SCALAR_TYPE = Object.fromEntries(
  Object.entries(ICEBERG_TYPE).map(([column, iceberg]) => [iceberg, column]),
) as Record<Exclude<IcebergPrimitive, "timestamptz">, ScalarColumnType>;

// The Iceberg type of an Arrow type a column has (see `columnField`), its
// nested field ids not assigned yet (0).
function unassigned(type: DataType, nullable: boolean): IcebergType {
  const scalar = scalarColumnType(type);
  if (scalar !== null) return ICEBERG_TYPE[scalar];
  switch (type.typeId) {
    case Type.List: {
      const child = (type as List).children[0];
      return {
        type: "list",
        "element-id": 0,
        "element-required": !child.nullable,
        element: unassigned(child.type, child.nullable),
      };
    }
    case Type.Struct:
      return {
        type: "struct",
        fields: (type as Struct).children.map((f) => ({
          id: 0,
          name: f.name,
          required: !f.nullable,
          type: unassigned(f.type, f.nullable),
        })),
      };
  }
  throw new TypeError(`no Iceberg type for Arrow type ${type} (nullable: ${nullable})`);
}

/**
 * The Iceberg type of one of a stream's columns, its nested field ids not
 * assigned yet (0): that of its Arrow type, so a nested column that is JSON
 * text is a `string`.
 */
function columnType(c: Column): IcebergType {
  return unassigned(columnField(c).type, c.nullable);
}

// Gives the nested fields inside `type` ids from `next()`: a struct's own
// fields first, then what is inside each; a list's element, then inside it.
function assignNested(type: IcebergType, next: () => number): void {
  if (typeof type === "string") return;
  if (type.type === "list") {
    type["element-id"] = next();
    assignNested(type.element, next);
    return;
  }
  for (const f of type.fields) f.id = next();
  for (const f of type.fields) assignNested(f.type, next);
}

function sameShape(a: IcebergType, b: IcebergType): boolean {
  if (typeof a === "string" || typeof b === "string") return a === b;
  if (a.type === "list" && b.type === "list") {
    return a["element-required"] === b["element-required"] && sameShape(a.element, b.element);
  }
  if (a.type === "struct" && b.type === "struct") {
    return a.fields.length === b.fields.length &&
      a.fields.every((f, i) => {
        const g = b.fields[i];
        return f.name === g.name && f.required === g.required && sameShape(f.type, g.type);
      });
  }
  return false;
}

/**
 * The table's schemas for a stream's schema history (each version a JSON
 * Schema, oldest first; see the module doc for the ids).
 *
 * @throws {TypeError} If a column is named `streamcast_offset` or
 *   `streamcast_time`, or a later version changes a column an earlier one has.
 * @throws {SchemaError} If a version is not a schema a stream may have.
 *
 * @example
 * ```ts
 * import { deepEqual, equal } from "node:assert/strict";
 * import { tableSchemas } from "./schema.ts";
 * const v1 = {
 *   type: "object",
 *   properties: { px: { type: "number" }, levels: { type: "array", items: { type: "number" } } },
 *   required: ["px", "levels"],
 * };
 * const v2 = {
 *   ...v1,
 *   properties: { ...v1.properties, venue: { type: ["string", "null"] } },
 *   required: ["px", "levels", "venue"],
 * };
 * const { schemas, lastColumnId } = tableSchemas([v1, v2]);
 * deepEqual(schemas[0].fields.map((f) => [f.id, f.name]), [
 *   [1, "streamcast_offset"], [2, "streamcast_time"], [3, "px"], [4, "levels"],
 * ]);
 * deepEqual(schemas[0].fields[3].type, {
 *   type: "list", "element-id": 5, "element-required": true, element: "double",
 * });
 * deepEqual(schemas[1].fields[4], { id: 6, name: "venue", required: false, type: "string" });
 * equal(lastColumnId, 6);
 * ```
 */
export function tableSchemas(versions: readonly Record<string, unknown>[]): TableSchemas {
  let last = 2;
  const next = () => ++last;
  const schemas: IcebergSchema[] = [];
  let previous = new Map<string, IcebergField>();
  versions.forEach((json, index) => {
    const { columns } = compileSchema(json);
    const fields: IcebergField[] = [
      { id: 1, name: OFFSET_FIELD, required: true, type: "long" },
      { id: 2, name: TIME_FIELD, required: true, type: "timestamptz" },
    ];
    const fresh: IcebergField[] = [];
    for (const c of columns) {
      if (c.name === OFFSET_FIELD || c.name === TIME_FIELD) {
        throw new TypeError(
          `the stream has a column named "${c.name}", which the Iceberg table keeps for ` +
            "its own column; rename the column",
        );
      }
      const type = columnType(c);
      const old = previous.get(c.name);
      if (old) {
        if (old.required !== !c.nullable || !sameShape(old.type, type)) {
          throw new TypeError(
            `column "${c.name}" changed type between schema versions ${index - 1} and ${index}: ` +
              "an Iceberg table keeps a column's type",
          );
        }
        fields.push(old);
        continue;
      }
      const f: IcebergField = { id: 0, name: c.name, required: !c.nullable, type };
      fields.push(f);
      fresh.push(f);
    }
    for (const f of fresh) f.id = next();
    for (const f of fresh) assignNested(f.type, next);
    previous = new Map(fields.map((f) => [f.name, f]));
    schemas.push(structuredClone({ type: "struct", "schema-id": index, fields }));
  });
  return { schemas, lastColumnId: last };
}

/**
 * Checks that a stream with schema `json` can keep a table: no column named
 * `streamcast_offset` or `streamcast_time` (the table's own), nor `offset`
 * (the row builder's, as for exports).
 *
 * @throws {TypeError} Naming the column.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { checkTableColumns } from "./schema.ts";
 * const schema = (name: string) => ({ type: "object", properties: { [name]: { type: "integer" } }, required: [name] });
 * checkTableColumns(schema("n"));
 * throws(() => checkTableColumns(schema("streamcast_time")), /keeps for its own column/);
 * throws(() => checkTableColumns(schema("offset")), /"offset"/);
 * ```
 */
export function checkTableColumns(json: Record<string, unknown>): void {
  tableSchemas([json]);
  if (compileSchema(json).columns.some((c) => c.name === "offset")) {
    throw new TypeError(
      'the stream has a column named "offset", which the Iceberg table\'s data files (as ' +
        "Parquet exports) keep for the offset; rename the column",
    );
  }
}

function fieldMeta(id: number): Map<string, string> {
  return new Map([[FIELD_ID_KEY, String(id)]]);
}

function arrowOf(type: IcebergType): DataType {
  if (type === "timestamptz") return new TimestampMicrosecond("UTC");
  if (typeof type === "string") return scalarArrowType(SCALAR_TYPE[type]);
  if (type.type === "list") {
    return new List(
      new Field(
        "element",
        arrowOf(type.element),
        !type["element-required"],
        fieldMeta(type["element-id"]),
      ),
    );
  }
  return new Struct(type.fields.map(arrowField));
}

/**
 * The Arrow field of an Iceberg field, nested fields and all, each carrying
 * its field id (`PARQUET:field_id`); a list's element field is named
 * `element`, as Iceberg's Parquet files name it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { arrowField } from "./schema.ts";
 * const f = arrowField({ id: 2, name: "streamcast_time", required: true, type: "timestamptz" });
 * equal(String(f.type), "Timestamp<MICROSECOND, UTC>");
 * equal(f.metadata.get("PARQUET:field_id"), "2");
 * ```
 */
export function arrowField(f: IcebergField): Field {
  return new Field(f.name, arrowOf(f.type), !f.required, fieldMeta(f.id));
}

/**
 * The Arrow schema of a data file written with `schema`.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { arrowSchema, tableSchemas } from "./schema.ts";
 * const { schemas } = tableSchemas([
 *   { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
 * ]);
 * deepEqual(
 *   arrowSchema(schemas[0]).fields.map((f) => f.metadata.get("PARQUET:field_id")),
 *   ["1", "2", "3"],
 * );
 * ```
 */
export function arrowSchema(schema: IcebergSchema): Schema {
  return new Schema(schema.fields.map(arrowField));
}
