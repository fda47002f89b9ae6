/**
 * The body of a `POST /{name}`: read as a stream up to the limit (reading
 * stops there: a larger body is never held whole) and cut when it stalls
 * (no byte for the idle time), then parsed as NDJSON
 * (one row per line; blank lines are skipped but counted) or as a JSON
 * array. Nothing is stored here.
 *
 * @module
 */

const strict = new TextDecoder("utf-8", { fatal: true });

/**
 * A body read: its bytes, `too_large` once more than the limit arrived, or
 * `timeout` when no byte arrived for the idle time.
 */
export type BodyRead =
  | { ok: true; bytes: Uint8Array }
  | { ok: false; error: "too_large" | "timeout" };

/**
 * How {@linkcode readBody} reads: `idleMs`, the most time to wait for the
 * next bytes (absent: no bound); `beforeRead`, awaited before each read with
 * the bytes read so far (the server's publish budget waits there for room);
 * `arrived`, told of each piece's length once it arrived.
 */
export interface BodyReading {
  idleMs?: number;
  beforeRead?: (read: number) => Promise<void>;
  arrived?: (bytes: number) => void;
}

/**
 * Reads `body` whole, unless it holds more than `maxBytes` or stalls for
 * longer than `idleMs`: then reading stops (the rest is cancelled) and the
 * answer says why.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readBody } from "./body.ts";
 * const r = await readBody(new Request("http://h/", { method: "POST", body: "abc" }).body, 2);
 * equal(r.ok, false);
 * const idle = new ReadableStream<Uint8Array>({ start(c) { c.enqueue(new Uint8Array(1)); } });
 * const t = await readBody(idle, 10, { idleMs: 10 });
 * equal(!t.ok && t.error, "timeout");
 * ```
 */
export async function readBody(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
  reading: BodyReading = {},
): Promise<BodyRead> {
  if (body === null) return { ok: true, bytes: new Uint8Array(0) };
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  try {
    while (true) {
      await reading.beforeRead?.(n);
      const next = await readWithin(reader, reading.idleMs);
      if (next === "timeout") {
        await reader.cancel().catch(() => {});
        return { ok: false, error: "timeout" };
      }
      const { done, value } = next;
      if (done) break;
      reading.arrived?.(value.length);
      n += value.length;
      if (n > maxBytes) {
        await reader.cancel().catch(() => {});
        return { ok: false, error: "too_large" };
      }
      parts.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  if (parts.length === 1) return { ok: true, bytes: parts[0] };
  const bytes = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.length;
  }
  return { ok: true, bytes };
}

// The reader's next piece, or "timeout" when none came within `ms`.
async function readWithin(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  ms: number | undefined,
): Promise<ReadableStreamReadResult<Uint8Array> | "timeout"> {
  if (ms === undefined) return await reader.read();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), ms)));
  try {
    return await Promise.race([reader.read(), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A body parsed: its rows with their 1-based line (or array position), or the first bad line.
 */
export type ParsedBody =
  | { ok: true; rows: unknown[]; lines: number[] }
  | { ok: false; line: number; detail: string };

/**
 * Parses an NDJSON body: each non-blank line one JSON value (`\r\n` too).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { parseNdjson } from "./body.ts";
 * const r = parseNdjson(new TextEncoder().encode('{"a":1}\n\n{"a":2}\n'));
 * deepStrictEqual(r, { ok: true, rows: [{ a: 1 }, { a: 2 }], lines: [1, 3] });
 * deepStrictEqual(parseNdjson(new TextEncoder().encode('{"a":1}\n{oops')), {
 *   ok: false,
 *   line: 2,
 *   detail: "not JSON",
 * });
 * ```
 */
export function parseNdjson(bytes: Uint8Array): ParsedBody {
  let text: string;
  try {
    // One decode of the whole body (the common case); a body that is not
    // UTF-8 is read again line by line to name the line.
    text = strict.decode(bytes);
  } catch {
    return { ok: false, line: badUtf8Line(bytes), detail: "not UTF-8" };
  }
  const rows: unknown[] = [];
  const lines: number[] = [];
  let line = 0;
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf("\n", start);
    if (end === -1) end = text.length;
    line++;
    const raw = text.slice(start, end);
    start = end + 1;
    let row: unknown;
    try {
      row = JSON.parse(raw);
    } catch {
      if (raw.trim() === "") continue;
      return { ok: false, line, detail: "not JSON" };
    }
    rows.push(row);
    lines.push(line);
  }
  return { ok: true, rows, lines };
}

// The 1-based line of the first bytes that are not UTF-8.
function badUtf8Line(bytes: Uint8Array): number {
  let line = 0;
  let start = 0;
  while (start <= bytes.length) {
    let end = bytes.indexOf(0x0a, start);
    if (end === -1) end = bytes.length;
    line++;
    try {
      strict.decode(bytes.subarray(start, end));
    } catch {
      return line;
    }
    start = end + 1;
  }
  return line;
}

/**
 * Parses a JSON array body; line N is the array's N-th element (1-based).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { parseJsonArray } from "./body.ts";
 * const r = parseJsonArray(new TextEncoder().encode('[{"a":1},{"a":2}]'));
 * equal(r.ok && r.rows.length, 2);
 * equal(parseJsonArray(new TextEncoder().encode('{"a":1}')).ok, false);
 * ```
 */
export function parseJsonArray(bytes: Uint8Array): ParsedBody {
  let value: unknown;
  try {
    value = JSON.parse(strict.decode(bytes));
  } catch (err) {
    const detail = err instanceof TypeError ? "not UTF-8" : "not JSON";
    return { ok: false, line: 0, detail: `the body is ${detail}` };
  }
  if (!Array.isArray(value)) {
    return {
      ok: false,
      line: 0,
      detail: "the body is not a JSON array (use application/x-ndjson for rows one per line)",
    };
  }
  return { ok: true, rows: value, lines: value.map((_, i) => i + 1) };
}
