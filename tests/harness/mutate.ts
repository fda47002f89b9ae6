// Seeded mutations of file bytes for the reader fuzz tests, and a map of where
// each record of a pristine segment file lies (to tell which rows a damaged
// file must still yield).
import {
  BEACON_BYTES,
  END_MAGIC,
  END_MARK_BYTES,
  getU64,
  HEADER_BYTES,
  Layout,
  RECORD_OVERHEAD,
} from "../../log/segment/format.ts";

/** The kinds of damage applied. */
export const MUTATIONS = [
  "flip",
  "truncate",
  "insert",
  "delete",
  "random",
  "swap",
  "zero",
  "whole",
] as const;

/** One kind of damage. */
export type MutationKind = typeof MUTATIONS[number];

/** A mutated copy of some bytes and where it first differs. */
export interface Mutation {
  kind: MutationKind;
  bytes: Uint8Array;
  /** First index where the copy differs from the original (its length if it is a prefix). */
  first: number;
  /**
   * First index of the original from which its bytes are intact again (shifted
   * by `shift` in the copy), or Infinity when nothing after the damage is.
   */
  intactFrom: number;
  /** How far intact bytes after the damage moved (insert: +n, delete: -n). */
  shift: number;
  /** Human-readable description for failure messages. */
  what: string;
}

function int(rand: () => number, lo: number, hi: number): number {
  return lo + Math.floor(rand() * (hi - lo + 1));
}

function randomBytes(rand: () => number, n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rand() * 256);
  return b;
}

/** Applies one `kind` of damage (chosen by `rand`) to a copy of `orig`. */
export function mutate(orig: Uint8Array, kind: MutationKind, rand: () => number): Mutation {
  const L = orig.length;
  const out = (bytes: Uint8Array, what: string, intactFrom: number, shift = 0): Mutation => {
    let first = 0;
    const n = Math.min(bytes.length, L);
    while (first < n && bytes[first] === orig[first]) first++;
    if (bytes.length === L && shift === 0 && intactFrom !== Infinity) {
      // In place: intact again right after the last byte that really changed.
      let last = L;
      while (last > first && bytes[last - 1] === orig[last - 1]) last--;
      intactFrom = last;
    }
    return { kind, bytes, first, intactFrom, shift, what };
  };
  switch (kind) {
    case "flip": {
      const b = orig.slice();
      const k = int(rand, 1, 4);
      let last = 0;
      const at: number[] = [];
      for (let i = 0; i < k; i++) {
        const p = int(rand, 0, L - 1);
        b[p] ^= int(rand, 1, 255);
        at.push(p);
        last = Math.max(last, p);
      }
      return out(b, `flip bytes ${at.join(",")}`, last + 1);
    }
    case "truncate": {
      const n = int(rand, 0, L - 1);
      return out(orig.slice(0, n), `truncate to ${n}`, Infinity);
    }
    case "insert": {
      const p = int(rand, 0, L);
      const ins = randomBytes(rand, int(rand, 1, 64));
      const b = new Uint8Array(L + ins.length);
      b.set(orig.subarray(0, p));
      b.set(ins, p);
      b.set(orig.subarray(p), p + ins.length);
      return out(b, `insert ${ins.length} bytes at ${p}`, p, ins.length);
    }
    case "delete": {
      const p = int(rand, 0, L - 1);
      const n = Math.min(int(rand, 1, 64), L - p);
      const b = new Uint8Array(L - n);
      b.set(orig.subarray(0, p));
      b.set(orig.subarray(p + n), p);
      return out(b, `delete ${n} bytes at ${p}`, p + n, -n);
    }
    case "random":
    case "zero": {
      const p = int(rand, 0, L - 1);
      const n = Math.min(int(rand, 1, 64), L - p);
      const b = orig.slice();
      b.set(kind === "zero" ? new Uint8Array(n) : randomBytes(rand, n), p);
      return out(b, `${kind} ${n} bytes at ${p}`, p + n);
    }
    case "swap": {
      const n = int(rand, 1, Math.max(1, Math.min(64, Math.floor(L / 2))));
      const a = int(rand, 0, L - 2 * n);
      const c = int(rand, a + n, L - n);
      const b = orig.slice();
      b.set(orig.subarray(c, c + n), a);
      b.set(orig.subarray(a, a + n), c);
      return out(b, `swap ${n} bytes at ${a} and ${c}`, c + n);
    }
    case "whole": {
      const n = int(rand, 0, 2 * L);
      return out(randomBytes(rand, n), `whole file replaced by ${n} random bytes`, Infinity);
    }
  }
}

/** Where one record lies in a segment file. */
export interface RecordSpan {
  offset: number;
  /** Physical start and end (exclusive). */
  start: number;
  end: number;
  /** Whether a beacon splits it (its bytes are not contiguous in the file). */
  split: boolean;
}

/** The records of a pristine segment file, in order, from its layout. */
export function recordSpans(file: Uint8Array, beaconInterval: number): RecordSpan[] {
  const layout = new Layout(beaconInterval);
  const I = beaconInterval;
  // The logical stream: the file without its header and beacons.
  const logical: number[] = [];
  for (let p = HEADER_BYTES; p < file.length; p++) {
    if (p >= I && p % I < BEACON_BYTES) continue;
    logical.push(file[p]);
  }
  const buf = Uint8Array.from(logical);
  const view = new DataView(buf.buffer);
  const spans: RecordSpan[] = [];
  let l = 0;
  while (l + 4 <= buf.length) {
    if (view.getUint32(l) === END_MAGIC) {
      l += END_MARK_BYTES;
      break;
    }
    if (l + 20 > buf.length) break;
    const size = view.getUint32(l + 16) + RECORD_OVERHEAD;
    if (l + size > buf.length) break;
    const start = layout.toPhysical(l);
    const end = layout.toPhysicalEnd(l + size);
    spans.push({ offset: getU64(view, l), start, end, split: end - start !== size });
    l += size;
  }
  return spans;
}
