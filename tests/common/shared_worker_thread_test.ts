import { equal, notEqual, ok } from "node:assert/strict";
import { SharedWorkerThread } from "../../common/shared_worker_thread.ts";

type Msg = { dir: string; n: number; failure?: string };

// A worker that answers each message to its folder with n + 1, reports its
// memory like the server's workers, and throws on a negative n.
async function workerFile(): Promise<URL> {
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  await Deno.writeTextFile(
    file,
    `import { parentChannel } from ${
      JSON.stringify(import.meta.resolve("../../common/worker_thread.ts"))
    };
     import { reportWorkerMemory } from ${
      JSON.stringify(import.meta.resolve("../../common/worker_memory.ts"))
    };
     type Msg = { dir: string; n: number };
     const post = parentChannel<Msg, Msg | { type: "memory"; memory: unknown }>((m) => {
       if (m.n < 0) throw new Error("negative " + m.n);
       post({ dir: m.dir, n: m.n + 1 });
     });
     reportWorkerMemory((memory) => post({ type: "memory", memory }));`,
  );
  return new URL(`file://${file}`);
}

const failed = (dir: string, failure: string): Msg => ({ dir, n: -1, failure });

// Routes `dir` on `w`, sends it `n` and resolves with what the worker answers.
function roundTrip(w: SharedWorkerThread<Msg, Msg>, dir: string, n: number): Promise<number> {
  const answer = Promise.withResolvers<Msg>();
  w.register(dir, answer.resolve);
  w.post({ dir, n });
  return answer.promise.then((m) => m.n);
}

Deno.test("shared worker thread: one thread per module, messages routed by folder, memory kept, stopped by the last release", async () => {
  const url = await workerFile();
  const a = SharedWorkerThread.acquire<Msg, Msg>(url, failed);
  const b = SharedWorkerThread.acquire<Msg, Msg>(url, failed);
  equal(a, b);
  const got: Record<string, number[]> = { "/a": [], "/b": [] };
  const all = Promise.withResolvers<void>();
  const hear = (m: Msg) => {
    got[m.dir].push(m.n);
    if (got["/a"].length + got["/b"].length === 20) all.resolve();
  };
  a.register("/a", hear);
  b.register("/b", hear);
  for (let i = 0; i < 10; i++) {
    a.post({ dir: "/a", n: i });
    b.post({ dir: "/b", n: 100 + i });
  }
  await all.promise;
  equal(got["/a"].join(), Array.from({ length: 10 }, (_, i) => i + 1).join());
  equal(got["/b"].join(), Array.from({ length: 10 }, (_, i) => 101 + i).join());
  ok((SharedWorkerThread.memoryOf(url)?.heapUsed ?? 0) > 0, "the worker's memory report is kept");
  a.release("/a");
  notEqual(SharedWorkerThread.memoryOf(url), null); // one reference left: still running
  b.release("/b");
  equal(SharedWorkerThread.memoryOf(url), null);
  // The next acquire starts a new thread.
  const c = SharedWorkerThread.acquire<Msg, Msg>(url, failed);
  notEqual(c, a);
  equal(await roundTrip(c, "/c", 1), 2);
  c.release("/c");
  await Deno.remove(url);
});

Deno.test("shared worker thread: a folder's next user keeps its route when the last one releases; a failure reaches every folder and the next user gets a new thread", async () => {
  const url = await workerFile();
  const first = SharedWorkerThread.acquire<Msg, Msg>(url, failed);
  const oldHandler = () => {
    throw new Error("the released user was routed a message");
  };
  first.register("/t", oldHandler);
  // The folder's next user registers before the last lets go.
  const next = SharedWorkerThread.acquire<Msg, Msg>(url, failed);
  const heard: Msg[] = [];
  const twoFailures = Promise.withResolvers<void>();
  const onT = (m: Msg) => {
    heard.push(m);
    if (heard.length === 3) twoFailures.resolve();
  };
  next.register("/t", onT);
  first.release("/t", oldHandler); // not the folder's handler any more: the route stays
  const other = SharedWorkerThread.acquire<Msg, Msg>(url, failed);
  other.register("/u", (m) => {
    heard.push(m);
    if (heard.length === 3) twoFailures.resolve();
  });
  next.post({ dir: "/t", n: 1 });
  next.post({ dir: "/t", n: -5 });
  await twoFailures.promise;
  equal(heard[0].n, 2);
  const failures = heard.slice(1).sort((x, y) => x.dir.localeCompare(y.dir));
  equal(failures.map((m) => `${m.dir} ${m.failure}`).join(", "), "/t negative -5, /u negative -5");
  // The failed thread is not handed out again: the next user gets a new one.
  const after = SharedWorkerThread.acquire<Msg, Msg>(url, failed);
  notEqual(after, next);
  equal(await roundTrip(after, "/v", 7), 8);
  next.release("/t", onT);
  other.release("/u");
  after.release("/v");
  equal(SharedWorkerThread.memoryOf(url), null);
  await Deno.remove(url);
});
