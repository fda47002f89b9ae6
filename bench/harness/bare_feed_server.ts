// The bare baseline of the tickerplant path: Deno.serve + Deno.upgradeWebSocket,
// no log, fed NDJSON rows on stdin as `cli.ts serve --stdin` is. Each read of
// stdin becomes one text frame of its whole lines as `[n,row]` lines joined by
// "\n" (the shape of streamcast's batched frames), sent to every socket.
//
// usage: bare_feed_server.ts [--fsync]
//
// With --fsync, each read is first appended to a file in a fresh temporary
// folder and synced (fdatasync) before it is sent: the least a durable
// broadcaster does, and the floor of streamcast's path with fsync on.
//
// Prints "listening on http://127.0.0.1:PORT" on stderr once listening (as
// `cli.ts serve` does), and exits when stdin ends.
const sockets: WebSocket[] = [];
const server = Deno.serve({
  port: 0,
  hostname: "127.0.0.1",
  onListen: ({ port }) => console.error(`listening on http://127.0.0.1:${port}`),
}, (req) => {
  const { socket, response } = Deno.upgradeWebSocket(req);
  socket.onopen = () => sockets.push(socket);
  socket.onclose = () => {
    const k = sockets.indexOf(socket);
    if (k >= 0) sockets.splice(k, 1);
  };
  return response;
});

const fsync = Deno.args.includes("--fsync");
const dir = fsync ? await Deno.makeTempDir({ prefix: "streamcast-bench-bare-" }) : "";
const file = fsync ? await Deno.open(`${dir}/log`, { write: true, create: true }) : null;
// The benchmark stops a server with SIGINT: its folder goes with it.
Deno.addSignalListener("SIGINT", () => {
  if (dir) Deno.removeSync(dir, { recursive: true });
  Deno.exit(0);
});
const dec = new TextDecoder();
let rest = "";
let n = 0;
for await (const chunk of Deno.stdin.readable) {
  const text = rest + dec.decode(chunk, { stream: true });
  const end = text.lastIndexOf("\n");
  if (end === -1) {
    rest = text;
    continue;
  }
  rest = text.slice(end + 1);
  if (file !== null) {
    for (let o = 0; o < chunk.length;) o += file.writeSync(chunk.subarray(o));
    await file.syncData();
  }
  let frame = "";
  for (const line of text.slice(0, end).split("\n")) {
    if (line) frame += (frame ? "\n[" : "[") + ++n + "," + line + "]";
  }
  if (frame) { for (const s of sockets) s.send(frame); }
}
for (const s of sockets) s.close();
await server.shutdown();
file?.close();
if (dir) await Deno.remove(dir, { recursive: true });
