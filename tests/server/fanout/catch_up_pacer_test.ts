import { assert, assertEquals } from "../../harness/assert.ts";
import { CatchUpPacer } from "../../../server/fanout/catch_up_pacer.ts";
import { setImmediate } from "node:timers";

Deno.test("catch-up pacer: loops take turns in arrival order and the budget bounds each turn", async () => {
  const pacer = new CatchUpPacer(1000);
  let turn = 0;
  const log: [string, number][] = [];
  let ticking = true;
  (async () => {
    while (ticking) {
      await new Promise((r) => setImmediate(r));
      turn++;
    }
  })();
  async function worker(name: string, slices: number, cost: number): Promise<void> {
    for (let i = 0; i < slices; i++) {
      await pacer.turn();
      log.push([name, turn]);
      pacer.spend(cost);
    }
  }
  await Promise.all([worker("a", 6, 400), worker("b", 6, 400), worker("c", 6, 400)]);
  ticking = false;
  // Round robin: a b c a b c ...
  assertEquals(log.map(([n]) => n).join(""), "abcabcabcabcabcabc");
  // At most three slices of 400 per turn (the third goes over and ends it).
  const perTurn = new Map<number, number>();
  for (const [, t] of log) perTurn.set(t, (perTurn.get(t) ?? 0) + 1);
  for (const [t, n] of perTurn) assert(n <= 3, `turn ${t}: ${n} slices`);
  assert(perTurn.size >= 6, `18 slices of 400 need at least 6 turns, used ${perTurn.size}`);
});

Deno.test("catch-up pacer: a slice granted and never spent does not stop the others for more than a turn", async () => {
  const pacer = new CatchUpPacer(1000);
  await pacer.turn(); // granted, never spent
  let ran = false;
  const other = pacer.turn().then(() => {
    ran = true;
    pacer.spend(1);
  });
  // Bounded: a pacer that never let it go would otherwise hang the test.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), 2000)));
  const outcome = await Promise.race([other.then(() => "ran" as const), late]);
  clearTimeout(timer);
  assertEquals(outcome, "ran");
  assert(ran);
  assertEquals(pacer.waiting, 0);
});
