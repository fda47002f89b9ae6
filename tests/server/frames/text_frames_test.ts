// renderBatch: text built from log records equals the live frames of the same
// rows, byte for byte, whatever the offsets, payloads and cuts.
import type { RecordBatch } from "../../../log/mod.ts";
import { Log } from "../../../log/mod.ts";
import { liveFrame, MAX_BATCH_BYTES, renderBatch } from "../../../server/frames/text_frames.ts";
import { assert, assertEquals, assertThrows } from "../../harness/assert.ts";
import { rmrf, rng, tempDir, utf8 } from "../../harness/util.ts";

const enc = new TextEncoder();

/**
 * A batch laid out like a segment read: each payload between binary bytes
 * (a record head before it and a checksum after), as `#parse` leaves it.
 */
function segmentLike(offsets: number[], payloads: string[], junk = 0xc3): RecordBatch {
  const bytes = payloads.map((p) => enc.encode(p));
  const head = 20;
  const tail = 5;
  const buf = new Uint8Array(bytes.reduce((a, b) => a + head + b.length + tail, 0));
  const starts = new Int32Array(bytes.length);
  let at = 0;
  bytes.forEach((b, i) => {
    buf.fill(junk, at, at + head);
    buf[at + head - 1] = 44; // a head ending in "," must not fool the in-place check
    starts[i] = at + head;
    buf.set(b, at + head);
    at += head + b.length;
    buf.fill(junk, at, at + tail);
    at += tail;
  });
  return {
    buf,
    count: bytes.length,
    offsets: Float64Array.from(offsets),
    times: new Float64Array(bytes.length),
    starts,
    lengths: Int32Array.from(bytes.map((b) => b.length)),
  };
}

/**
 * Payloads `gap` junk bytes apart: in order, in reverse order, or with the
 * middle rows stored pairwise swapped.
 */
function packed(
  offsets: number[],
  payloads: string[],
  gap: number,
  order: "in order" | "reversed" | "swapped" = "in order",
): RecordBatch {
  const bytes = payloads.map((p) => enc.encode(p));
  const rows: number[] = [];
  if (order === "swapped") {
    rows.push(0);
    let i = 1;
    for (; i + 2 < bytes.length; i += 2) rows.push(i + 1, i);
    for (; i < bytes.length; i++) rows.push(i);
  } else {
    for (let i = 0; i < bytes.length; i++) rows.push(i);
    if (order === "reversed") rows.reverse();
  }
  const buf = new Uint8Array(bytes.reduce((a, b) => a + gap + b.length, 0)).fill(0x5d);
  const starts = new Int32Array(bytes.length);
  let at = 0;
  for (const i of rows) {
    at += gap;
    starts[i] = at;
    buf.set(bytes[i], at);
    at += bytes[i].length;
  }
  return {
    buf,
    count: bytes.length,
    offsets: Float64Array.from(offsets),
    times: new Float64Array(bytes.length),
    starts,
    lengths: Int32Array.from(bytes.map((b) => b.length)),
  };
}

/** A batch laid out like a chunk read: `[offset,msg]\n` lines, payloads in place. */
function chunkLike(
  offsets: number[],
  payloads: string[],
  digits: (o: number) => string = String,
): RecordBatch {
  const lines = payloads.map((p, i) => `[${digits(offsets[i])},${p}]\n`);
  const buf = enc.encode(lines.join(""));
  const starts = new Int32Array(payloads.length);
  const lengths = new Int32Array(payloads.length);
  let at = 0;
  lines.forEach((line, i) => {
    const head = enc.encode(`[${digits(offsets[i])},`).length;
    starts[i] = at + head;
    lengths[i] = enc.encode(payloads[i]).length;
    at += enc.encode(line).length;
  });
  return {
    buf,
    count: payloads.length,
    offsets: Float64Array.from(offsets),
    times: new Float64Array(payloads.length),
    starts,
    lengths,
  };
}

