// The server's publish budget as POST bodies use it (server/publish/budget.ts):
// a body is read on only while the rest it declares fits, holds only what
// arrived, and bodies held part-way never wait on each other forever.
import { assertEquals } from "../../harness/assert.ts";
import { PublishBudget } from "../../../server/publish/budget.ts";

const settled = async (p: Promise<void>) => {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setTimeout(r, 0));
  return done;
};

Deno.test("publish budget: bodies held part-way that fill the bound go one at a time past it", async () => {
  const b = new PublishBudget(100);
  const a = {}, c = {};
  await b.beforeRead(80, 0, a); // nothing held: a reads
  b.took(60);
  // 60 + 80 > 100 and c holds nothing yet: it waits.
  const cWaits = b.beforeRead(80, 0, c);
  assertEquals(await settled(cWaits), false);
  // a, held part-way, would wait for c forever if c held bytes too: it goes past the bound.
  await b.beforeRead(20, 60, a);
  b.took(20);
  assertEquals(b.used, 80);
  // a is answered: what it held is freed and c reads.
  b.endBody(80, a);
  assertEquals([await settled(cWaits), b.used], [true, 0]);
});

Deno.test("publish budget: only one body at a time is let past the bound", async () => {
  const b = new PublishBudget(100);
  const a = {}, c = {};
  await b.beforeRead(50, 0, a);
  b.took(50);
  await b.beforeRead(50, 0, c);
  b.took(50);
  // Both held part-way, the budget full: a goes past it, c waits for a.
  await b.beforeRead(50, 50, a);
  const cWaits = b.beforeRead(50, 50, c);
  assertEquals(await settled(cWaits), false);
  b.took(50);
  b.endBody(100, a);
  assertEquals([await settled(cWaits), b.used], [true, 50]);
  b.endBody(50, c);
  assertEquals(b.used, 0);
});
