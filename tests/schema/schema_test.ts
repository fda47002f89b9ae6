import * as assert from "node:assert/strict";
import { compileSchema } from "../../schema/compile.ts";
import type { Column, RowSchema } from "../../schema/row_schema.ts";
import { SchemaError } from "../../schema/schema_error.ts";

type Props = Record<string, unknown>;

/** A schema with `properties`, every one required. */
function table(properties: Props, extra: Props = {}): Props {
  return { type: "object", properties, required: Object.keys(properties), ...extra };
}

/** A schema declared as JSON text (the only way to write a `__proto__` property). */
function fromJson(text: string): RowSchema {
  return compileSchema(JSON.parse(text));
}

function refuses(json: unknown, message: string): void {
  let caught: unknown;
  try {
    compileSchema(json);
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof SchemaError, `expected a SchemaError, got ${caught}`);
  assert.equal(caught.message, message);
}

function refusesColumn(column: unknown, message: string): void {
  refuses(table({ x: column }), message);
}

const TRADES = table({
  event_ts: { type: "integer", format: "int64" },
  symbol: { type: "string" },
  price: { type: "number", format: "double" },
  amount: { type: "number", format: "double" },
  side: { type: "integer", format: "int32" },
  trade_id: { type: "integer", format: "int64" },
}, { additionalProperties: false });

const TRADE = {
  event_ts: 1_717_000_000_000_000,
  symbol: "BTC-USD",
  price: 60_000.25,
  amount: 0.5,
  side: 1,
  trade_id: 42,
};

// --- the column model ----------------------------------------------------

Deno.test("schema derives columns in declared order", () => {
  const schema = compileSchema(table({
    flag: { type: "boolean" },
    n: { type: "integer" },
    n32: { type: "integer", format: "int32" },
    n64: { type: "integer", format: "int64" },
    x: { type: "number" },
    f: { type: "number", format: "float" },
    d: { type: ["number", "null"], format: "double" },
    s: { type: ["null", "string"], format: "date-time" },
    b: { type: ["boolean", "null"] },
  }));
  const expected: Column[] = [
    { name: "flag", type: "boolean", nullable: false },
    { name: "n", type: "int64", nullable: false },
    { name: "n32", type: "int32", nullable: false },
    { name: "n64", type: "int64", nullable: false },
    { name: "x", type: "double", nullable: false },
    { name: "f", type: "float", nullable: false },
    { name: "d", type: "double", nullable: true },
    { name: "s", type: "string", nullable: true },
    { name: "b", type: "boolean", nullable: true },
  ];
  assert.deepEqual(schema.columns, expected);
  assert.ok(Object.isFrozen(schema.columns));
  assert.ok(Object.isFrozen(schema.columns[0]));
});

Deno.test("schema keeps the declared JSON as a frozen copy", () => {
  const declared: Props = {
    $schema: "http://json-schema.org/draft-07/schema#",
    $id: "https://example.com/trades.json",
    title: "Trades",
    description: "Fills",
    ...table({
      price: { type: "number", description: "USD", title: "Price", examples: [1.5, { a: [null] }] },
      side: { type: "integer", format: "int32", enum: [1, -1], minimum: -1, maximum: 1 },
    }),
    additionalProperties: false,
  };
  const schema = compileSchema(declared);
  const json: Props = schema.json;
  assert.deepEqual(json, declared);
  assert.deepEqual(Object.keys(schema.json.properties as Props), ["price", "side"]);
  assert.ok(Object.isFrozen(schema.json));
  assert.ok(Object.isFrozen((schema.json.properties as Record<string, Props>).price.examples));
  (declared.properties as Record<string, Props>).price.type = "string";
  assert.equal((schema.json.properties as Record<string, Props>).price.type, "number");
  assert.equal(schema.validate({ price: 1, side: 1 }), null);
});

Deno.test("schema accepts the string formats ajv-formats knows", () => {
  for (const format of ["date-time", "date", "time", "email", "uri", "uuid", "ipv4", "byte"]) {
    compileSchema(table({ s: { type: "string", format } }));
  }
  const schema = compileSchema(table({ at: { type: "string", format: "date-time" } }));
  assert.equal(schema.validate({ at: "2024-06-01T12:00:00Z" }), null);
  assert.equal(schema.validate({ at: "yesterday" }), '/at: must match format "date-time"');
});

Deno.test("schema accepts 1024 columns and names of 256 characters", () => {
  const properties: Props = {};
  for (let i = 0; i < 1024; i++) properties[`c${i}`] = { type: i % 2 ? "string" : "number" };
  const wide = compileSchema(table(properties));
  assert.equal(wide.columns.length, 1024);
  const row = Object.fromEntries(wide.columns.map((c, i) => [c.name, i % 2 ? `v${i}` : i / 7]));
  assert.equal(wide.validate(row), null);
  assert.equal(wide.encode(row), JSON.stringify(row));

  const long = "n".repeat(256);
  const emoji = "😀".repeat(256); // 256 characters, 512 UTF-16 code units
  const named = compileSchema(table({ [long]: { type: "boolean" }, [emoji]: { type: "boolean" } }));
  assert.deepEqual(named.columns.map((c) => c.name), [long, emoji]);
});

