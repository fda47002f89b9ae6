// Benchmark server process: serves the stream "trades" from an existing root.
// usage: _replay_server.ts ROOT PORT
import process from "node:process";
import { serve, Stream } from "../mod.ts";
import { SCHEMA } from "./_trades.ts";

const [root, port] = Deno.args;
const stream = await Stream.open("trades", { schema: SCHEMA, root, maxReplay: null });
const server = serve([stream], { port: Number(port), onListen: () => console.log("READY") });
const cpu0 = process.cpuUsage();
Deno.addSignalListener("SIGTERM", async () => {
  const ru = process.cpuUsage(cpu0);
  console.log(JSON.stringify({ cpuMs: (ru.user + ru.system) / 1000 }));
  await server.shutdown();
  Deno.exit(0);
});
