// The soak's model of a keyed stream: each key's latest row below an end
// (a key whose latest row a filter refuses is left out), and a reader's
// check against it — a snapshot, then every later row its grant and filter
// let through, once, in order — on hand-made logs, so that each kind of
// wrong delivery is seen to be caught.
import { assertEquals } from "../../harness/assert.ts";
import { KeyedReader, type LogRow, snapshotModel } from "../../harness/soak/keyed_readers.ts";
import type { SoakRow } from "../../harness/soak/signed_clients.ts";

const rows: [string, number][] = [["A", 10], ["B", 90], ["A", 60], ["C", 20], ["B", 30], ["A", 5]];
const log: LogRow[] = rows.map(([sym, px], i) => {
  const row: SoakRow = { sym, src: "p", seq: i + 1, px };
  return { offset: i + 1, row, text: JSON.stringify(row) };
});
const got = (...offsets: number[]): [number, string][] => offsets.map((o) => [o, log[o - 1].text]);

Deno.test("keyed readers: the snapshot model keeps each key's latest row below the end, then filters", () => {
  assertEquals(snapshotModel(log, 5, () => true).map((r) => r.offset), [2, 3, 4]);
  // A's latest below 5 is 60 (offset 3): refused by px < 50, though an earlier A passed.
  assertEquals(snapshotModel(log, 5, (r) => r.px < 50).map((r) => r.offset), [4]);
  assertEquals(snapshotModel(log, 7, () => true).map((r) => r.offset), [4, 5, 6]);
});

Deno.test("keyed readers: a reader's check finds a gap, a duplicate, a row outside its grant and a wrong snapshot", () => {
  const check = (r: KeyedReader) => r.check(log, 7);
  const from1 = (...o: number[]) => {
    const r = new KeyedReader("r", { px: { lt: 50 } }, null, 1);
    r.rows.push(...got(...o));
    return check(r);
  };
  assertEquals(from1(1, 4, 5, 6), { grantViolations: 0, problems: [] });
  assertEquals(from1(1, 4, 6).problems.length, 1); // a gap
  assertEquals(from1(1, 4, 4, 5, 6).problems.length, 1); // a duplicate
  assertEquals(from1(1, 2, 4, 5, 6).grantViolations, 1);
  const snap = (keys: number, ...o: number[]) => {
    const r = new KeyedReader("s", null, { sym: ["A", "C"] }, "snapshot");
    r.snapshot = { end: 5, keys };
    r.rows.push(...got(...o));
    return check(r).problems;
  };
  assertEquals(snap(2, 3, 4, 6), []);
  assertEquals(snap(2, 1, 4, 6).length, 1); // A's snapshot row is not its latest
  assertEquals(snap(1, 4, 6).length, 2); // a key left out: the count and the rows differ
});
