// RowSchema.isEncoded: a text it accepts is exactly encode(JSON.parse(text)) of
// a row validate accepts (no false positive, ever), and it accepts the plain
// JSON.stringify output of typical rows (or ingest would gain nothing). Seeded:
// a fresh seed each run, printed, plus the regression seeds.
import { equal } from "node:assert/strict";
import { compileSchema } from "../../schema/compile.ts";
import { caseName, caseRng, fuzzCases, replayHint, seedBanner } from "../harness/seeds.ts";

const SCHEMA = {
  type: "object",
  properties: {
    ts: { type: "integer" },
    small: { type: "integer", format: "int32" },
    name: { type: "string" },
    price: { type: "number" },
    f: { type: "number", format: "float" },
    ok: { type: "boolean" },
    maybe: { type: ["integer", "null"], format: "int32" },
    'we"ird\\key é': { type: ["string", "null"] },
  },
  required: ["ts", "small", "name", "price", "f", "ok", "maybe", 'we"ird\\key é'],
};

// Number spellings at and around every edge the check draws.
const NUMBER_TEXTS = [
  "0",
  "-0",
  "1",
  "-1",
  "00",
  "01",
  "0.0",
  "0.5",
  "-0.5",
  "1.0",
  "1.50",
  "1e3",
  "1E3",
  "1e-7",
  "0.000001",
  "0.0000001",
  "0.0000012",
  "-0.000001",
  "123456789012345",
  "1234567890123456",
  "9007199254740991",
  "9007199254740992",
  "-9007199254740991",
  "-9007199254740992",
  "2147483647",
  "2147483648",
  "-2147483648",
  "-2147483649",
  "99999999999999999999",
  "1.23456789012345",
  "1.234567890123456",
  "12345678901234.5",
  "0.123456789012345",
  "0.1234567890123456",
  "3.4028234663852886e38",
  "1e21",
  "100000000000000000000",
  "1.7976931348623157e308",
  "5e-324",
  "0.1",
  "0.2",
  "0.30000000000000004",
  "-",
  ".5",
  "5.",
  "+1",
  "1_0",
  "NaN",
  "Infinity",
  "1.",
  "- 1",
  "0x10",
  "1.5e+2",
];
const STRING_TEXTS = [
  '""',
  '"a"',
  '"BTC-USD"',
  '"é"',
  '"😀"',
  '"\\ud83d"',
  '"\\n"',
  '"a\\"b"',
  '"\\u0041"',
  '"\u2028"',
  '"\u007f"',
  '"\\/"',
  '"\u0001"',
  '"\ud800"',
  '"\udc00x"',
  '"unterminated',
  "null",
  '"null"',
  "1",
  "true",
];

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)];
}

function randomNumber(r: () => number): string {
  switch (Math.floor(r() * 6)) {
    case 0:
      return pick(r, NUMBER_TEXTS);
    case 1:
      return String(Math.floor((r() - 0.5) * 2 ** (r() * 60)));
    case 2:
      return String((r() - 0.5) * 10 ** Math.floor(r() * 40 - 20));
    case 3:
      return String(Math.round(r() * 1e8) / 10 ** Math.floor(r() * 12));
    case 4:
      return (r() * 1000).toFixed(Math.floor(r() * 20));
    default:
      return pick(r, NUMBER_TEXTS) + pick(r, ["", "0", "1", "e5"]);
  }
}

function randomValue(r: () => number): string {
  switch (Math.floor(r() * 4)) {
    case 0:
      return randomNumber(r);
    case 1:
      return pick(r, STRING_TEXTS);
    case 2:
      return pick(r, ["true", "false", "null", "tru", "nul", "[]", "{}", '{"a":1}']);
    default:
      return JSON.stringify(String.fromCharCode(...Array.from({ length: 3 }, () => r() * 0x10000)));
  }
}

const keys = Object.keys(SCHEMA.properties);

// A text near the encoded form: the right keys mostly in order, values random, mutated now and then.
function randomText(r: () => number): string {
  const order = [...keys];
  if (r() < 0.1) order.reverse();
  if (r() < 0.05) order.pop();
  if (r() < 0.05) order.push(pick(r, keys));
  const typical = JSON.parse(JSON.stringify(randomRow(r)));
  const value = (k: string): string =>
    r() < 0.85 ? JSON.stringify(typical[k] ?? null) : randomValue(r);
  let text = "{" + order.map((k) => `${JSON.stringify(k)}:${value(k)}`).join(",") + "}";
  if (r() < 0.2) {
    const at = Math.floor(r() * text.length);
    text = text.slice(0, at) + pick(r, [" ", ",", "}", "\\", '"', "0", "\n", ""]) +
      text.slice(at + (r() < 0.5 ? 1 : 0));
  }
  return text;
}