// --- refusals at declaration -------------------------------------------------

Deno.test("schema refuses a schema that is not an object", () => {
  refuses([], "schema: must be object, got array");
  refuses(null, "schema: must be object, got null");
  refuses('{"type":"object"}', "schema: must be object, got string");
  refuses(true, "schema: must be object, got boolean");
});

Deno.test("schema refuses unknown top-level keywords", () => {
  refuses(
    { ...table({ a: { type: "string" } }), patternProperties: {} },
    'schema: keyword "patternProperties" is not supported at the top level ' +
      "(allowed: $schema, $id, title, description, type, properties, required, " +
      "additionalProperties)",
  );
  refuses(
    { ...table({ a: { type: "string" } }), $defs: {} },
    'schema: keyword "$defs" is not supported at the top level ' +
      "(allowed: $schema, $id, title, description, type, properties, required, " +
      "additionalProperties)",
  );
});

Deno.test("schema refuses a top level that is not an object type", () => {
  const { type: _, ...untyped } = table({ a: { type: "string" } });
  refuses(untyped, 'schema: "type" is missing; it must be "object"');
  refuses({ ...untyped, type: "array" }, 'schema /type: must be "object", got "array"');
  refuses(
    { ...untyped, type: ["object", "null"] },
    'schema /type: must be "object", got ["object","null"]',
  );
});

Deno.test("schema refuses non-string annotations", () => {
  refuses(
    { ...table({ a: { type: "string" } }), $id: 7 },
    "schema /$id: must be string, got number",
  );
  refuses(
    { ...table({ a: { type: "string" } }), title: null },
    "schema /title: must be string, got null",
  );
});

Deno.test("schema refuses additionalProperties other than false", () => {
  refuses(
    table({ a: { type: "string" } }, { additionalProperties: true }),
    "schema /additionalProperties: only false is supported (a row carries exactly its columns), " +
      "got true",
  );
  refuses(
    table({ a: { type: "string" } }, { additionalProperties: { type: "string" } }),
    "schema /additionalProperties: only false is supported (a row carries exactly its columns), " +
      'got {"type":"string"}',
  );
});

Deno.test("schema refuses missing, empty or too many properties", () => {
  refuses(
    { type: "object", required: [] },
    'schema: "properties" is missing; it declares the columns',
  );
  refuses(
    { type: "object", properties: [], required: [] },
    "schema /properties: must be object (column names to column schemas), got array",
  );
  refuses(
    { type: "object", properties: {}, required: [] },
    "schema /properties: must declare at least one column",
  );
  const properties: Props = {};
  for (let i = 0; i < 1025; i++) properties[`c${i}`] = { type: "boolean" };
  refuses(
    table(properties),
    "schema /properties: declares 1025 columns; at most 1024 are supported",
  );
});

Deno.test("schema refuses a column that is not an object", () => {
  refusesColumn(true, "schema /properties/x: must be object, got boolean");
  refusesColumn("string", "schema /properties/x: must be object, got string");
});

Deno.test("schema takes object and array columns (nested columns, issue 19)", () => {
  const schema = compileSchema(
    table({ tags: { type: "array" }, meta: { type: ["object", "null"] } }),
  );
  assert.deepEqual(schema.columns.map((c) => [c.name, c.type, c.nullable]), [
    ["tags", "array", false],
    ["meta", "object", true],
  ]);
});

Deno.test("schema refuses null and unknown column types", () => {
  for (const type of ["null", "int"]) {
    refusesColumn(
      { type },
      `schema /properties/x: type "${type}" is not supported ` +
        "(columns are boolean, integer, number, string, object or array)",
    );
  }
  refusesColumn(
    {},
    'schema /properties/x: "type" is missing (one of boolean, integer, number, string, object or array, ' +
      'optionally with "null")',
  );
  refusesColumn(
    { type: 5 },
    'schema /properties/x/type: must be string or [T, "null"], got number',
  );
});

Deno.test("schema refuses type lists other than [T, null]", () => {
  for (
    const type of [["string", "integer"], ["string", "null", "integer"], ["null"], [], [
      "null",
      "null",
    ], ["string"]]
  ) {
    refusesColumn(
      { type },
      'schema /properties/x/type: a list of types must be [T, "null"] with T one of ' +
        `boolean, integer, number, string, object or array, got ${JSON.stringify(type)}`,
    );
  }
});

