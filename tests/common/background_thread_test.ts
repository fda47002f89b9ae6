import { equal, notEqual, ok } from "node:assert/strict";
import { BackgroundService } from "../../common/background_thread.ts";

type Msg = { dir: string; n: number; thread?: number; failure?: string };

// A service that answers each message to its folder with n + step and the
// thread it runs on, and throws on a negative n.
async function serviceFile(step: number): Promise<URL> {
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  await Deno.writeTextFile(
    file,
    `import { threadId } from "node:worker_threads";
     type Msg = { dir: string; n: number; thread?: number };
     export function serve(post: (m: Msg) => void) {
       return (m: Msg) => {
         if (m.n < 0) throw new Error("negative " + m.n);
         post({ dir: m.dir, n: m.n + ${step}, thread: threadId });
       };
     }`,
  );
  return new URL(`file://${file}`);
}

const failed = (dir: string, failure: string): Msg => ({ dir, n: -1, failure });

// Routes `dir` on `port`, sends it `n` and resolves with what the service answers.
function roundTrip(port: BackgroundService<Msg, Msg>, dir: string, n: number): Promise<Msg> {
  const answer = Promise.withResolvers<Msg>();
  port.register(dir, answer.resolve);
  port.post({ dir, n });
  return answer.promise;
}

// Resolves once `count` messages have been heard by the handlers it makes.
function collector(count: number) {
  const heard: Msg[] = [];
  const all = Promise.withResolvers<Msg[]>();
  const hear = (m: Msg) => {
    heard.push(m);
    if (heard.length === count) all.resolve(heard);
  };
  return { hear, all: all.promise };
}

Deno.test("background thread: two services on one thread, routed by service and folder in order, memory kept, stopped by the last release", async () => {
  const one = await serviceFile(1);
  const thousand = await serviceFile(1000);
  try {
    const a = BackgroundService.acquire<Msg, Msg>(one, failed);
    const b = BackgroundService.acquire<Msg, Msg>(thousand, failed);
    const c = BackgroundService.acquire<Msg, Msg>(one, failed);
    const got = collector(30);
    // The same folder on both services: routed by service first.
    a.register("/a", got.hear);
    b.register("/a", got.hear);
    c.register("/c", got.hear);
    // Posted before either module has loaded: held, then handed over in order.
    for (let i = 0; i < 10; i++) {
      a.post({ dir: "/a", n: i });
      b.post({ dir: "/a", n: i });
      c.post({ dir: "/c", n: 100 + i });
    }
    const heard = await got.all;
    const ns = (pick: (m: Msg) => boolean) => heard.filter(pick).map((m) => m.n).join();
    equal(
      ns((m) => m.dir === "/a" && m.n < 1000),
      Array.from({ length: 10 }, (_, i) => i + 1).join(),
    );
    equal(
      ns((m) => m.dir === "/a" && m.n >= 1000),
      Array.from({ length: 10 }, (_, i) => 1000 + i).join(),
    );
    equal(ns((m) => m.dir === "/c"), Array.from({ length: 10 }, (_, i) => 101 + i).join());
    const threads = new Set(heard.map((m) => m.thread));
    equal(threads.size, 1, "every service on one thread");
    ok([...threads][0]! > 0, "not the main thread");
    // The thread reports its memory as it starts.
    while (BackgroundService.memory() === null) await new Promise((r) => setTimeout(r, 10));
    ok(BackgroundService.memory()!.heapUsed > 0);
    a.release();
    b.release();
    notEqual(BackgroundService.memory(), null); // one port left: still running
    c.release();
    equal(BackgroundService.memory(), null);
    // The next acquire starts a new thread.
    const d = BackgroundService.acquire<Msg, Msg>(thousand, failed);
    const again = await roundTrip(d, "/d", 1);
    equal(again.n, 1001);
    notEqual(again.thread, [...threads][0]);
    d.release();
  } finally {
    await Deno.remove(one);
    await Deno.remove(thousand);
  }
});