/** The live frames of rows `[from, from + rows)`, joined as a batched frame. */
function expected(offsets: number[], payloads: string[], from: number, rows: number): string {
  const out: string[] = [];
  for (let i = from; i < from + rows; i++) out.push(liveFrame(offsets[i], payloads[i]));
  return out.join("\n");
}

/** How many rows renderBatch takes from `from` (its documented cut). */
function cut(payloads: string[], from: number, maxRows: number, maxBytes: number): number {
  const end = Math.min(payloads.length, from + maxRows);
  let size = 0;
  let last = from;
  for (; last < end; last++) {
    const add = enc.encode(payloads[last]).length + 20;
    if (size > 0 && size + add > maxBytes) break;
    size += add;
  }
  return last - from;
}

/** Renders the whole batch in frames from `from`, checking each against the live frames. */
function checkAll(
  batch: RecordBatch,
  offsets: number[],
  payloads: string[],
  maxRows?: number,
  maxBytes?: number,
  from = 0,
): void {
  let i = from;
  while (i < batch.count) {
    const { text, rows } = renderBatch(batch, i, maxRows, maxBytes);
    const want = cut(payloads, i, maxRows ?? 4096, maxBytes ?? MAX_BATCH_BYTES);
    assertEquals(rows, want, `rows from ${i}`);
    assertEquals(text, expected(offsets, payloads, i, rows), `text from ${i}`);
    i += rows;
  }
}

const layouts = [["segment-like", segmentLike], ["chunk-like", chunkLike]] as const;

for (const [layout, make] of layouts) {
  Deno.test(`renderBatch (${layout}) carries digits across 9→10, 99→100, 999→1000`, () => {
    for (const start of [1, 7, 95, 990, 9995, 99_999_990, 999_999_999_999_990]) {
      const offsets = Array.from({ length: 20 }, (_, i) => start + i);
      const payloads = offsets.map((o) => `{"n":${o}}`);
      checkAll(make(offsets, payloads), offsets, payloads);
      // One row per frame: the carry happens between calls, not within one.
      checkAll(make(offsets, payloads), offsets, payloads, 1);
    }
  });

  Deno.test(`renderBatch (${layout}) writes offsets after a gap in full`, () => {
    // Fence gaps, a jump to fewer digits' neighbour, and the largest offset.
    // 1999 then 99, 100: the carry must not run into the longer offset's digits.
    const offsets = [
      1999,
      99,
      100,
      5,
      6,
      100,
      101,
      9,
      10,
      1_048_586,
      1_048_587,
      2 ** 53 - 2,
      2 ** 53 - 1,
    ];
    const payloads = offsets.map((_, i) => `{"i":${i}}`);
    checkAll(make(offsets, payloads), offsets, payloads);
    checkAll(make(offsets, payloads), offsets, payloads, 3);
    checkAll(make(offsets, payloads), offsets, payloads, 4096, 1, 1);
  });

  Deno.test(`renderBatch (${layout}) keeps multibyte UTF-8 payloads intact`, () => {
    const payloads = [
      '{"s":"é"}',
      '{"s":"日本語"}',
      '{"s":"😀 and \\n escaped"}',
      '{"s":"ascii"}',
      '{"s":"\u00ff\u0100\u07ff\u0800\uffff"}',
      '"é"',
    ];
    const offsets = payloads.map((_, i) => 98 + i);
    checkAll(make(offsets, payloads), offsets, payloads);
    checkAll(make(offsets, payloads), offsets, payloads, 2);
  });

  Deno.test(`renderBatch (${layout}) cuts at maxRows and about maxBytes`, () => {
    const payloads = Array.from(
      { length: 50 },
      (_, i) => JSON.stringify({ i, pad: "x".repeat(i) }),
    );
    const offsets = payloads.map((_, i) => 1 + i);
    const batch = make(offsets, payloads);
    assertEquals(renderBatch(batch, 0, 7).rows, 7);
    assertEquals(renderBatch(batch, 45, 7).rows, 5);
    // A frame always holds at least one row, however small maxBytes is.
    assertEquals(renderBatch(batch, 3, 4096, 1).rows, 1);
    for (const maxRows of [1, 3, 16, 4096]) {
      for (const maxBytes of [1, 64, 200, 1000, MAX_BATCH_BYTES]) {
        checkAll(batch, offsets, payloads, maxRows, maxBytes);
        checkAll(batch, offsets, payloads, maxRows, maxBytes, 17);
      }
    }
    // Past the end: nothing.
    assertEquals(renderBatch(batch, 50), { text: "", rows: 0 });
  });
}