Deno.test("schema refuses unsupported column keywords by name", () => {
  const allowed = "a column allows type, format, description, title, minimum, maximum, " +
    "exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength, pattern, enum, examples, " +
    "properties, required, additionalProperties, patternProperties, propertyNames, " +
    "minProperties, maxProperties, dependencies, items, additionalItems, minItems, maxItems, " +
    "uniqueItems, contains";
  const cases: [string, unknown, string][] = [
    ["nullable", true, 'a nullable column says "type": [T, "null"]'],
    ["default", 0, "every column is required, so a default never applies"],
    ["const", 1, 'use "enum" with one value'],
    ["$ref", "#/x", "columns and their sub-schemas are declared inline"],
    [
      "oneOf",
      [],
      'a column has one type: boolean, integer, number, string, object or array, optionally with "null"',
    ],
    [
      "anyOf",
      [],
      'a column has one type: boolean, integer, number, string, object or array, optionally with "null"',
    ],
    [
      "allOf",
      [],
      'a column has one type: boolean, integer, number, string, object or array, optionally with "null"',
    ],
    ["$comment", "hi", allowed],
    ["readOnly", true, allowed],
    ["formatMinimum", "2020-01-01", allowed],
  ];
  for (const [keyword, value, hint] of cases) {
    refusesColumn(
      { type: "number", [keyword]: value },
      `schema /properties/x: keyword ${JSON.stringify(keyword)} is not supported (${hint})`,
    );
  }
});

Deno.test("schema refuses formats a column type does not have", () => {
  refusesColumn(
    { type: "integer", format: "int16" },
    'schema /properties/x/format: format "int16" is not supported for "integer" (int32 or int64)',
  );
  refusesColumn(
    { type: "integer", format: "double" },
    'schema /properties/x/format: format "double" is not supported for "integer" (int32 or int64)',
  );
  refusesColumn(
    { type: ["number", "null"], format: "int32" },
    'schema /properties/x/format: format "int32" is not supported for "number" (float or double)',
  );
  refusesColumn(
    { type: "boolean", format: "int32" },
    'schema /properties/x: keyword "format" does not apply to "boolean"',
  );
  refusesColumn(
    { type: "string", format: 3 },
    "schema /properties/x/format: must be string, got number",
  );
  let caught: unknown;
  try {
    compileSchema(table({ x: { type: "string", format: "int64" } }));
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof SchemaError);
  assert.match(
    caught.message,
    /^schema \/properties\/x\/format: unknown format "int64" for "string" \(known: .*date-time.*\)$/,
  );
  assert.doesNotMatch(caught.message, /int32|float|double/);
});

Deno.test("schema refuses keywords that do not apply to the column type", () => {
  refusesColumn(
    { type: "string", minimum: 0 },
    'schema /properties/x: keyword "minimum" does not apply to "string"',
  );
  refusesColumn(
    { type: "boolean", multipleOf: 2 },
    'schema /properties/x: keyword "multipleOf" does not apply to "boolean"',
  );
  refusesColumn(
    { type: "number", maxLength: 3 },
    'schema /properties/x: keyword "maxLength" does not apply to "number"',
  );
  refusesColumn(
    { type: "integer", pattern: "^1" },
    'schema /properties/x: keyword "pattern" does not apply to "integer"',
  );
});

Deno.test("schema refuses malformed keyword values", () => {
  refusesColumn(
    { type: "number", minimum: "0" },
    "schema /properties/x/minimum: must be number, got string",
  );
  refusesColumn(
    { type: "number", exclusiveMaximum: true },
    "schema /properties/x/exclusiveMaximum: must be number, got boolean",
  );
  refusesColumn(
    { type: "number", multipleOf: 0 },
    "schema /properties/x/multipleOf: must be > 0, got 0",
  );
  refusesColumn(
    { type: "string", minLength: -1 },
    "schema /properties/x/minLength: must be a non-negative integer, got -1",
  );
  refusesColumn(
    { type: "string", maxLength: 1.5 },
    "schema /properties/x/maxLength: must be a non-negative integer, got 1.5",
  );
  refusesColumn(
    { type: "string", pattern: 1 },
    "schema /properties/x/pattern: must be string, got number",
  );
  let caught: unknown;
  try {
    compileSchema(table({ x: { type: "string", pattern: "(" } }));
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof SchemaError);
  assert.match(caught.message, /^schema \/properties\/x\/pattern: must be a regular expression: /);
  refusesColumn(
    { type: "string", title: 1 },
    "schema /properties/x/title: must be string, got number",
  );
  refusesColumn(
    { type: "string", description: [] },
    "schema /properties/x/description: must be string, got array",
  );
});

Deno.test("schema refuses enum values outside the column", () => {
  refusesColumn(
    { type: "string", enum: [] },
    "schema /properties/x/enum: must be a non-empty array of the column's values",
  );
  refusesColumn(
    { type: "string", enum: "a" },
    "schema /properties/x/enum: must be a non-empty array of the column's values",
  );
  refusesColumn(
    { type: "string", enum: ["a", 1] },
    'schema /properties/x/enum/1: 1 is not a value of the column ("string")',
  );
  refusesColumn(
    { type: "string", enum: ["a", null] },
    'schema /properties/x/enum/1: null is not a value of the column ("string")',
  );
  refusesColumn(
    { type: "integer", format: "int32", enum: [1, 2 ** 31] },
    'schema /properties/x/enum/1: 2147483648 is not a value of the column ("integer", int32)',
  );
  refusesColumn(
    { type: ["integer", "null"], enum: [null, 1.5] },
    'schema /properties/x/enum/1: 1.5 is not a value of the column (["integer","null"], int64)',
  );
  compileSchema(table({ x: { type: ["string", "null"], enum: ["a", null] } }));
});

