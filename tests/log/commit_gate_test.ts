// The commit gate of a replicated log: rows become visible (to waiters and to
// the fan-out) only below min(durable end, commit index), in order, and a
// refused waiter leaves its rows to be committed or cut later.
import { assertEquals, assertRejects, assertThrows } from "../harness/assert.ts";
import { CommitGate } from "../../log/replica/commit_gate.ts";

Deno.test("commit gate shows rows only once durable here and committed, in order", async () => {
  const gate = new CommitGate(5);
  const seen: [number, number][] = [];
  gate.onVisible = (first, end) => seen.push([first, end]);
  const settled: number[] = [];
  const wait = (end: number) => gate.until(end).then(() => settled.push(end));
  const all = [wait(7), wait(6), wait(9), wait(5)];
  await Promise.resolve();
  assertEquals(settled, [5]); // already visible
  gate.commitThrough(9); // the cluster holds rows this node has not synced yet
  await Promise.resolve();
  assertEquals(gate.end, 5);
  gate.durable(8);
  await Promise.resolve();
  assertEquals(gate.end, 8);
  assertEquals(settled, [5, 6, 7]);
  gate.commitThrough(7); // an older index changes nothing
  gate.durable(12);
  await Promise.all(all);
  assertEquals(gate.end, 9);
  assertEquals(settled, [5, 6, 7, 9]);
  assertEquals(seen, [[5, 8], [8, 9]]);
});

Deno.test("commit gate refuses its waiters without taking rows back; a cut never reaches committed rows", async () => {
  const gate = new CommitGate(1);
  gate.durable(10);
  gate.commitThrough(4);
  const refused = gate.until(10);
  assertEquals(gate.waiting, 1);
  gate.fail(new Error("no longer leader"));
  await assertRejects(() => refused, Error, "no longer leader");
  assertEquals(gate.waiting, 0);
  assertThrows(() => gate.cut(3), RangeError, "committed");
  gate.cut(6); // the uncommitted tail from 6 goes
  assertEquals(gate.durableEnd, 6);
  gate.commitThrough(9);
  assertEquals(gate.end, 6); // nothing past the cut is shown
  gate.durable(9);
  assertEquals(gate.end, 9);
});
