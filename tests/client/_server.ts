// A server process for the too-slow tests: one ephemeral stream "trades" with a
// tiny maxBacklog, published to as fast as it goes while anyone subscribes.
// Prints {"port":N} on stdout once listening; stops when stdin closes.
//
// usage: deno run -A tests/client/_server.ts MAX_BACKLOG
import { serve, Stream } from "../../mod.ts";
import { row, SCHEMA } from "../harness/client_server.ts";

const stream = await Stream.open("trades", { schema: SCHEMA, maxBacklog: Number(Deno.args[0]) });
const server = serve([stream], { port: 0, onListen: () => {} });
console.log(JSON.stringify({ port: server.addr.port }));
let stop = false;
const stdinDone = (async () => {
  for await (const _ of Deno.stdin.readable) {
    // Nothing is sent on stdin; its end is the signal to stop.
  }
  stop = true;
})();
let i = 1;
while (!stop) {
  if (stream.subscribers > 0) {
    const rows = [];
    for (let k = 0; k < 500; k++) rows.push(row(i++));
    await stream.sendMany(rows);
  }
  await new Promise((r) => setTimeout(r, stream.subscribers > 0 ? 0 : 5));
}
await stdinDone;
await server.shutdown();