Deno.test("schema refuses examples that are not JSON", () => {
  refusesColumn(
    { type: "number", examples: 1 },
    "schema /properties/x/examples: must be array, got number",
  );
  refusesColumn(
    { type: "number", examples: [1, NaN] },
    "schema /properties/x/examples/1: must be a JSON value, got NaN",
  );
  refusesColumn(
    { type: "number", examples: [{ a: [undefined] }] },
    "schema /properties/x/examples/0/a/0: must be a JSON value, got undefined",
  );
});

Deno.test("schema refuses a required list that does not match the properties", () => {
  const properties = { a: { type: "string" }, b: { type: "number" } };
  const why = 'a row has every column; a column that may be empty says "type": [T, "null"]';
  refuses(
    { type: "object", properties },
    `schema: "required" is missing; it must list every property (${why})`,
  );
  refuses(
    { type: "object", properties, required: ["a"] },
    `schema /required: must list every property, missing "b" (${why})`,
  );
  refuses(
    { type: "object", properties, required: ["a", "b", "c"] },
    'schema /required/2: "c" is not a property',
  );
  refuses(
    { type: "object", properties, required: ["a", "b", "a"] },
    'schema /required/2: "a" is listed twice',
  );
  refuses(
    { type: "object", properties, required: "a" },
    "schema /required: must be array of property names, got string",
  );
  refuses(
    { type: "object", properties, required: ["a", 1] },
    "schema /required/1: must be string, got number",
  );
  // Order does not matter: column order is the order of "properties".
  const schema = compileSchema({ type: "object", properties, required: ["b", "a"] });
  assert.deepEqual(schema.columns.map((c) => c.name), ["a", "b"]);
});

Deno.test("schema refuses property names of 0 or over 256 characters", () => {
  refuses(
    table({ "": { type: "string" } }),
    "schema /properties/: property name must be 1 to 256 characters, got 0",
  );
  refuses(
    table({ ["n".repeat(257)]: { type: "string" } }),
    `schema /properties/${"n".repeat(257)}: property name must be 1 to 256 characters, got 257`,
  );
});

Deno.test("schema refuses property names with lone surrogates", () => {
  refuses(
    table({ "x\udc00y": { type: "string" } }),
    'schema "/properties/x\\udc00y": property name "x\\udc00y" is not well-formed Unicode ' +
      "(a lone surrogate at character 1)",
  );
});

Deno.test("schema refuses property names JavaScript orders as array indices", () => {
  for (const name of ["0", "12", "4294967294"]) {
    refuses(
      table({ a: { type: "string" }, [name]: { type: "string" } }),
      `schema /properties/${name}: property name "${name}" is an array index: JavaScript ` +
        "objects list such keys first, in numeric order, so the column order could not be " +
        `the declared order (use e.g. "c${name}")`,
    );
  }
  // Numeric-looking names that are not array indices keep their place.
  const names = ["b", "4294967295", "01", "-1", "1.5", "1e3", " 1"];
  const schema = compileSchema(
    table(Object.fromEntries(names.map((n) => [n, { type: "integer" }]))),
  );
  assert.deepEqual(schema.columns.map((c) => c.name), names);
});

Deno.test("schema error names the location with JSON Pointer escapes and quotes", () => {
  refuses(
    table({ "a/b~c": { type: "int" } }),
    'schema /properties/a~1b~0c: type "int" is not supported (columns are boolean, integer, number, string, object or array)',
  );
  refuses(
    table({ "two words\n": { type: "int" } }),
    'schema "/properties/two words\\n": type "int" is not supported ' +
      "(columns are boolean, integer, number, string, object or array)",
  );
});

Deno.test("schema errors are SchemaError", () => {
  const err = new SchemaError("x");
  assert.ok(err instanceof Error);
  assert.equal(err.name, "SchemaError");
});

// --- validation ------------------------------------------------------------------

Deno.test("validate accepts a valid row", () => {
  const schema = compileSchema(TRADES);
  assert.equal(schema.validate(TRADE), null);
  assert.equal(schema.validate(JSON.parse(JSON.stringify(TRADE))), null);
  assert.equal(schema.validate(Object.assign(Object.create(null), TRADE)), null);
});

Deno.test("validate refuses a row that is not an object", () => {
  const schema = compileSchema(TRADES);
  assert.equal(schema.validate([TRADE]), "must be object, got array");
  assert.equal(schema.validate(null), "must be object, got null");
  assert.equal(schema.validate(undefined), "must be object, got undefined");
  assert.equal(schema.validate(JSON.stringify(TRADE)), "must be object, got string");
  assert.equal(schema.validate(5), "must be object, got number");
});

Deno.test("validate refuses a missing column", () => {
  const schema = compileSchema(TRADES);
  const { price: _, ...row } = TRADE;
  assert.equal(schema.validate(row), "must have required property price");
  assert.equal(
    schema.validate({ ...TRADE, price: undefined }),
    "must have required property price",
  );
});

