/**
 * A process that keeps a disk busy the way a second node on the same disk
 * does: in a temporary folder, it writes 200 bytes to each of two files and
 * syncs both at once (a node's segment and producer journal), again and
 * again, until its stdin closes; then it removes the folder and exits. It
 * prints `ready` once its loop runs. Used by ../e2e/ack.ts for the disk's
 * floor of a cluster whose two nodes share one disk.
 *
 * ```text
 * deno run --no-config bench/harness/sync_loop.ts
 * ```
 *
 * @module
 */

const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-sync-loop-" });
const files = await Promise.all(
  ["segment", "journal"].map((name) => Deno.open(`${dir}/${name}`, { write: true, create: true })),
);
const bytes = new Uint8Array(200).fill(97);
let open = true;
// Any end of stdin (closed, or the parent gone) ends the loop.
const stdinDone = (async () => {
  for await (const _ of Deno.stdin.readable) { /* nothing is sent; only the end matters */ }
})().catch(() => {}).finally(() => (open = false));
console.log("ready");
while (open) {
  for (const f of files) f.writeSync(bytes);
  await Promise.all(files.map((f) => f.syncData()));
}
await stdinDone;
for (const f of files) f.close();
await Deno.remove(dir, { recursive: true });