Deno.test("background thread: a folder's next user keeps its route when the old one releases; a failure reaches every folder of every service and the next user gets a new thread", async () => {
  const one = await serviceFile(1);
  const thousand = await serviceFile(1000);
  try {
    const first = BackgroundService.acquire<Msg, Msg>(one, failed);
    first.register("/t", () => {
      throw new Error("the released user was routed a message");
    });
    // The folder's next user registers before the old one lets go.
    const next = BackgroundService.acquire<Msg, Msg>(one, failed);
    const got = collector(2);
    next.register("/t", got.hear);
    first.release(); // not the folder's route any more: it stays
    const other = BackgroundService.acquire<Msg, Msg>(thousand, failed);
    equal((await roundTrip(other, "/u", 1)).n, 1001); // both services loaded
    other.register("/u", got.hear);
    equal((await roundTrip(next, "/t", 1)).n, 2);
    next.register("/t", got.hear);
    next.post({ dir: "/t", n: -5 });
    const failures = (await got.all).sort((x, y) => x.dir.localeCompare(y.dir));
    equal(
      failures.map((m) => `${m.dir} ${m.failure}`).join(", "),
      "/t negative -5, /u negative -5",
    );
    // The failed thread is not used again: the next user gets a new one.
    const after = BackgroundService.acquire<Msg, Msg>(thousand, failed);
    equal((await roundTrip(after, "/v", 7)).n, 1007);
    next.release();
    other.release();
    after.release();
    equal(BackgroundService.memory(), null);
  } finally {
    await Deno.remove(one);
    await Deno.remove(thousand);
  }
});

Deno.test("background thread: a port's release drops every route it registered, once", async () => {
  const one = await serviceFile(1);
  try {
    const keeper = BackgroundService.acquire<Msg, Msg>(one, failed);
    const { thread } = await roundTrip(keeper, "/keep", 0);
    const leaving = BackgroundService.acquire<Msg, Msg>(one, () => {
      throw new Error("a released port heard a failure");
    });
    const stale: Msg[] = [];
    leaving.register("/p", (m) => stale.push(m));
    leaving.register("/q", (m) => stale.push(m));
    leaving.release();
    leaving.release(); // the second call drops no other reference: the thread keeps running
    // The service answers in order: once /keep's answer is heard, /p's and /q's came before it.
    keeper.post({ dir: "/p", n: 1 });
    keeper.post({ dir: "/q", n: 1 });
    const after = await roundTrip(keeper, "/keep", 5);
    equal(after.n, 6);
    equal(after.thread, thread, "the same thread: the double release did not stop it");
    equal(stale.length, 0, "no route of the released port is left");
    keeper.release();
    equal(BackgroundService.memory(), null);
  } finally {
    await Deno.remove(one);
  }
});

Deno.test("background thread: an error in a message held while its service loaded, or a service that cannot load, stops the thread and reaches every folder", async () => {
  const one = await serviceFile(1);
  try {
    for (
      const [what, url, n] of [["held message", one, -3], [
        "missing module",
        new URL("file:///nowhere/service.ts"),
        1,
      ]] as const
    ) {
      const port = BackgroundService.acquire<Msg, Msg>(url, failed);
      const got = collector(1);
      port.register("/x", got.hear);
      port.post({ dir: "/x", n });
      const [m] = await got.all;
      ok(m.failure !== undefined, `${what}: the folder hears the failure`);
      ok(what !== "held message" || /negative -3/.test(m.failure!), m.failure);
      ok(what !== "missing module" || /nowhere/.test(m.failure!), m.failure);
      port.release();
      equal(BackgroundService.memory(), null);
    }
    // And the next user works.
    const port = BackgroundService.acquire<Msg, Msg>(one, failed);
    equal((await roundTrip(port, "/y", 41)).n, 42);
    port.release();
  } finally {
    await Deno.remove(one);
  }
});