Deno.test("validate refuses an additional property", () => {
  const schema = compileSchema(TRADES);
  assert.equal(
    schema.validate({ ...TRADE, surprise: 1 }),
    "must NOT have additional property surprise",
  );
  assert.equal(
    schema.validate({ ...TRADE, "two words": 1 }),
    'must NOT have additional property "two words"',
  );
  // Declaring additionalProperties or not makes no difference: rows never carry extra keys.
  const { additionalProperties: _, ...open } = TRADES;
  assert.equal(
    compileSchema(open).validate({ ...TRADE, surprise: 1 }),
    "must NOT have additional property surprise",
  );
});

Deno.test("validate refuses a wrong type in JSON Schema terms", () => {
  const schema = compileSchema(TRADES);
  assert.equal(schema.validate({ ...TRADE, price: "60000.25" }), "/price: must be number");
  assert.equal(schema.validate({ ...TRADE, price: null }), "/price: must be number");
  assert.equal(schema.validate({ ...TRADE, symbol: 7 }), "/symbol: must be string");
  assert.equal(schema.validate({ ...TRADE, side: 1.5 }), "/side: must be integer");
  assert.equal(schema.validate({ ...TRADE, trade_id: 10n }), "/trade_id: must be integer");
  const flags = compileSchema(table({ ok: { type: "boolean" } }));
  assert.equal(flags.validate({ ok: 1 }), "/ok: must be boolean");
  assert.equal(flags.validate({ ok: false }), null);
});

Deno.test("validate accepts null only in nullable columns", () => {
  const schema = compileSchema(table({
    venue: { type: ["string", "null"], minLength: 2 },
    qty: { type: ["null", "integer"], format: "int32" },
    px: { type: ["number", "null"], format: "float" },
    ok: { type: ["boolean", "null"] },
    id: { type: "string" },
  }));
  assert.equal(schema.validate({ venue: null, qty: null, px: null, ok: null, id: "a" }), null);
  assert.equal(schema.validate({ venue: "XN", qty: 3, px: 1.5, ok: true, id: "a" }), null);
  assert.equal(
    schema.validate({ venue: 1, qty: null, px: null, ok: null, id: "a" }),
    "/venue: must be string or null",
  );
  assert.equal(
    schema.validate({ venue: "X", qty: null, px: null, ok: null, id: "a" }),
    "/venue: must NOT have fewer than 2 characters",
  );
  assert.equal(
    schema.validate({ venue: null, qty: 1.5, px: null, ok: null, id: "a" }),
    "/qty: must be integer or null",
  );
  assert.equal(
    schema.validate({ venue: null, qty: null, px: null, ok: null, id: null }),
    "/id: must be string",
  );
});

Deno.test("validate enforces the int32 range", () => {
  const schema = compileSchema(TRADES);
  assert.equal(schema.validate({ ...TRADE, side: 2147483647 }), null);
  assert.equal(schema.validate({ ...TRADE, side: -2147483648 }), null);
  const rule = "(an integer from -2147483648 to 2147483647)";
  assert.equal(
    schema.validate({ ...TRADE, side: 2147483648 }),
    `/side: must match format "int32" ${rule}, got 2147483648`,
  );
  assert.equal(
    schema.validate({ ...TRADE, side: -2147483649 }),
    `/side: must match format "int32" ${rule}, got -2147483649`,
  );
});

Deno.test("validate refuses an int64 that is not a safe integer", () => {
  const schema = compileSchema(TRADES);
  assert.equal(schema.validate({ ...TRADE, trade_id: Number.MAX_SAFE_INTEGER }), null);
  assert.equal(schema.validate({ ...TRADE, trade_id: Number.MIN_SAFE_INTEGER }), null);
  const rule = "(a safe integer, from -(2^53-1) to 2^53-1, which every JSON reader keeps exact)";
  assert.equal(
    schema.validate({ ...TRADE, trade_id: 2 ** 53 }),
    `/trade_id: must match format "int64" ${rule}, got 9007199254740992`,
  );
  assert.equal(
    schema.validate({ ...TRADE, event_ts: -1e300 }),
    `/event_ts: must match format "int64" ${rule}, got -1e+300`,
  );
  // An integer column without a format is int64, with the same rule.
  const plain = compileSchema(table({ n: { type: "integer" } }));
  assert.equal(
    plain.validate({ n: 2 ** 60 }),
    `/n: must match format "int64" ${rule}, got ${2 ** 60}`,
  );
});

Deno.test("validate refuses NaN and Infinity", () => {
  const schema = compileSchema(table({
    d: { type: "number" },
    f: { type: ["number", "null"], format: "float" },
    i: { type: "integer", format: "int32" },
  }));
  const ok = { d: 1, f: 1, i: 1 };
  assert.equal(schema.validate(ok), null);
  const note = "(JSON has no NaN or Infinity)";
  assert.equal(schema.validate({ ...ok, d: NaN }), `/d: must be number, got NaN ${note}`);
  assert.equal(schema.validate({ ...ok, d: Infinity }), `/d: must be number, got Infinity ${note}`);
  assert.equal(
    schema.validate({ ...ok, f: -Infinity }),
    `/f: must be number or null, got -Infinity ${note}`,
  );
  assert.equal(schema.validate({ ...ok, i: NaN }), `/i: must be integer, got NaN ${note}`);
});