Deno.test("renderBatch interleaves batches of different subscribers", () => {
  // Subscribers at different offsets take turns; each frame must still be right.
  const a = Array.from({ length: 30 }, (_, i) => 8 + i);
  const b = Array.from({ length: 30 }, (_, i) => 995 + i);
  const pa = a.map((o) => `{"a":${o}}`);
  const pb = b.map((o) => `{"b":${o}}`);
  const ba = segmentLike(a, pa);
  const bb = chunkLike(b, pb);
  for (let i = 0; i < 30; i += 3) {
    assertEquals(renderBatch(ba, i, 3).text, expected(a, pa, i, 3));
    assertEquals(renderBatch(bb, i, 3).text, expected(b, pb, i, 3));
    assertEquals(renderBatch(ba, i, 2).text, expected(a, pa, i, 2));
  }
});

Deno.test("renderBatch does not reuse line bytes that are not the canonical frame", () => {
  const payloads = ['{"x":1}', '{"x":2}', '{"x":3}'];
  const offsets = [7, 8, 9];
  // Leading zeros, and a line whose offset is not the record's: copied, not reused.
  const padded = chunkLike(offsets, payloads, (o) => String(o).padStart(3, "0"));
  assertEquals(renderBatch(padded, 0).text, expected(offsets, payloads, 0, 3));
  const wrong = chunkLike([7, 8, 6], payloads);
  assertEquals(
    renderBatch({ ...wrong, offsets: Float64Array.from(offsets) }, 0).text,
    expected(offsets, payloads, 0, 3),
  );
  // A line missing its newline or bracket.
  for (const [bad, at] of [[32, 11], [41, 10]]) {
    const batch = chunkLike(offsets, payloads);
    const buf = batch.buf.slice();
    buf[at] = bad;
    assertEquals(renderBatch({ ...batch, buf }, 0).text, expected(offsets, payloads, 0, 3));
  }
  // The last line's closing bracket past the end of the buffer.
  const cutShort = chunkLike(offsets, payloads);
  const short = { ...cutShort, buf: cutShort.buf.subarray(0, cutShort.buf.length - 2) };
  assertEquals(renderBatch(short, 0).text, expected(offsets, payloads, 0, 3));
});

Deno.test("renderBatch copes with payloads too close together to move in place", () => {
  // Gaps too small for `]\n[digits,` (at first, or only after some rows),
  // and payloads stored out of order: the frames must come out right anyway.
  const rand = rng(4);
  for (let gap = 0; gap <= 26; gap++) {
    for (const start of [1, 95, 999_990, 2 ** 53 - 1040]) {
      const offsets = Array.from({ length: 30 }, (_, i) => start + i + (i > 20 ? 1000 : 0));
      const payloads = offsets.map((_, i) =>
        JSON.stringify({ s: "é".repeat(Math.floor(rand() * 4)), i })
      );
      checkAll(packed(offsets, payloads, gap), offsets, payloads);
      checkAll(packed(offsets, payloads, gap), offsets, payloads, 7);
      checkAll(packed(offsets, payloads, gap, "reversed"), offsets, payloads);
      checkAll(packed(offsets, payloads, gap, "swapped"), offsets, payloads);
    }
    // Tiny payloads, a window starting at a row stored after the next one.
    const offsets = Array.from({ length: 12 }, (_, i) => 1 + i);
    const tiny = offsets.map((o) => String(o % 10));
    checkAll(packed(offsets, tiny, gap, "swapped"), offsets, tiny, 4096, MAX_BATCH_BYTES, 1);
    checkAll(packed(offsets, tiny, gap, "swapped"), offsets, tiny, 4, MAX_BATCH_BYTES, 3);
  }
});

