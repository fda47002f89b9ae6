// since=: RFC 3339 and µs, resolved to µs; every malformed time refused with a RangeError.
import { assertEquals, assertThrows } from "../harness/assert.ts";
import { parseSince, sinceMicros } from "../../wire/since.ts";

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

Deno.test("since reads years 0000-0099 as themselves, not as 1900-1999", () => {
  // Every such year lies before the epoch, so each is refused as out of range.
  for (
    const early of [
      "0070-01-01T00:00:00Z",
      "0099-12-31T23:59:59Z",
      "0000-01-01T00:00:00Z",
      "0001-06-15T12:00:00+01:00",
    ]
  ) {
    const err = assertThrows(() => parseSince(early), RangeError);
    assertEquals(err.message, `since must be between 1970 and 2255, got ${early}`);
  }
  // 0000 is a leap year in the proleptic Gregorian calendar (1900 is not): the 29th
  // of February is a real day, refused for its range only.
  const leap = assertThrows(() => parseSince("0000-02-29T00:00:00Z"), RangeError);
  assertEquals(leap.message, "since must be between 1970 and 2255, got 0000-02-29T00:00:00Z");
  assertThrows(() => parseSince("0100-02-29T00:00:00Z"), RangeError, "names no real time");
  // The calendar arithmetic agrees with Date at the edges it shares with it.
  assertEquals(parseSince("1970-01-01T00:00:00Z"), 0);
  assertEquals(parseSince("2000-02-29T23:59:59Z"), Date.UTC(2000, 1, 29, 23, 59, 59) * 1000);
  assertEquals(parseSince("2100-03-01T00:00:00Z"), Date.UTC(2100, 2, 1) * 1000);
  assertEquals(parseSince("2255-06-05T23:47:34Z"), Date.UTC(2255, 5, 5, 23, 47, 34) * 1000);
  // Every first and last day of every month from 1970 to 2254, where Date is right.
  for (let year = 1970; year < 2255; year++) {
    for (let month = 1; month <= 12; month++) {
      const last = new Date(Date.UTC(year, month, 0)).getUTCDate();
      for (const day of [1, last]) {
        const text = `${year}-${String(month).padStart(2, "0")}-${String(day).padStart(2, "0")}` +
          "T23:59:59Z";
        assertEquals(parseSince(text), Date.UTC(year, month - 1, day, 23, 59, 59) * 1000, text);
      }
    }
  }
});