Deno.test("validate enforces the float range", () => {
  const schema = compileSchema(table({ f: { type: "number", format: "float" } }));
  assert.equal(schema.validate({ f: 3.4028234663852886e38 }), null);
  assert.equal(schema.validate({ f: 0.1 }), null); // not exact in float32: rounding is fine
  assert.equal(
    schema.validate({ f: -3.5e38 }),
    '/f: must match format "float" (a number within ±3.4028234663852886e+38, the float range), ' +
      "got -3.5e+38",
  );
});

Deno.test("validate reports the other keywords in ajv's words", () => {
  const schema = compileSchema(table({
    side: { type: "integer", enum: [1, -1] },
    px: { type: "number", exclusiveMinimum: 0, multipleOf: 0.5 },
    sym: { type: "string", pattern: "^[A-Z]+-[A-Z]+$", maxLength: 9 },
  }));
  const ok = { side: 1, px: 1.5, sym: "BTC-USD" };
  assert.equal(schema.validate(ok), null);
  assert.equal(
    schema.validate({ ...ok, side: 0 }),
    "/side: must be equal to one of the allowed values",
  );
  assert.equal(schema.validate({ ...ok, px: 0 }), "/px: must be > 0");
  assert.equal(schema.validate({ ...ok, px: 0.7 }), "/px: must be multiple of 0.5");
  assert.equal(
    schema.validate({ ...ok, sym: "btc" }),
    '/sym: must match pattern "^[A-Z]+-[A-Z]+$"',
  );
  assert.equal(schema.validate({ ...ok, sym: "BTCX-USDX" }), null);
  assert.equal(
    schema.validate({ ...ok, sym: "BTCXX-USDX" }),
    "/sym: must NOT have more than 9 characters",
  );
});

Deno.test("validate names tricky columns unambiguously", () => {
  const schema = compileSchema(table({
    "a/b~c": { type: "number" },
    "two words": { type: "number" },
    constructor: { type: "number" },
  }));
  const ok = { "a/b~c": 1, "two words": 2, constructor: 3 };
  assert.equal(schema.validate(ok), null);
  assert.equal(schema.validate({ ...ok, "a/b~c": "1" }), "/a~1b~0c: must be number");
  assert.equal(schema.validate({ ...ok, "two words": "2" }), '"/two words": must be number');
  assert.equal(schema.validate({ ...ok, constructor: "3" }), "/constructor: must be number");
  const { constructor: _, ...missing } = ok;
  // Object.prototype.constructor is inherited, not a column value.
  assert.equal(schema.validate(missing), "must have required property constructor");
});

Deno.test("validate handles a __proto__ column", () => {
  const schema = fromJson(
    '{"type":"object","properties":{"a":{"type":"string"},"__proto__":{"type":["number","null"]}},' +
      '"required":["a","__proto__"]}',
  );
  assert.deepEqual(schema.columns.map((c) => c.name), ["a", "__proto__"]);
  assert.equal(schema.validate(JSON.parse('{"__proto__":1.5,"a":"x"}')), null);
  assert.equal(schema.validate(JSON.parse('{"__proto__":null,"a":"x"}')), null);
  assert.equal(schema.validate({ a: "x" }), "must have required property __proto__");
  assert.equal(
    schema.validate(JSON.parse('{"__proto__":"1","a":"x"}')),
    "/__proto__: must be number or null",
  );
  assert.equal(
    schema.validate(JSON.parse('{"__proto__":1,"a":1}')),
    "/a: must be string",
  );
  assert.equal(
    schema.validate(JSON.parse('{"__proto__":1,"a":"x","b":2}')),
    "must NOT have additional property b",
  );
  // Without a __proto__ column, an own __proto__ key is an additional property.
  assert.equal(
    compileSchema(table({ a: { type: "string" } })).validate(JSON.parse('{"a":"x","__proto__":1}')),
    "must NOT have additional property __proto__",
  );
});

// --- encoding ----------------------------------------------------------------

