// since=: RFC 3339 and µs, resolved to µs; every malformed time refused with a RangeError.
import { assertEquals, assertThrows } from "../_assert.ts";
import { parseSince, sinceMicros } from "../../client/since.ts";

Deno.test("since parses RFC 3339 with fractions and offsets, and µs", () => {
  const base = Date.UTC(2026, 11, 1, 9, 30, 0) * 1000;
  assertEquals(parseSince("2026-12-01T09:30:00Z"), base);
  assertEquals(parseSince("2026-12-01t09:30:00z"), base);
  assertEquals(parseSince("2026-12-01 09:30:00Z"), base);
  assertEquals(parseSince("2026-12-01T09:30:00.5Z"), base + 500_000);
  assertEquals(parseSince("2026-12-01T09:30:00.123456789Z"), base + 123_456);
  assertEquals(parseSince("2026-12-01T11:00:00+01:30"), base);
  assertEquals(parseSince("2026-12-01T08:00:00-01:30"), base);
  assertEquals(parseSince(String(base + 7)), base + 7);
  assertEquals(parseSince("0"), 0);
  assertEquals(sinceMicros(new Date(base / 1000)), base);
  assertEquals(sinceMicros(base), base);
  assertEquals(sinceMicros("2026-12-01T09:30:00Z"), base);
});

Deno.test("since refuses what is not a time", () => {
  for (
    const bad of [
      "",
      "yesterday",
      "2026-12-01",
      "2026-13-01T00:00:00Z",
      "2026-02-30T00:00:00Z",
      "2026-12-01T24:00:00Z",
      "2026-12-01T09:30:00",
      "2026-12-01T09:30:00+25:00",
      "-5",
      "1e6",
      "99999999999999999",
      "１２３",
    ]
  ) {
    assertThrows(() => parseSince(bad), RangeError);
  }
  assertThrows(() => sinceMicros(-1), RangeError);
  assertThrows(() => sinceMicros(1.5), RangeError);
  assertThrows(() => sinceMicros(new Date(NaN)), RangeError);
  assertThrows(() => sinceMicros({} as unknown as string), TypeError);
});