Deno.test("renderBatch matches live frames on random batches", () => {
  const rand = rng(10);
  const chars = ["a", "é", "日", "😀", "\\n", "0", "]", "[", ",", "\\u0000"];
  for (let round = 0; round < 300; round++) {
    const n = 1 + Math.floor(rand() * 40);
    const offsets: number[] = [];
    let o = 1 + Math.floor(rand() * 2000);
    for (let i = 0; i < n; i++) {
      offsets.push(o);
      o += rand() < 0.8 ? 1 : 1 + Math.floor(rand() * 5000);
    }
    const payloads = offsets.map(() => {
      let s = "";
      const len = Math.floor(rand() * 12);
      for (let k = 0; k < len; k++) s += chars[Math.floor(rand() * chars.length)];
      return JSON.stringify({ s });
    });
    const gap = Math.floor(rand() * 30);
    const layouts = [
      segmentLike,
      chunkLike,
      (o: number[], p: string[]) => packed(o, p, gap),
    ];
    const make = layouts[Math.floor(rand() * layouts.length)];
    const maxRows = 1 + Math.floor(rand() * 10);
    const maxBytes = Math.floor(rand() * 400);
    checkAll(make(offsets, payloads), offsets, payloads, maxRows, maxBytes);
  }
});

Deno.test("renderBatch builds frames larger than its scratch buffer", () => {
  const payloads = [..."abcdefghij"].map((c) => JSON.stringify(c.repeat(250_000)));
  const offsets = payloads.map((_, i) => 1 + i);
  const tight = (o: number[], p: string[]) => packed(o, p, 0);
  for (const make of [tight, segmentLike, chunkLike]) {
    const { text, rows } = renderBatch(make(offsets, payloads), 0, 4096, 4 << 20);
    assertEquals(rows, 10);
    assert(text === expected(offsets, payloads, 0, 10));
  }
});

Deno.test("renderBatch refuses an offset that is not an integer in [0, 2^53)", () => {
  for (const bad of [-1, 1.5, 2 ** 53, NaN]) {
    assertThrows(() => renderBatch(segmentLike([bad], ["{}"]), 0), RangeError);
  }
});

Deno.test("renderBatch over a real log equals the live frames, from segments and chunks", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(`${dir}/t`, { timers: false, chunks: true, segmentBytes: 64 << 10 });
    const rows = new Map<number, string>();
    const add = async (n: number) => {
      const texts = Array.from(
        { length: n },
        (_, i) => JSON.stringify({ i, s: "é".repeat(i % 5) }),
      );
      const first = log.nextOffset;
      await log.appendMany(texts.map(utf8));
      texts.forEach((t, i) => rows.set(first + i, t));
    };
    await add(1500);
    await log.fence(10_000); // a gap: offsets 1501..9999 are not rows
    await add(1500);
    const check = async (label: string) => {
      const reader = log.reader(1);
      const got: string[] = [];
      while (true) {
        const batch = await reader.read(16 * 1024);
        if (batch.count === 0) break;
        for (let i = 0; i < batch.count;) {
          const { text, rows: n } = renderBatch(batch, i, 100);
          got.push(text);
          i += n;
        }
      }
      reader.close();
      const want = [...rows].map(([o, t]) => liveFrame(o, t));
      assertEquals(got.join("\n").split("\n"), want, label);
    };
    await check("segments");
    await log.roll();
    await log.chunks.settled();
    assert(log.chunks.manifest!.chunks.length > 0, "sealed into chunks");
    await check("chunks");
    await log.close();
  } finally {
    await rmrf(dir);
  }
});