/** Mulberry32: a small seeded PRNG, so a failure reproduces. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const EDGE_DOUBLES = [
  0,
  -0,
  1,
  -1,
  0.1,
  1 / 3,
  1e21,
  1e-7,
  1e-6,
  123456789.123,
  5e-324,
  -5e-324,
  Number.MAX_VALUE,
  -Number.MAX_VALUE,
  Number.MIN_VALUE,
  Number.EPSILON,
  2 ** 53,
  Number.MAX_SAFE_INTEGER,
];
const CODE_UNITS = [
  "a",
  "Z",
  " ",
  '"',
  "\\",
  "/",
  "'",
  "`",
  "$",
  "{",
  "\n",
  "\r",
  "\t",
  "\b",
  "\f",
  "\0",
  "\x1f",
  "\x7f",
  "é",
  "ß",
  "中",
  "\u2028",
  "\u2029",
  "\ufeff",
  "\ud800",
  "\udfff",
  "😀",
  "</script>",
];

function randomValue(column: Column, random: () => number): unknown {
  if (column.nullable && random() < 0.2) return null;
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const bits = new Float64Array(1);
  const words = new Uint32Array(bits.buffer);
  switch (column.type) {
    case "boolean":
      return random() < 0.5;
    case "string": {
      let text = "";
      const length = Math.floor(random() * 24);
      for (let i = 0; i < length; i++) text += pick(CODE_UNITS);
      return text;
    }
    case "int32":
      return random() < 0.3
        ? pick([0, -0, 1, -1, 2147483647, -2147483648])
        : Math.floor(random() * 2 ** 32) - 2 ** 31;
    case "int64":
      return random() < 0.3
        ? pick([0, -0, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 2 ** 31, 1e15])
        : Math.floor((random() * 2 - 1) * Number.MAX_SAFE_INTEGER);
    case "float":
      return random() < 0.3 ? pick([0, -0, 3.4028234663852886e38, 1e-45]) : Math.fround(
        (random() * 2 - 1) * 10 ** Math.floor(random() * 60 - 30),
      );
    case "double": {
      if (random() < 0.3) return pick(EDGE_DOUBLES);
      for (;;) {
        words[0] = Math.floor(random() * 2 ** 32);
        words[1] = Math.floor(random() * 2 ** 32);
        if (Number.isFinite(bits[0])) return bits[0];
      }
    }
    case "object":
    case "array": {
      // Through JSON text, as a row arrives: keys in the producer's order,
      // integer-like keys and __proto__ included.
      const tree = (depth: number): string => {
        const r = random();
        if (depth > 3 || r < 0.3) return pick(["1", "-0.5", "1e300", '"x\u2028"', "true", "null"]);
        const n = Math.floor(random() * 4);
        const items = Array.from({ length: n }, () => tree(depth + 1));
        return r < 0.65
          ? `[${items.join(",")}]`
          : `{${
            items.map((v) => `${JSON.stringify(pick(["b", "a", "1", "__proto__", "é"]))}:${v}`)
              .join(",")
          }}`;
      };
      for (;;) {
        const v = JSON.parse(tree(0));
        if (
          column.type === "array"
            ? Array.isArray(v)
            : v !== null && typeof v === "object" && !Array.isArray(v)
        ) return v;
      }
    }
  }
}

/** A row with the columns in a random key order. */
function randomRow(schema: RowSchema, random: () => number): Record<string, unknown> {
  const entries = schema.columns.map((c) => [c.name, randomValue(c, random)] as const);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [entries[i], entries[j]] = [entries[j], entries[i]];
  }
  return Object.fromEntries(entries);
}

function keyOrdered(schema: RowSchema, row: Record<string, unknown>): Record<string, unknown> {
  // fromEntries defines own properties, so a __proto__ column stays a key.
  return Object.fromEntries(schema.columns.map((c) => [c.name, row[c.name]]));
}

function assertEncodesLikeStringify(schema: RowSchema, rows: number, seed: number): void {
  const random = prng(seed);
  for (let i = 0; i < rows; i++) {
    const row = randomRow(schema, random);
    assert.equal(schema.validate(row), null, `seed ${seed} row ${i} refused`);
    const expected = JSON.stringify(keyOrdered(schema, row));
    const actual = schema.encode(row);
    if (actual !== expected) {
      assert.fail(`seed ${seed} row ${i}:\n  encode    ${actual}\n  stringify ${expected}`);
    }
    assert.deepEqual(Object.keys(JSON.parse(actual)), schema.columns.map((c) => c.name));
  }
}

const TRICKY_NAMES = [
  "a\"b'c\u2028",
  "__proto__",
  "constructor",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "\\",
  "\\u0041",
  "`${globalThis.pwned = 1}`",
  '"]; globalThis.pwned = 1; //',
  "'); globalThis.pwned = 1; ('",
  "*/ globalThis.pwned = 1; /*",
  "</script>",
  "\n",
  "\u2029",
  "😀",
  "%",
  "%zz",
  "a#b",
  "#/properties",
  "$id",
  "$ref",
  "4294967295",
  "01",
  "-1",
  " ",
  "a/b~c",
  "then",
];

Deno.test("encode matches JSON.stringify on random trade rows", () => {
  assertEncodesLikeStringify(compileSchema(TRADES), 5000, 1);
});

Deno.test("encode matches JSON.stringify on random rows of every column type", () => {
  const schema = compileSchema(table({
    flag: { type: "boolean" },
    n32: { type: "integer", format: "int32" },
    n64: { type: "integer" },
    f: { type: "number", format: "float" },
    d: { type: "number" },
    s: { type: "string" },
    flag_n: { type: ["boolean", "null"] },
    n32_n: { type: ["integer", "null"], format: "int32" },
    n64_n: { type: ["integer", "null"], format: "int64" },
    f_n: { type: ["number", "null"], format: "float" },
    d_n: { type: ["number", "null"], format: "double" },
    s_n: { type: ["string", "null"] },
    o: { type: "object" },
    a_n: { type: ["array", "null"] },
  }));
  assertEncodesLikeStringify(schema, 5000, 2);
});

