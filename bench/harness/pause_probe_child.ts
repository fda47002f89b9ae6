// The sleeping side of ./pause_probe.ts: a process that asks for 1 ms timers
// one after the other and counts the wake-ups that came at least MIN_MS later
// than asked. It does nothing else, so a late wake-up is the machine not
// running it (the hypervisor pausing the VM, or every CPU busy), not work of
// its own.
//
// usage: pause_probe_child.ts MIN_MS
//
// Prints "ready" on stdout once its loop runs; when stdin ends, prints one
// JSON line `{ "pauses": N, "pausedMs": MS, "longestMs": MS }` (the late
// wake-ups' count, the sum of their oversleeps and the longest) and exits.

const minMs = Number(Deno.args[0]);
if (!(minMs > 0)) {
  throw new RangeError(`pause_probe_child.ts: MIN_MS must be > 0, got ${Deno.args[0]}`);
}

let stopping = false;
const ended = (async () => {
  for await (const _ of Deno.stdin.readable) {
    // Nothing is read from stdin but its end.
  }
})().finally(() => (stopping = true));

const enc = new TextEncoder();
await Deno.stdout.write(enc.encode("ready\n"));
let pauses = 0;
let pausedMs = 0;
let longestMs = 0;
while (!stopping) {
  const t = performance.now();
  await new Promise((r) => setTimeout(r, 1));
  const lateMs = performance.now() - t - 1;
  if (lateMs >= minMs) {
    pauses++;
    pausedMs += lateMs;
    longestMs = Math.max(longestMs, lateMs);
  }
}
await ended;
await Deno.stdout.write(enc.encode(JSON.stringify({ pauses, pausedMs, longestMs }) + "\n"));
