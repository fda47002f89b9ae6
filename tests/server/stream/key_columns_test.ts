// The key of a stored row, read by scanning its text: the same as the key
// columns' values of the parsed row, for random rows whose other columns hold
// strings with escapes, nested objects and arrays (fresh seed, printed).
import { assertEquals, assertThrows } from "../../harness/assert.ts";
import { rng } from "../../harness/util.ts";
import { FRESH_SEED, seedBanner } from "../../harness/seeds.ts";
import { compileSchema } from "../../../schema/compile.ts";
import { KeyColumns } from "../../../server/stream/key_columns.ts";

console.log(seedBanner("key columns"));

const SCHEMA = compileSchema({
  type: "object",
  properties: {
    note: { type: "string" },
    deep: { type: "object" },
    venue: { type: "string" },
    list: { type: "array" },
    id: { type: "integer" },
    up: { type: "boolean" },
    px: { type: ["number", "null"] },
  },
  required: ["note", "deep", "venue", "list", "id", "up", "px"],
});

Deno.test("key columns: the key scanned from a row's text is its key columns' values", () => {
  const rand = rng(FRESH_SEED);
  const pieces = ['"', "\\", "}", "{", "]", ",", ":", "é", "\n", "a", '\\"'];
  const text = () =>
    Array.from({ length: Math.floor(rand() * 8) }, () => pieces[Math.floor(rand() * pieces.length)])
      .join("");
  const key = KeyColumns.of(SCHEMA, ["venue", "id", "up"]);
  for (let i = 0; i < 2000; i++) {
    const row = {
      note: text(),
      deep: { a: [text(), { b: text() }], c: rand() < 0.5 ? null : rand() },
      venue: text(),
      list: [text(), [text()], { x: text() }],
      id: Math.floor((rand() - 0.5) * 1e12),
      up: rand() < 0.5,
      px: rand() < 0.3 ? null : rand() * 100,
    };
    const json = SCHEMA.encode(row);
    const want = [row.venue, row.id, row.up].map((v) => JSON.stringify(v)).join(",");
    assertEquals(key.keyOf(json), want, `seed ${FRESH_SEED}: ${json}`);
    assertEquals(key.keyOfValues([row.venue, String(row.id), String(row.up)]), want);
  }
});

Deno.test("key columns: a row of an older schema (columns missing) is scanned name by name", () => {
  const key = KeyColumns.of(SCHEMA, ["venue", "id", "up"]);
  assertEquals(key.keyOf('{"note":"x","venue":"v","id":5,"up":true}'), '"v",5,true');
  assertEquals(key.keyOf('{"venue":"v","list":[],"up":false,"id":-1}'), '"v",-1,false');
});

Deno.test("key columns: a row without a key column has no key; bad values have none either", () => {
  const key = KeyColumns.of(SCHEMA, ["id"]);
  assertEquals(key.keyOf('{"note":"x"}'), null);
  assertEquals(key.keyOf("[1]"), null);
  assertEquals(key.keyOfValues(["1.5"]), null);
  assertEquals(key.keyOfValues(["1", "2"]), null);
  assertEquals(KeyColumns.of(SCHEMA, ["up"]).keyOfValues(["yes"]), null);
});

Deno.test("key columns: refused naming the column", () => {
  assertThrows(() => KeyColumns.of(SCHEMA, ["px"]), RangeError, 'key column "px" is double');
  assertThrows(() => KeyColumns.of(SCHEMA, ["deep"]), RangeError, 'key column "deep" is object');
  assertThrows(() => KeyColumns.of(SCHEMA, ["id", "id"]), RangeError, '"id" is given twice');
  assertThrows(() => KeyColumns.of(SCHEMA, []), RangeError, "at least one column");
});