Deno.test("encode matches JSON.stringify on random schemas with tricky names", () => {
  const random = prng(3);
  const types = [
    { type: "boolean" },
    { type: "integer", format: "int32" },
    { type: "integer" },
    { type: "number", format: "float" },
    { type: "number" },
    { type: "string" },
    { type: ["string", "null"] },
    { type: ["number", "null"] },
  ];
  for (let s = 0; s < 50; s++) {
    const names = TRICKY_NAMES.filter(() => random() < 0.5);
    if (names.length === 0) names.push("\u2028");
    // Properties via JSON text, the only way a __proto__ property is declared.
    const properties = "{" +
      names.map((n) => `${JSON.stringify(n)}:${JSON.stringify(types[s % types.length])}`).join(
        ",",
      ) +
      "}";
    const schema = fromJson(
      `{"type":"object","properties":${properties},"required":${JSON.stringify(names)}}`,
    );
    assert.deepEqual(schema.columns.map((c) => c.name), names);
    assertEncodesLikeStringify(schema, 100, 100 + s);
  }
  assert.equal((globalThis as Record<string, unknown>).pwned, undefined);
});

Deno.test("encode handles every tricky name at once without injection", () => {
  const text = `{"type":"object","properties":{${
    TRICKY_NAMES.map((n) => `${JSON.stringify(n)}:{"type":"string"}`).join(",")
  }},"required":${JSON.stringify(TRICKY_NAMES)}}`;
  const schema = fromJson(text);
  const row = JSON.parse(
    `{${TRICKY_NAMES.map((n) => `${JSON.stringify(n)}:${JSON.stringify(n)}`).join(",")}}`,
  );
  assert.equal(schema.validate(row), null);
  const encoded = schema.encode(row);
  assert.equal(encoded, JSON.stringify(keyOrdered(schema, row)));
  assert.equal(encoded, JSON.stringify(row)); // JSON.parse kept the declared order
  assert.equal((globalThis as Record<string, unknown>).pwned, undefined);
});

Deno.test("encode writes keys in column order whatever the row's order", () => {
  const schema = compileSchema(TRADES);
  const reversed = Object.fromEntries(Object.entries(TRADE).reverse());
  assert.equal(
    schema.encode(reversed),
    '{"event_ts":1717000000000000,"symbol":"BTC-USD","price":60000.25,"amount":0.5,"side":1,' +
      '"trade_id":42}',
  );
});

Deno.test("encode works detached from its schema", () => {
  const { encode, validate } = compileSchema(TRADES);
  assert.equal(validate(TRADE), null);
  assert.equal(encode(TRADE), JSON.stringify(TRADE));
});

Deno.test("schema compiles independent validators for the same $id", () => {
  const a = compileSchema({ $id: "urn:x", ...table({ v: { type: "string" } }) });
  const b = compileSchema({ $id: "urn:x", ...table({ v: { type: "number" } }) });
  assert.equal(a.validate({ v: "s" }), null);
  assert.equal(b.validate({ v: "s" }), "/v: must be number");
  assert.equal(b.validate({ v: 1 }), null);
});

Deno.test("schema validators keep working across many compiles", () => {
  const first = compileSchema(table({ v: { type: "string", pattern: "^first$" } }));
  let last = first;
  for (let i = 0; i < 600; i++) {
    last = compileSchema(table({ v: { type: "string", pattern: `^${i}$` } }));
  }
  assert.equal(first.validate({ v: "first" }), null);
  assert.equal(first.validate({ v: "599" }), '/v: must match pattern "^first$"');
  assert.equal(last.validate({ v: "599" }), null);
});

Deno.test("schema takes values nested to the row limit and refuses a schema nested past its own, without recursing", async () => {
  const { MAX_ROW_DEPTH, MAX_SCHEMA_DEPTH } = await import("../../schema/rules.ts");
  const objects = (levels: number) => {
    let inner: Record<string, unknown> = { type: "integer" };
    for (let i = 0; i < levels; i++) {
      inner = { type: "object", properties: { a: inner }, required: ["a"] };
    }
    return { type: "object", properties: { x: inner }, required: ["x"] };
  };
  const arrays = (levels: number) => {
    let inner: Record<string, unknown> = { type: "integer" };
    for (let i = 0; i < levels; i++) inner = { type: "array", items: inner };
    return { type: "object", properties: { x: inner }, required: ["x"] };
  };
  // A schema for values as deep as a row may nest is taken.
  compileSchema(objects(MAX_ROW_DEPTH));
  compileSchema(arrays(MAX_ROW_DEPTH));
  // Deep enough to overflow the stack of a recursive walk: refused by name.
  for (const json of [objects(100_000), arrays(100_000), arrays(MAX_SCHEMA_DEPTH)]) {
    assert.throws(() => compileSchema(json), (err: Error) => {
      assert.ok(err instanceof SchemaError, `${err.name}: ${err.message.slice(0, 200)}`);
      assert.match(
        err.message,
        new RegExp(`nests deeper than ${MAX_SCHEMA_DEPTH} levels \\(at /properties/x/`),
      );
      assert.ok(err.message.length < 200, `${err.message.length} characters`);
      return true;
    });
  }
});
