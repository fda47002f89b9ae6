// A worker for tests/common/worker_thread_test.ts: on each message it makes
// short-lived garbage (as the chunk worker does sealing a segment) and
// answers with the size its heap's new space (the semi-spaces) has grown to,
// bytes.
// Started as a WorkerThread or, to compare, as a plain Web Worker.
/// <reference lib="deno.worker" />
import v8 from "node:v8";
import { parentPort } from "node:worker_threads";
import { parentChannel } from "../../common/worker_thread.ts";

if (parentPort) {
  const post = parentChannel<number, number>((rows) => post(churn(rows)));
} else {
  self.onmessage = (e: MessageEvent<number>) => self.postMessage(churn(e.data));
}

function churn(rows: number): number {
  let keep: unknown[] = [];
  for (let i = 0; i < rows; i++) {
    keep.push({ offset: i, row: JSON.stringify({ sym: `S${i % 500}`, px: i * 0.01 }) });
    if (keep.length > 50_000) keep = [];
  }
  return v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space")!.space_size;
}
