// Child of adopt_memory_test.ts: adopts one chunk from a primary's HTTP route
// into a fresh folder, the way a mirror does (httpSource + storeAdoptedChunk),
// and prints its memory (VmHWM, the peak, and VmRSS; MiB) before and after.
// usage: _adopt_child.ts BASE_URL ENTRY_JSON DIR
import { httpSource } from "../../../server/mirror/_fetch_history.ts";
import { storeAdoptedChunk } from "../../../log/chunk/adoption.ts";

const [base, entryJson, dir] = Deno.args;
const entry = JSON.parse(entryJson);
const mem = () => {
  const s = Deno.readTextFileSync("/proc/self/status");
  const kb = (k: string) => Number(new RegExp(`${k}:\\s*(\\d+)`).exec(s)![1]) / 1024;
  return { hwm: kb("VmHWM"), rss: kb("VmRSS") };
};
const src = httpSource(base, {
  signal: new AbortController().signal,
  idleMs: 30_000,
  maxManifestBytes: 1 << 20,
});
// Warm up what the adoption itself loads (fetch, zstd, the file APIs).
await (await fetch(`${base}/ping`)).text();
const before = mem();
const body = await src.chunk(entry.sha256);
if (body === null) throw new Error("no chunk");
await storeAdoptedChunk(dir, entry, body, null);
console.log(JSON.stringify({ before, after: mem() }));
