// Benchmark server process: serves the stream "trades" from an existing root.
// usage: replay_server.ts ROOT PORT
// Prints READY once listening; answers "mark" on stdin with {t, cpuUs}
// (process.cpuUsage) and shuts down on "stop".
import process from "node:process";
import { serve, Stream } from "../../mod.ts";
import { SCHEMA } from "../../tests/harness/trades.ts";
import { stdinLines } from "./stdin_lines.ts";

const [root, port] = Deno.args;
const stream = await Stream.open("trades", { schema: SCHEMA, root, maxReplay: null });
const server = serve([stream], { port: Number(port), onListen: () => console.log("READY") });
const cpu0 = process.cpuUsage();
for await (const cmd of stdinLines()) {
  if (cmd === "mark") {
    const c = process.cpuUsage(cpu0);
    const t = performance.timeOrigin + performance.now();
    console.log(JSON.stringify({ t, cpuUs: c.user + c.system }));
  } else if (cmd === "stop") {
    await server.shutdown();
    Deno.exit(0);
  }
}
