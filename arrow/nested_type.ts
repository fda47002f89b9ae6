/**
 * How a nested column (`object` or `array`) maps to Arrow, and its values.
 *
 * - A column whose sub-schema is **closed and typed all the way down** is a
 *   real nested Arrow type: an object with `properties`, every one of them in
 *   `required`, and `additionalProperties: false` is a `Struct` (fields in
 *   declared order); an array whose `items` is one typed schema is a `List`
 *   (element field `item`). The leaves are the column types of `toArrow`
 *   (Bool, Int32, Int64, Float32, Float64, Utf8), nullable when their type
 *   lists `"null"`. Composition keywords (`allOf`, `anyOf`, `oneOf`, `not`,
 *   `if`), tuples (`items` as a list), `patternProperties` and empty objects
 *   are not closed.
 * - Any other nested column is a `Utf8` column of JSON text — each value the
 *   bytes stored for it — marked as JSON with the canonical Arrow extension
 *   `arrow.json` (`ARROW:extension:name`), which Parquet writes as its JSON
 *   logical type.
 *
 * Every nested field also carries its column's schema as declared in the
 * field metadata `streamcast:schema`, so `fromArrow(toArrow(s))` gives the
 * schema back exactly.
 *
 * @module
 */

import {
  type DataType,
  Field,
  type Int32,
  type Int64,
  List,
  Struct,
  Type,
  Utf8,
} from "apache-arrow";
import type { Column } from "../schema/row_schema.ts";
import { scalarArrowType, type ScalarColumnType, scalarColumnType } from "./scalar_type.ts";

/**
 * The canonical Arrow extension name of JSON text columns.
 */
export const JSON_EXTENSION = "arrow.json";
/**
 * The field metadata key naming an Arrow extension type.
 */
export const EXTENSION_NAME_KEY = "ARROW:extension:name";
/**
 * The field metadata key holding a nested column's schema as declared (JSON).
 */
export const SCHEMA_KEY = "streamcast:schema";

const COMPOSITION = ["allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref"];

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The JSON Schema `type` and `format` of each scalar column type, as `schemaOfArrow` writes them. */
const SCALAR_JSON: Record<ScalarColumnType, { type: string; format?: string }> = {
  boolean: { type: "boolean" },
  int32: { type: "integer", format: "int32" },
  int64: { type: "integer", format: "int64" },
  float: { type: "number", format: "float" },
  double: { type: "number", format: "double" },
  string: { type: "string" },
};

/** The format of an `integer` or a `number` that names none. */
const DEFAULT_FORMAT: Readonly<Record<string, string>> = { integer: "int64", number: "double" };

/**
 * The scalar column type of a value of JSON Schema type `base` with `format`
 * (read in {@linkcode SCALAR_JSON}; a boolean or a string whatever its
 * format); null for a nested type or a format no column has.
 */
function scalarOfJson(base: string, format: unknown): ScalarColumnType | null {
  if (base === "boolean" || base === "string") return base;
  const wanted = format === undefined ? DEFAULT_FORMAT[base] : format;
  for (const [scalar, json] of Object.entries(SCALAR_JSON)) {
    if (json.type === base && json.format === wanted) return scalar as ScalarColumnType;
  }
  return null;
}

/** `T` and whether `"null"` is listed, for `type: T | [T, "null"]`; null: anything else. */
function baseOf(schema: Record<string, unknown>): { base: string; nullable: boolean } | null {
  const t = schema.type;
  if (typeof t === "string") return { base: t, nullable: false };
  if (Array.isArray(t) && t.length === 2 && t.includes("null")) {
    const base = t.find((x) => x !== "null");
    if (typeof base === "string") return { base, nullable: true };
  }
  return null;
}

/**
 * The Arrow type of a value described by `schema` when it is closed and
 * typed all the way down (see the module doc), with whether it is nullable;
 * `null` when it is not (the column is then JSON text).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { typedArrow } from "./nested_type.ts";
 * const levels = typedArrow({
 *   type: "array",
 *   items: { type: "array", items: { type: "number" } },
 * });
 * equal(String(levels?.type), "List<List<Float64>>");
 * equal(typedArrow({ type: "object" }), null);
 * ```
 */
export function typedArrow(schema: unknown): { type: DataType; nullable: boolean } | null {
  if (!isObject(schema) || COMPOSITION.some((k) => Object.hasOwn(schema, k))) return null;
  const t = baseOf(schema);
  if (t === null) return null;
  const { base, nullable } = t;
  const scalar = scalarOfJson(base, schema.format);
  if (scalar !== null) return { type: scalarArrowType(scalar), nullable };
  switch (base) {
    case "array": {
      if (!isObject(schema.items)) return null;
      const item = typedArrow(schema.items);
      if (item === null) return null;
      return { type: new List(new Field("item", item.type, item.nullable)), nullable };
    }
    case "object": {
      const props = schema.properties;
      const required = schema.required;
      if (!isObject(props) || schema.additionalProperties !== false) return null;
      if (Object.hasOwn(schema, "patternProperties")) return null;
      const names = Object.keys(props);
      if (names.length === 0 || !Array.isArray(required)) return null;
      if (names.some((n) => !required.includes(n))) return null;
      const fields: Field[] = [];
      for (const name of names) {
        const sub = typedArrow(props[name]);
        if (sub === null) return null;
        fields.push(new Field(name, sub.type, sub.nullable));
      }
      return { type: new Struct(fields), nullable };
    }
  }
  return null;
}

