/**
 * Points in time for `since=` (and `export --since/--until`): RFC 3339 text or
 * an integer of microseconds since the Unix epoch, always resolved to µs.
 * Pure and browser-safe; the server and the client parse with the same code.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { parseSince } from "./since.ts";
 * equal(parseSince("2026-12-01T09:30:00.000001Z"), 1796117400000001);
 * equal(parseSince("1796117400000001"), 1796117400000001);
 * ```
 *
 * @module
 */

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;
const MICROS = /^\d{1,16}$/;

/** The latest time accepted: 2^53 - 1 µs (year 2255). */
export const MAX_SINCE_US: number = Number.MAX_SAFE_INTEGER;

const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

// Calendar arithmetic by hand: `Date.UTC` reads years 0–99 as 1900–1999, so
// "0070-01-01T00:00:00Z" would pass for 1970 through it.
function isLeap(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

function daysIn(year: number, month: number): number {
  return month === 2 && isLeap(year) ? 29 : MONTH_DAYS[month - 1];
}

/** Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) +
    dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/**
 * Parses a time: RFC 3339 (`2026-12-01T09:30:00Z`, fractions down to µs —
 * finer digits are dropped —, `Z` or a `±HH:MM` offset) or an integer of µs
 * since the epoch. Throws `RangeError` saying what was wrong.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { parseSince } from "./since.ts";
 * equal(parseSince("2026-12-01T10:30:00+01:00"), parseSince("2026-12-01T09:30:00Z"));
 * throws(() => parseSince("0070-01-01T00:00:00Z"), RangeError); // the year 70, not 1970
 * ```
 */
export function parseSince(text: string): number {
  if (MICROS.test(text)) {
    const us = Number(text);
    if (us <= MAX_SINCE_US) return us;
  }
  const m = RFC3339.exec(text);
  if (!m) {
    throw new RangeError(
      `since must be RFC 3339 (2026-12-01T09:30:00Z) or µs since the epoch, got ${
        text.length > 40 ? `${text.slice(0, 37)}...` : text
      }`,
    );
  }
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  if (
    month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 ||
    minute > 59 || second > 60
  ) {
    throw new RangeError(`since names no real time: ${text}`);
  }
  const fraction = Number((m[7] ?? "").padEnd(6, "0").slice(0, 6));
  let offsetMin = 0;
  if (m[9]) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) throw new RangeError(`since has a bad UTC offset: ${text}`);
    offsetMin = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  const seconds = daysFromCivil(year, month, day) * 86_400 + hour * 3600 + minute * 60 +
    Math.min(second, 59) - offsetMin * 60;
  const us = seconds * 1_000_000 + fraction;
  if (!Number.isSafeInteger(us) || us < 0) {
    throw new RangeError(`since must be between 1970 and 2255, got ${text}`);
  }
  return us;
}

/**
 * The µs of a time given as a `Date`, an integer of µs, or text
 * {@linkcode parseSince} accepts (what `connect(url, {since})` takes).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { sinceMicros } from "./since.ts";
 * equal(sinceMicros(new Date("2026-12-01T09:30:00Z")), 1796117400000000);
 * ```
 */
export function sinceMicros(value: Date | number | string): number {
  if (value instanceof Date) {
    const ms = value.getTime();
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`since: invalid Date`);
    return ms * 1000;
  }
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`since must be an integer of µs >= 0, got ${value}`);
    }
    return value;
  }
  if (typeof value === "string") return parseSince(value);
  throw new TypeError(`since must be a Date, µs or RFC 3339 text, got ${typeof value}`);
}