function randomRow(r: () => number): Record<string, unknown> {
  return {
    ts: 1_790_038_800_000_000 + Math.floor(r() * 1e9),
    small: Math.floor((r() - 0.5) * 2 ** (r() * 30)),
    name: pick(r, ["BTC-USD", "é", "a b", "", "x".repeat(Math.floor(r() * 40))]),
    price: Math.round(r() * 1e7) / 100,
    f: Math.round(r() * 2e6) / 1e6,
    ok: r() < 0.5,
    maybe: r() < 0.3 ? null : Math.floor(r() * 1000),
    'we"ird\\key é': r() < 0.5 ? null : "v",
  };
}

Deno.test("isEncoded: an accepted text is exactly the encoding of a valid row", () => {
  const schema = compileSchema(SCHEMA);
  console.log(seedBanner("isEncoded fuzz"));
  const cases = fuzzCases(40, "encoded_check");
  let accepted = 0;
  let typical = 0;
  let typicalTotal = 0;
  for (const c of cases) {
    const r = caseRng(c);
    for (let i = 0; i < 500; i++) {
      const text = randomText(r);
      if (!schema.isEncoded(text)) continue;
      accepted++;
      let row: unknown;
      try {
        row = JSON.parse(text);
      } catch (error) {
        throw new Error(
          `${caseName(c)}: accepted ${text}, not JSON (${error}); ${replayHint([c])}`,
        );
      }
      equal(schema.validate(row), null, `${caseName(c)}: accepted ${text}; ${replayHint([c])}`);
      equal(
        schema.encode(row as Record<string, unknown>),
        text,
        `${caseName(c)}: ${replayHint([c])}`,
      );
    }
    for (let i = 0; i < 200; i++) {
      const row = randomRow(r);
      if (schema.validate(row) !== null) continue;
      typicalTotal++;
      if (schema.isEncoded(schema.encode(row))) typical++;
    }
  }
  console.log(`${accepted} texts accepted and checked; ${typical} of ${typicalTotal} typical rows`);
  // The generator reaches the accepting side too, or the test proves nothing.
  equal(accepted > 100, true, `only ${accepted} texts were accepted`);
  // Typical rows printed by JSON.stringify take the fast path (f and price are sure decimals).
  equal(typical / typicalTotal > 0.95, true, `${typical} of ${typicalTotal} typical rows`);
});

Deno.test("isEncoded: a schema it cannot prove answers false, never a guess", () => {
  for (
    const column of [
      { type: "string", format: "date-time" },
      { type: "string", maxLength: 3 },
      { type: "integer", minimum: 0 },
      { type: "number", enum: [1, 2] },
      { type: "string", pattern: "^a" },
    ]
  ) {
    const schema = compileSchema({ type: "object", properties: { v: column }, required: ["v"] });
    for (const v of ['"2026-12-01T00:00:00Z"', '"abcd"', "-1", "3", '"b"', '"a"', "1"]) {
      equal(schema.isEncoded(`{"v":${v}}`), false, `${JSON.stringify(column)} ${v}`);
    }
  }
  const plain = compileSchema({
    type: "object",
    properties: { v: { type: "string", description: "d", title: "t" } },
    required: ["v"],
  });
  equal(plain.isEncoded('{"v":"a"}'), true);
});

Deno.test("isEncoded: the edges of the number forms", () => {
  const schema = compileSchema({
    type: "object",
    properties: { i: { type: "integer", format: "int32" }, n: { type: "number" } },
    required: ["i", "n"],
  });
  const yes = [
    ['{"i":999999999,"n":8999999999999999}'],
    ['{"i":-999999999,"n":-8999999999999999}'],
    ['{"i":0,"n":0.000001}'],
    ['{"i":0,"n":-0.5}'],
    ['{"i":1,"n":12345678901234.5}'],
  ];
  const no = [
    '{"i":2147483648,"n":1}',
    '{"i":-2147483649,"n":1}',
    '{"i":2147483647,"n":1}', // valid, left to the full way (10 digits)
    '{"i":1,"n":9007199254740991}', // valid, left to the full way (16 digits, a 9 first)
    '{"i":1,"n":9007199254740992}',
    '{"i":1,"n":0.0000001}',
    '{"i":-0,"n":1}',
    '{"i":1,"n":-0}',
    '{"i":1,"n":1.0}',
    '{"i":1,"n":1e3}',
    '{"i":1,"n":123456789012345.6}',
    '{"i":1,"n":1} ',
    ' {"i":1,"n":1}',
    '{"i":1,"n":1}\n',
  ];
  for (const [t] of yes) equal(schema.isEncoded(t), true, t);
  for (const t of no) equal(schema.isEncoded(t), false, t);
});
