// The bare baseline of the tickerplant path: Deno.serve + Deno.upgradeWebSocket,
// no log, fed NDJSON rows on stdin as `cli.ts serve --stdin` is. Each read of
// stdin becomes one text frame of its whole lines as `[n,row]` lines joined by
// "\n" (the shape of streamcast's batched frames), sent to every socket.
//
// usage: bare_feed_server.ts
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
  let frame = "";
  for (const line of text.slice(0, end).split("\n")) {
    if (line) frame += (frame ? "\n[" : "[") + ++n + "," + line + "]";
  }
  if (frame) { for (const s of sockets) s.send(frame); }
}
for (const s of sockets) s.close();
await server.shutdown();
