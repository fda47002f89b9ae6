import { ArrowRowBuilder } from "../../arrow/row_builder.ts";
import { compileSchema } from "../../schema/compile.ts";
import { batchRows } from "../../arrow/subscription.ts";
import { assertEquals, assertThrows } from "../harness/assert.ts";
import { rng } from "../harness/util.ts";

const schema = compileSchema({
  type: "object",
  properties: {
    i64: { type: "integer" },
    d: { type: "number" },
    f: { type: ["number", "null"], format: "float" },
    i32: { type: ["integer", "null"], format: "int32" },
    s: { type: ["string", "null"] },
    b: { type: "boolean" },
  },
  required: ["i64", "d", "f", "i32", "s", "b"],
});

function randomNumber(r: () => number): number {
  switch (Math.floor(r() * 10)) {
    case 0:
      return 0;
    case 1:
      return -0;
    case 2:
      return (r() - 0.5) * 10 ** Math.floor(r() * 40 - 20); // exponents both ways
    case 3:
      return Math.round((r() - 0.5) * 2e6) / 1000;
    case 4:
      return Number((r() * 1e5).toFixed(Math.floor(r() * 17)));
    case 5:
      return Number.MAX_VALUE * (r() < 0.5 ? -1 : 1);
    case 6:
      return Number.MIN_VALUE;
    case 7:
      return r() * 2 ** 53;
    default:
      return Math.round((r() - 0.5) * 2 ** 54);
  }
}

function randomString(r: () => number): string {
  const pieces = [
    "a",
    "BTC-USD",
    " ",
    '"',
    "\\",
    "\n",
    "\u0000",
    "\u001f",
    "é",
    "€",
    "𝄞",
    "\ud800",
    "/",
    "\u2028",
  ];
  let s = "";
  const n = Math.floor(r() * 6);
  for (let i = 0; i < n; i++) s += pieces[Math.floor(r() * (r() < 0.7 ? 2 : pieces.length))];
  return s;
}

function randomRow(r: () => number): Record<string, unknown> {
  const safe = Math.round((r() - 0.5) * 2 * Number.MAX_SAFE_INTEGER);
  return {
    i64: r() < 0.5 ? safe : Math.round((r() - 0.5) * 10 ** Math.floor(r() * 16)),
    d: randomNumber(r),
    f: r() < 0.2 ? null : Math.fround(randomNumber(r) % 3e38),
    i32: r() < 0.2 ? null : Math.round((r() - 0.5) * 2 ** 32) | 0,
    s: r() < 0.2 ? null : randomString(r),
    b: r() < 0.5,
  };
}

/** What the columns hold for a row: the JSON value, floats at single precision, strings as UTF-8 decodes them. */
function expected(row: Record<string, unknown>): Record<string, unknown> {
  const s = row.s as string | null;
  return {
    ...row,
    d: row.d,
    f: row.f === null ? null : Math.fround(row.f as number),
    i32: Object.is(row.i32, -0) ? 0 : row.i32,
    s: s === null ? null : new TextDecoder().decode(new TextEncoder().encode(s)),
  };
}

Deno.test("ArrowRowBuilder scans rows to the values JSON.parse gives, whatever their text", () => {
  const r = rng(42);
  const rows = Array.from({ length: 3000 }, () => randomRow(r));
  // As the encoder writes them, and in shapes the byte scanner leaves to the exact path.
  const texts = rows.map((row, i) => {
    if (i % 7 === 3) return JSON.stringify(row, null, 1); // whitespace
    if (i % 7 === 5) return JSON.stringify(Object.fromEntries(Object.entries(row).reverse())); // key order
    return schema.encode(row);
  });
  const builder = new ArrowRowBuilder(schema);
  const offsets = rows.map((_, i) => i + 1);
  const fromJson = batchRows(builder.fromJson(offsets, texts));
  const fromFrames = batchRows(builder.fromFrames(texts.map((t, i) => `[${i + 1},${t}]`)));
  for (let i = 0; i < rows.length; i++) {
    // JSON has no -0 (JSON.stringify writes 0): expect what the text says.
    const want: [number, Record<string, unknown>] = [i + 1, expected(JSON.parse(texts[i]))];
    assertEquals(fromJson[i], want, `row ${i}: ${texts[i]}`);
    assertEquals(fromFrames[i], want, `frame ${i}: ${texts[i]}`);
  }
});

Deno.test("ArrowRowBuilder reads numbers written in every JSON form", () => {
  const numbers = [
    "0",
    "-0",
    "1e2",
    "1E2",
    "1.5e-7",
    "-2.5E+3",
    "123456789012345",
    "1234567890123456",
    "0.1",
    "0.30000000000000004",
    "9007199254740991",
    "-9007199254740991",
    "4.9e-324",
    "1.7976931348623157e308",
    "12345.678901234567",
  ];
  const builder = new ArrowRowBuilder({
    type: "object",
    properties: { d: { type: "number" } },
    required: ["d"],
  });
  const got = batchRows(
    builder.fromJson(numbers.map((_, i) => i), numbers.map((n) => `{"d":${n}}`)),
  );
  assertEquals(got.map(([, row]) => row.d), numbers.map((n) => JSON.parse(n)));
  assertEquals(Object.is(got[1][1].d, -0), true);
});

Deno.test("ArrowRowBuilder refuses text that is not a JSON row", () => {
  const builder = new ArrowRowBuilder(schema);
  const good = schema.encode({ i64: 1, d: 1, f: null, i32: null, s: null, b: true });
  for (
    const [text, message] of [
      [good.slice(0, -1), "offset 5 is not valid JSON"],
      ["[1,2]", "offset 5 is not a JSON object"],
      [good.replace('"i64":1', '"i64":01'), "offset 5 is not valid JSON"],
      [good.replace('"i64":1', '"i64":1.5'), 'offset 5: column "i64" holds 1.5, not an int64'],
      [good.replace('"b":true', '"b":1'), 'offset 5: column "b" holds 1, not a boolean'],
      [good.replace('"s":null', '"s":7'), 'offset 5: column "s" holds 7, not a string'],
    ] as const
  ) {
    assertThrows(() => builder.fromJson([5], [text]), TypeError, message);
  }
});
