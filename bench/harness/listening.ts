/**
 * Two steps every benchmark's server child shares: waiting for the
 * `listening on http://127.0.0.1:PORT` line a server prints on stderr once
 * ready, and stopping the child — a signal, SIGKILL if it has not exited
 * within 10 s, then waiting for its output to be read to the end.
 *
 * @module
 */

const LISTENING = /listening on http:\/\/127\.0\.0\.1:(\d+)/;

/**
 * The port in the `listening on` line of `stderr()` once it is there; after
 * `timeoutMs` without it, `stop()` and throws with the output's end.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { waitListening } from "./listening.ts";
 * const port = await waitListening(() => "listening on http://127.0.0.1:8765\n", "x", async () => {});
 * equal(port, 8765);
 * ```
 */
export async function waitListening(
  stderr: () => string,
  who: string,
  stop: () => Promise<void>,
  timeoutMs = 30_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let m: RegExpExecArray | null;
  while (!(m = LISTENING.exec(stderr()))) {
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${who} did not start:\n${stderr().slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return Number(m[1]);
}

/**
 * Asks `child` to stop — with `signal`, or by calling `ask` (closing its
 * stdin, say) — SIGKILLs it after 10 s, waits for it to exit and for `after`
 * (its output being read) to settle.
 */
export async function stopChild(
  child: Deno.ChildProcess,
  signal: Deno.Signal | (() => Promise<void>),
  after: Promise<unknown>[] = [],
): Promise<void> {
  const t = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* exited */ }
  }, 10_000);
  try {
    if (typeof signal === "function") await signal();
    else child.kill(signal);
  } catch { /* exited */ }
  await child.status;
  clearTimeout(t);
  await Promise.all(after);
}
