// Child process for the crash test: appends forever, printing "ack N" for the
// highest offset each commit made durable, until it is killed.
import { Log } from "../../log/mod.ts";
import { crashPayload } from "./_crash_payload.ts";

const dir = Deno.args[0];
const log = await Log.open(dir, { beaconInterval: 4096, segmentBytes: 256 * 1024 });
const out = Deno.stdout;
const enc = new TextEncoder();
let round = 0;
while (true) {
  round++;
  const n = 1 + (round * 37) % 200;
  const pending: Promise<number>[] = [];
  for (let k = 0; k < n; k++) pending.push(log.append(crashPayload(log.nextOffset)));
  const offsets = await Promise.all(pending);
  await out.write(enc.encode(`ack ${offsets[offsets.length - 1]}\n`));
}
