// The writer's lock against child processes started by other threads of the
// same process: a fork holds a copy of every descriptor until its exec, so
// the lock of a log just closed can look held for that moment. A log closed
// and opened again in a loop while a worker thread starts children must
// never be refused; a second writer in the same isolate still is, and so
// is one in another isolate of this process (after the short wait).
import { assert, assertEquals, assertRejects } from "../harness/assert.ts";
import { rmrf, tempDir } from "../harness/util.ts";
import { Log, LogLockedError } from "../../log/mod.ts";
import { SELF_HELD_WAIT_MS, takeWriterLock } from "../../log/disk/writer_lock.ts";

// A worker that starts `true` in a loop until told to stop, then says how many.
const SPAWNER = `
let stop = false;
self.onmessage = () => { stop = true; };
let n = 0;
while (!stop) {
  await new Deno.Command("true", { stdout: "null", stderr: "null" }).output();
  n++;
}
self.postMessage(n);
`;

function worker(code: string): Worker {
  const url = URL.createObjectURL(new Blob([code], { type: "application/javascript" }));
  return new Worker(url, { type: "module" });
}

Deno.test("the writer's lock: a log closed and opened again while another thread starts processes", async () => {
  const dir = await tempDir();
  const spawner = worker(SPAWNER);
  const spawned = new Promise<number>((resolve) => (spawner.onmessage = (e) => resolve(e.data)));
  try {
    let reopened = 0;
    const until = performance.now() + 4000;
    while (performance.now() < until) {
      const log = await Log.open(dir, { timers: false });
      await log.appendMany(["{}"]);
      await log.close();
      (await takeWriterLock(dir)).close();
      reopened++;
    }
    spawner.postMessage("stop");
    const children = await spawned;
    console.log(`${reopened} reopenings while another thread started ${children} processes`);
    assert(children > 10, `the worker started processes (${children})`);
    const log = await Log.open(dir, { timers: false });
    assertEquals(log.endOffset, reopened + 1);
    await log.close();
  } finally {
    spawner.terminate();
    await rmrf(dir);
  }
});

Deno.test("the writer's lock: a second writer in this isolate is refused, one in another isolate after the wait", async () => {
  const dir = await tempDir();
  try {
    const log = await Log.open(dir, { timers: false });
    await assertRejects(() => Log.open(dir), LogLockedError);
    await log.close();
    // Another isolate (a worker) holds it: this one waits, then is refused.
    const holder = worker(`
      import { takeWriterLock } from ${
      JSON.stringify(import.meta.resolve("../../log/disk/writer_lock.ts"))
    };
      const lock = await takeWriterLock(${JSON.stringify(dir)});
      self.postMessage("held");
      self.onmessage = () => { lock.close(); self.postMessage("released"); };
    `);
    try {
      const next = () => new Promise((resolve) => (holder.onmessage = (e) => resolve(e.data)));
      assertEquals(await next(), "held");
      const t0 = performance.now();
      const err = await assertRejects(() => takeWriterLock(dir), LogLockedError);
      assert(err.message.includes(`pid ${Deno.pid}`), err.message);
      assert(performance.now() - t0 >= SELF_HELD_WAIT_MS, "refused after the wait");
      const released = next();
      holder.postMessage("release");
      assertEquals(await released, "released");
      (await takeWriterLock(dir)).close();
    } finally {
      holder.terminate();
    }
  } finally {
    await rmrf(dir);
  }
});
