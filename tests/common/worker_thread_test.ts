import { equal, ok } from "node:assert/strict";
import { WORKER_YOUNG_GENERATION_MIB, WorkerThread } from "../../common/worker_thread.ts";

const CHURN = new URL("./_churn_worker.ts", import.meta.url);

// What the churn worker's young generation grows to, bytes, started as `start` says.
async function youngAfterChurn(
  start: (onAnswer: (bytes: number) => void) => { post(rows: number): void; stop(): void },
): Promise<number> {
  const answer = Promise.withResolvers<number>();
  const w = start(answer.resolve);
  try {
    w.post(2_000_000);
    return await answer.promise;
  } finally {
    w.stop();
  }
}

Deno.test("worker thread: a busy worker's young generation stays within its cap (a Web Worker's grows past it)", async () => {
  const capped = await youngAfterChurn((onAnswer) => {
    const w = new WorkerThread<number, number>(CHURN, onAnswer, (m) => {
      throw new Error(m);
    });
    return { post: (n) => w.post(n), stop: () => void w.terminate() };
  });
  const plain = await youngAfterChurn((onAnswer) => {
    const w = new Worker(CHURN.href, { type: "module" });
    w.onmessage = (e: MessageEvent<number>) => onAnswer(e.data);
    return { post: (n) => w.postMessage(n), stop: () => w.terminate() };
  });
  const cap = WORKER_YOUNG_GENERATION_MIB * 1024 * 1024;
  console.log(`new space after churn: capped ${capped} B, Web Worker ${plain} B, cap ${cap} B`);
  ok(capped <= cap, `capped worker's young generation ${capped} B > ${cap} B`);
  ok(
    plain > cap,
    `a Web Worker's young generation ${plain} B did not outgrow the cap: the test shows nothing`,
  );
});

Deno.test("worker thread: messages go both ways in order; an uncaught error is reported", async () => {
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(
      file,
      `import { parentChannel } from ${
        JSON.stringify(import.meta.resolve("../../common/worker_thread.ts"))
      };
       const post = parentChannel<number, number>((n) => { if (n < 0) throw new Error("negative " + n); post(n + 1); });`,
    );
    const got: number[] = [];
    const failed = Promise.withResolvers<string>();
    const all = Promise.withResolvers<void>();
    const w = new WorkerThread<number, number>(new URL(`file://${file}`), (n) => {
      got.push(n);
      if (got.length === 100) all.resolve();
    }, failed.resolve);
    for (let i = 0; i < 100; i++) w.post(i);
    await all.promise;
    equal(got.join(), Array.from({ length: 100 }, (_, i) => i + 1).join());
    w.post(-1);
    equal(await failed.promise, "negative -1");
    await w.terminate();
  } finally {
    await Deno.remove(file);
  }
});
