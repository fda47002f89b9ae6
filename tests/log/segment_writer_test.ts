// SegmentWriter.appendMany (the in-place encoding of ASCII runs) writes the
// same bytes and state as one append per record, whatever the payloads (ASCII,
// multi-byte, bytes, empty, longer than the beacon interval), the interval,
// the start position and the batch sizes; and a taken view stays intact while
// appends go on until the next take. Seeded: a fresh seed each run plus the
// regression seeds (STREAMCAST_FUZZ_SEED=N replays N).
import { assertEquals } from "../harness/assert.ts";
import { SegmentWriter, type WriterState } from "../../log/segment/writer.ts";
import { MIN_BEACON_INTERVAL, RUNNING_SEED } from "../../log/segment/format.ts";
import { caseName, caseRng, fuzzCases, replayHint, seedBanner } from "../harness/seeds.ts";

console.log(seedBanner("segment writer"));

function payload(rand: () => number, interval: number): string | Uint8Array {
  const kind = rand();
  const len = rand() < 0.02 ? Math.floor(rand() * interval * 2) : Math.floor(rand() * 200);
  if (kind < 0.1) return new Uint8Array(len).map(() => Math.floor(rand() * 256));
  if (kind < 0.15) return "";
  let s = "";
  const wide = kind < 0.25;
  for (let i = 0; i < len; i++) {
    s += wide && rand() < 0.1
      ? "é€😀"[Math.floor(rand() * 3)]
      : String.fromCharCode(32 + Math.floor(rand() * 95));
  }
  return s;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

Deno.test("appendMany writes the bytes of one append per record", () => {
  const cases = fuzzCases(60, "segment writer");
  const failed: string[] = [];
  for (const c of cases) {
    const rand = caseRng(c, 0x5e9);
    const interval = rand() < 0.5
      ? MIN_BEACON_INTERVAL
      : MIN_BEACON_INTERVAL << Math.floor(rand() * 6);
    const start: WriterState = {
      physEnd: 64 + Math.floor(rand() * interval * 3),
      lastOffset: 0,
      lastTimeUs: 0,
      running: RUNNING_SEED,
      count: 0,
    };
    const one = new SegmentWriter(interval, start);
    const many = new SegmentWriter(interval, start);
    const a: Uint8Array[] = [];
    const b: Uint8Array[] = [];
    let offset = 1;
    for (let batch = 0; batch < 40; batch++) {
      const n = Math.floor(rand() * (rand() < 0.3 ? 3 : 120));
      const rows = Array.from({ length: n }, () => payload(rand, interval));
      const timeUs = 1_790_000_000_000_000 + batch;
      for (let k = 0; k < n; k++) one.append(offset + k, timeUs, rows[k]);
      many.appendMany(offset, timeUs, rows);
      offset += n;
      if (rand() < 0.6) {
        // Copies: a taken view is valid until the next take.
        a.push(one.take().slice());
        b.push(many.take().slice());
      }
    }
    a.push(one.take().slice());
    b.push(many.take().slice());
    const x = concat(a);
    const y = concat(b);
    const same = x.length === y.length && x.every((v, i) => v === y[i]);
    if (!same || JSON.stringify(one.state) !== JSON.stringify(many.state)) {
      failed.push(`${caseName(c)}: ${x.length} vs ${y.length} bytes`);
    }
  }
  assertEquals(failed, [], failed.length ? replayHint(cases) : "");
});

Deno.test("a taken view holds while appends go on, until the next take", () => {
  const w = new SegmentWriter(MIN_BEACON_INTERVAL, {
    physEnd: 64,
    lastOffset: 0,
    lastTimeUs: 0,
    running: RUNNING_SEED,
    count: 0,
  });
  w.appendMany(1, 5, ["a".repeat(100), "b".repeat(100)]);
  const first = w.take();
  const copy = first.slice();
  // Much more than the buffer holds: it grows, and the taken bytes stay.
  for (let i = 0; i < 2000; i++) w.append(3 + i, 6, "c".repeat(90));
  assertEquals([...first], [...copy]);
  const second = w.take();
  assertEquals(second.length > 64 * 1024, true);
  assertEquals(w.pendingBytes, 0);
});
