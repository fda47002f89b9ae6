// A server in a process without --allow-ffi (for compress_dict_test.ts): a
// compress=zstd-dict subscriber's greeting, twice, each printed as one JSON line.
import { serve, Stream } from "../../../mod.ts";

const root = await Deno.makeTempDir({ prefix: "streamcast-test-" });
const schema = {
  type: "object",
  properties: { i: { type: "integer" }, s: { type: "string" } },
  required: ["i", "s"],
};
const s = await Stream.open("t", { schema, root });
await s.sendMany(Array.from({ length: 300 }, (_, i) => ({ i, s: `row ${i}` })));
const server = serve([s], { port: 0, onListen: () => {} });
try {
  for (let k = 0; k < 2; k++) { // two subscribes: the warning comes once
    const ws = new WebSocket(
      `ws://127.0.0.1:${server.addr.port}/t?frames=batch&compress=zstd-dict`,
    );
    const greeting = await new Promise((resolve) => (ws.onmessage = (e) => resolve(e.data)));
    console.log(greeting);
    const closed = new Promise((resolve) => (ws.onclose = resolve));
    ws.close();
    await closed;
  }
} finally {
  await server.shutdown();
  await s.close();
  await Deno.remove(root, { recursive: true });
}
