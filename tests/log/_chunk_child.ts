// Child for the chunk crash tests: appends ROWS rows to a log that seals small
// segments into chunks (merging pairs), then waits for the worker. Run with
// STREAMCAST_CRASH_AT=<step> to be killed at that step.
import { Log } from "../../log/mod.ts";
import { crashPayload } from "./_crash_payload.ts";

const [dir, rowsS] = Deno.args;
const rows = Number(rowsS);
const log = await Log.open(dir, {
  segmentBytes: 8 * 1024,
  beaconInterval: 2048,
  chunks: { fanIn: 2, graceMs: 0 },
  timers: false,
});
while (log.nextOffset <= rows) {
  const batch = [];
  for (let i = 0; i < 20 && log.nextOffset + i <= rows; i++) {
    batch.push(crashPayload(log.nextOffset + i));
  }
  await log.appendMany(batch);
}
await log.roll();
await log.chunks.settled(true);
console.log("done");
await log.close();
