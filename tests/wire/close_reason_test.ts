import { deepStrictEqual, equal, ok } from "node:assert/strict";
import { encodeCloseReason, MAX_CLOSE_REASON_BYTES } from "../../wire/close_reason.ts";

const utf8 = new TextEncoder();
const strict = new TextDecoder("utf-8", { fatal: true });

// The shortening as it was written first (one character at a time): the
// reference the one-pass version must agree with.
function reference(reason: Record<string, unknown>): string {
  const entries = Object.entries(reason).filter(([, v]) => v !== undefined);
  while (entries.length > 0) {
    const text = JSON.stringify(Object.fromEntries(entries));
    if (utf8.encode(text).length <= MAX_CLOSE_REASON_BYTES) return text;
    if (entries.length === 1) {
      const [key, value] = entries[0];
      let s = String(value);
      while (s.length > 0) {
        s = s.slice(0, -1);
        const t = JSON.stringify({ [key]: s });
        if (utf8.encode(t).length <= MAX_CLOSE_REASON_BYTES) return t;
      }
      return "";
    }
    if (entries.length === 2 && typeof entries[1][1] === "string") {
      let s = entries[1][1];
      while (s.length > 0) {
        s = s.slice(0, -1);
        const t = JSON.stringify({ [entries[0][0]]: entries[0][1], [entries[1][0]]: s });
        if (utf8.encode(t).length <= MAX_CLOSE_REASON_BYTES) return t;
      }
    }
    entries.pop();
  }
  return "";
}

// Characters of every JSON cost: plain, escaped, control, 2- and 3-byte, pairs, lone halves.
const ALPHABET = [
  "a",
  "Z",
  '"',
  "\\",
  "\n",
  "\t",
  "\x01",
  "\x7f",
  "é",
  "€",
  "😀",
  "\ud83d",
  "\ude00",
];

function mulberry32(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

Deno.test("close reasons: shortened exactly as one character at a time would", () => {
  const seed = Number(Deno.env.get("SEED") ?? Date.now() % 2 ** 31);
  console.log(`seed ${seed} (SEED=${seed} to repeat)`);
  const rand = mulberry32(seed);
  const text = (n: number) => {
    let s = "";
    for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(rand() * ALPHABET.length)];
    return s;
  };
  for (let i = 0; i < 3000; i++) {
    const detail = text(Math.floor(rand() * 90));
    const reasons: Record<string, unknown>[] = [
      { error: "protocol", detail },
      { detail },
      { error: text(Math.floor(rand() * 70)), detail, resume: 7 },
      { error: "too_slow", resume: Math.floor(rand() * 1e6), earliest: null },
      { error: text(Math.floor(rand() * 130)), detail: 3 },
    ];
    for (const r of reasons) {
      equal(encodeCloseReason(r as never), reference(r), JSON.stringify(r));
    }
  }
});

Deno.test("close reasons: a long detail is cut to at most 123 bytes of valid UTF-8", () => {
  for (const unit of ["x", "é", "€", "😀", '"', "\n", "a😀"]) {
    const detail = unit.repeat(Math.ceil(64 * 1024 / unit.length));
    const text = encodeCloseReason({ error: "protocol", detail });
    const bytes = utf8.encode(text);
    ok(bytes.length <= MAX_CLOSE_REASON_BYTES, `${bytes.length} bytes for ${unit}`);
    const back = JSON.parse(strict.decode(bytes));
    equal(back.error, "protocol");
    ok(detail.startsWith(back.detail), "the detail kept is a prefix of the detail");
    ok(
      !/[\ud800-\udfff]$/.test(back.detail.slice(-1)) ||
        /[\ud800-\udbff][\udc00-\udfff]$/.test(back.detail),
      "no half of a pair is left at the cut",
    );
    // Nothing longer would have fitted: one more character passes the bound.
    const more = detail.slice(0, back.detail.length + (unit === "😀" || unit === "a😀" ? 2 : 1));
    ok(
      utf8.encode(JSON.stringify({ error: "protocol", detail: more })).length >
        MAX_CLOSE_REASON_BYTES,
    );
  }
  deepStrictEqual(
    encodeCloseReason({ error: "x".repeat(200) }).length <= MAX_CLOSE_REASON_BYTES,
    true,
  );
});
