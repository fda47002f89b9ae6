// The fan-out's allowance a turn (SendBudget.turnBytes): what is handed out
// counts against the turn; the count restarts at the next turn once it
// reached half the allowance, and carries over below that (so a commit that
// hands out little schedules no turn of its own); a turn never has more than
// the allowance, and always at least half of it.
import { assertEquals } from "../../harness/assert.ts";
import { setImmediate } from "node:timers";
import { SendBudget } from "../../../server/fanout/send_budget.ts";
import { FanoutPacer } from "../../../server/fanout/fanout_pacer.ts";
import { MIN_SEND_BUFFER_BYTES } from "../../../server/limits.ts";

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

Deno.test("turn bytes: below half the allowance the count carries over to the next turn", async () => {
  const budget = new SendBudget(MIN_SEND_BUFFER_BYTES, 100);
  budget.charge(30);
  await turn();
  budget.charge(30); // 60 in all: past half, the count restarts at the next turn
  assertEquals(budget.turnSpent(), false);
  budget.charge(40);
  assertEquals(budget.turnSpent(), true, "100 of 100 spent");
  await turn();
  assertEquals(budget.turnSpent(), false, "restarted");
  budget.charge(99);
  assertEquals(budget.turnSpent(), false, "a whole allowance again after a restart");
  budget.charge(1);
  assertEquals(budget.turnSpent(), true);
});

Deno.test("turn bytes: small commits over many turns hand out the whole allowance before pacing", async () => {
  const budget = new SendBudget(MIN_SEND_BUFFER_BYTES, 1000);
  const got: string[] = [];
  const sub = (name: string) => ({
    sendBudget: budget,
    push(frames: readonly string[]) {
      got.push(name);
      return frames[0].length;
    },
  });
  const shared = { joined: () => "", arrow: () => new Uint8Array(0) };
  const pacer = new FanoutPacer();
  const subs = [sub("a"), sub("b"), sub("c"), sub("d")];
  // Commits of 4 × 10 bytes, one a turn: never paced, the count carrying over
  // until it reaches 500, then restarting.
  for (let i = 0; i < 40; i++) {
    pacer.fanOut(subs, ["x".repeat(10)], i + 1, shared);
    assertEquals(pacer.waiting, 0, `commit ${i} handed out at once`);
    await turn();
  }
  assertEquals(got.length, 160);
  // One commit worth more than the allowance: paced, at most 1000 bytes a turn.
  got.length = 0;
  pacer.fanOut(subs, ["y".repeat(400)], 41, shared);
  assertEquals(got, ["a", "b", "c"]); // 1200 ≥ 1000 after the third
  await pacer.idle();
  assertEquals(got, ["a", "b", "c", "d"]);
});