/**
 * The Arrow field of a nested column: its Struct or List, or JSON text (see
 * the module doc), with the column's schema in the metadata.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { nestedField } from "./nested_type.ts";
 * const f = nestedField({ name: "meta", type: "object", nullable: true, schema: { type: ["object", "null"] } });
 * equal(String(f.type), "Utf8");
 * equal(f.metadata.get("ARROW:extension:name"), "arrow.json");
 * ```
 */
export function nestedField(column: Column): Field {
  const metadata = new Map([[SCHEMA_KEY, JSON.stringify(column.schema ?? {})]]);
  const typed = typedArrow(column.schema);
  if (typed !== null) return new Field(column.name, typed.type, column.nullable, metadata);
  metadata.set(EXTENSION_NAME_KEY, JSON_EXTENSION);
  metadata.set("ARROW:extension:metadata", "");
  return new Field(column.name, new Utf8(), column.nullable, metadata);
}

/**
 * Whether `field` is JSON text (the `arrow.json` extension).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Field, Utf8 } from "apache-arrow";
 * import { isJsonField } from "./nested_type.ts";
 * equal(isJsonField(new Field("s", new Utf8())), false);
 * ```
 */
export function isJsonField(field: Field): boolean {
  return field.metadata.get(EXTENSION_NAME_KEY) === JSON_EXTENSION;
}

/**
 * The JSON Schema of an Arrow type that a nested column can have (the
 * inverse of {@linkcode typedArrow}); `null` for a type no column holds.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { Field, Float64, List } from "apache-arrow";
 * import { schemaOfArrow } from "./nested_type.ts";
 * deepEqual(schemaOfArrow(new List(new Field("item", new Float64(), false))), {
 *   type: "array",
 *   items: { type: "number", format: "double" },
 * });
 * ```
 */
export function schemaOfArrow(type: DataType, nullable = false): Record<string, unknown> | null {
  const typed = (base: string, extra: Record<string, unknown> = {}) => ({
    type: nullable ? [base, "null"] : base,
    ...extra,
  });
  const scalar = scalarColumnType(type);
  if (scalar !== null) {
    const { type: base, ...format } = SCALAR_JSON[scalar];
    return typed(base, format);
  }
  switch (type.typeId) {
    case Type.List: {
      const child = (type as List).children[0];
      const items = schemaOfArrow(child.type, child.nullable);
      return items === null ? null : typed("array", { items });
    }
    case Type.Struct: {
      const fields = (type as Struct).children;
      if (fields.length === 0) return null;
      const properties: Record<string, unknown> = {};
      for (const f of fields) {
        const sub = schemaOfArrow(f.type, f.nullable);
        if (sub === null || Object.hasOwn(properties, f.name)) return null;
        Object.defineProperty(properties, f.name, {
          value: sub,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return typed("object", {
        properties,
        required: fields.map((f) => f.name),
        additionalProperties: false,
      });
    }
  }
  return null;
}

/**
 * A parsed nested value turned into what an Arrow builder of `type` takes:
 * int64 values as `BigInt`, struct members looked up by field name (a
 * missing nullable member is null). A value that does not fit is a
 * `TypeError` naming `at` (a JSON Pointer, prefixed by the caller's place).
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { Field, Int64, List } from "apache-arrow";
 * import { toArrowValue } from "./nested_type.ts";
 * deepEqual(toArrowValue(new List(new Field("item", new Int64())), [1, 2], "/a"), [1n, 2n]);
 * ```
 */
export function toArrowValue(type: DataType, value: unknown, at: string): unknown {
  const bad = (what: string): never => {
    const text = JSON.stringify(value) ?? String(value);
    throw new TypeError(
      `${at} holds ${text.length > 40 ? `${text.slice(0, 40)}…` : text}, not ${what}`,
    );
  };
  switch (type.typeId) {
    case Type.Bool:
      return typeof value === "boolean" ? value : bad("a boolean");
    case Type.Int:
      if ((type as Int32 | Int64).bitWidth === 64) {
        return Number.isSafeInteger(value) ? BigInt(value as number) : bad("an int64");
      }
      return typeof value === "number" && (value | 0) === value ? value : bad("an int32");
    case Type.Float:
      return typeof value === "number" ? value : bad("a number");
    case Type.Utf8:
      return typeof value === "string" ? value : bad("a string");
    case Type.List: {
      if (!Array.isArray(value)) return bad("an array");
      const child = (type as List).children[0];
      return value.map((v, i) => {
        if (v === null) return child.nullable ? null : bad("an array without nulls");
        return toArrowValue(child.type, v, `${at}/${i}`);
      });
    }
    case Type.Struct: {
      if (!isObject(value)) return bad("an object");
      const out: Record<string, unknown> = {};
      for (const f of (type as Struct).children) {
        const v = Object.hasOwn(value, f.name) ? value[f.name] : null;
        let item: unknown = null;
        if (v === null) {
          if (!f.nullable) bad(`an object with ${JSON.stringify(f.name)}`);
        } else {item = toArrowValue(
            f.type,
            v,
            `${at}/${f.name.replaceAll("~", "~0").replaceAll("/", "~1")}`,
          );}
        Object.defineProperty(out, f.name, {
          value: item,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
  }
  throw new TypeError(`${at}: Arrow type ${type} is not a nested column type`);
}
