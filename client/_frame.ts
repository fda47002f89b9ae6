// Parsing the data lines of a subscription: `[offset,msg]`, where offset is an
// integer >= 0 or null. Private to client/ (the Subscription and the bench use it).

/** Returned by {@linkcode lineOffset} for a line that is not `[offset,…]`. */
export const BAD_LINE: unique symbol = Symbol("bad line");

/**
 * The offset of a data line, read from its text without parsing `msg`
 * (`null` on an ephemeral stream), or {@linkcode BAD_LINE} when the line is not
 * `[digits-or-null,…]`.
 */
export function lineOffset(line: string): number | null | typeof BAD_LINE {
  const n = line.length;
  if (n < 4 || line.charCodeAt(0) !== 91 || line.charCodeAt(n - 1) !== 93) return BAD_LINE;
  let c = line.charCodeAt(1);
  if (c === 110) return line.startsWith("null,", 1) ? null : BAD_LINE;
  let i = 1;
  let v = 0;
  while (c >= 48 && c <= 57) {
    v = v * 10 + (c - 48);
    c = line.charCodeAt(++i);
  }
  // 1..16 digits, then the comma; 16 digits bounds v below 2^53 only loosely.
  if (i === 1 || i > 17 || c !== 44 || !Number.isSafeInteger(v)) return BAD_LINE;
  return v;
}

/**
 * Parses a data line into `[offset, msg]`, or returns `null` when it is not a
 * two-element array whose first element is an integer >= 0 or null.
 */
export function parseLine(line: string): [number | null, unknown] | null {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return null;
  }
  if (!Array.isArray(v) || v.length !== 2) return null;
  const o = v[0];
  if (o !== null && !(Number.isSafeInteger(o) && o >= 0)) return null;
  return v as [number | null, unknown];
}

/** `s` quoted for an error message, cut after 80 characters. */
export function clip(s: string): string {
  return JSON.stringify(s.length > 80 ? s.slice(0, 80) + "…" : s);
}
