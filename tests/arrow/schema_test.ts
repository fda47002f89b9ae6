import {
  Binary,
  Dictionary,
  Field,
  Float16,
  Float64,
  Int16,
  Int32,
  LargeUtf8,
  List,
  Schema,
  TimestampMicrosecond,
  Uint32,
  Utf8,
} from "apache-arrow";
import { assert, assertEquals, assertThrows } from "../harness/assert.ts";
import { ArrowRowBuilder } from "../../arrow/row_builder.ts";
import { fromArrow, toArrow } from "../../arrow/schema.ts";
import { compileSchema } from "../../schema/compile.ts";
import { SchemaError } from "../../schema/schema_error.ts";
import { ALL_TYPES } from "../harness/duckdb.ts";

Deno.test("toArrow maps every column type and nullability", () => {
  const schema = toArrow(ALL_TYPES);
  assertEquals(
    schema.fields.map((f) => [f.name, String(f.type), f.nullable]),
    [
      ["b", "Bool", false],
      ["nb", "Bool", true],
      ["i32", "Int32", false],
      ["ni32", "Int32", true],
      ["i64", "Int64", false],
      ["ni64", "Int64", true],
      ["f", "Float32", false],
      ["nf", "Float32", true],
      ["d", "Float64", false],
      ["nd", "Float64", true],
      ["s", "Utf8", false],
      ["ns", "Utf8", true],
    ],
  );
  // A compiled schema gives the same.
  assertEquals(String(toArrow(compileSchema(ALL_TYPES))), String(schema));
});

Deno.test("fromArrow inverts toArrow exactly for every type", () => {
  const compiled = compileSchema(ALL_TYPES);
  const json = fromArrow(toArrow(compiled));
  assertEquals(compileSchema(json).columns, compiled.columns);
  // And the other way round: Arrow → JSON Schema → Arrow.
  const arrow = toArrow(compiled);
  const again = toArrow(fromArrow(arrow));
  assertEquals(
    again.fields.map((f) => [f.name, String(f.type), f.nullable]),
    arrow.fields.map((f) => [f.name, String(f.type), f.nullable]),
  );
  assertEquals((json.properties as Record<string, unknown>).ni64, {
    type: ["integer", "null"],
    format: "int64",
  });
  assertEquals(json.required, Object.keys(ALL_TYPES.properties));
  assertEquals(json.additionalProperties, false);
});

Deno.test("fromArrow keeps names JavaScript treats specially", () => {
  const json = fromArrow(
    new Schema([new Field("__proto__", new Utf8()), new Field("x", new Int32())]),
  );
  assertEquals(Object.keys(json.properties as object), ["__proto__", "x"]);
  assertEquals(compileSchema(json).columns.map((c) => c.name), ["__proto__", "x"]);
});

Deno.test("fromArrow refuses unsupported Arrow types by name", () => {
  const cases: [Field, string][] = [
    [new Field("ts", new TimestampMicrosecond()), "Timestamp<MICROSECOND>"],
    [new Field("u", new Uint32()), "Uint32"],
    [new Field("small", new Int16()), "Int16"],
    [new Field("half", new Float16()), "Float16"],
    [new Field("big", new LargeUtf8()), "LargeUtf8"],
    [new Field("raw", new Binary()), "Binary"],
    // A List of a supported type is a nested column now (issue 19); of another, refused.
    [new Field("tags", new List(new Field("item", new Uint32()))), "List<Uint32>"],
    [new Field("sym", new Dictionary(new Utf8(), new Int32())), "Dictionary<Int32, Utf8>"],
  ];
  for (const [field, name] of cases) {
    const err = assertThrows(
      () => fromArrow(new Schema([new Field("ok", new Float64()), field])),
      TypeError,
      `Arrow type ${name} is not supported`,
    );
    assert(err.message.includes(JSON.stringify(field.name)), err.message);
  }
});

Deno.test("fromArrow refuses duplicate names and names no column may have", () => {
  assertThrows(
    () => fromArrow(new Schema([new Field("a", new Utf8()), new Field("a", new Int32())])),
    TypeError,
    "appears twice",
  );
  assertThrows(
    () => fromArrow(new Schema([new Field("0", new Utf8())])),
    SchemaError,
    "array index",
  );
});

Deno.test("ArrowRowBuilder refuses a schema with an offset column", () => {
  assertThrows(
    () =>
      new ArrowRowBuilder({
        type: "object",
        properties: { offset: { type: "integer" } },
        required: ["offset"],
      }),
    TypeError,
    'column named "offset"',
  );
});
