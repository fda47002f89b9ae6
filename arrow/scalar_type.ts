/**
 * The Arrow type of each scalar column type, and back: the one table that
 * `toArrow`, the leaves of nested columns and the Iceberg schema all use.
 *
 * | column type | Arrow type |
 * |-------------|------------|
 * | `boolean`   | `Bool`     |
 * | `int32`     | `Int32`    |
 * | `int64`     | `Int64`    |
 * | `float`     | `Float32`  |
 * | `double`    | `Float64`  |
 * | `string`    | `Utf8`     |
 *
 * @module
 */

import { Bool, type DataType, Float32, Float64, Int32, Int64, Type, Utf8 } from "apache-arrow";
import type { ColumnType } from "../schema/row_schema.ts";

/** A column type that holds one value: any but the nested `object` and `array`. */
export type ScalarColumnType = Exclude<ColumnType, "object" | "array">;

/**
 * The Arrow type of a scalar column type.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { scalarArrowType } from "./scalar_type.ts";
 * equal(String(scalarArrowType("int32")), "Int32");
 * equal(String(scalarArrowType("double")), "Float64");
 * ```
 */
export function scalarArrowType(type: ScalarColumnType): DataType {
  switch (type) {
    case "boolean":
      return new Bool();
    case "int32":
      return new Int32();
    case "int64":
      return new Int64();
    case "float":
      return new Float32();
    case "double":
      return new Float64();
    case "string":
      return new Utf8();
  }
}

/**
 * The scalar column type of an Arrow type (the inverse of
 * {@linkcode scalarArrowType}); `null` for a type no scalar column has
 * (unsigned or 8- and 16-bit integers, half floats, timestamps, nested types…).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Float32, Uint32 } from "apache-arrow";
 * import { scalarColumnType } from "./scalar_type.ts";
 * equal(scalarColumnType(new Float32()), "float");
 * equal(scalarColumnType(new Uint32()), null);
 * ```
 */
export function scalarColumnType(type: DataType): ScalarColumnType | null {
  switch (type.typeId) {
    case Type.Bool:
      return "boolean";
    case Type.Int: {
      const { isSigned, bitWidth } = type as Int32 | Int64;
      if (!isSigned) return null;
      return bitWidth === 32 ? "int32" : bitWidth === 64 ? "int64" : null;
    }
    case Type.Float: {
      const { precision } = type as Float32 | Float64;
      return precision === 1 ? "float" : precision === 2 ? "double" : null;
    }
    case Type.Utf8:
      return "string";
  }
  return null;
}
