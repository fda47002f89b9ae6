// The bare baseline of many subscribers: Deno.serve + Deno.upgradeWebSocket
// holding the same sockets streamcast holds, fed NDJSON rows on stdin as
// `cli.ts serve --stdin` is. Each socket is greeted with one small JSON frame
// when it opens (streamcast greets every subscriber too); each line of stdin
// becomes one `[offset,row]` text frame, sent to every socket and kept in a
// ring of the last RING frames, so a reconnect with `?offset=N` is first sent
// the frames from N on (the least a broadcaster that honours cursors does).
// Offsets start at 0.
//
// usage: bare_subs_server.ts
//
// Prints "listening on http://127.0.0.1:PORT" on stderr once listening (as
// `cli.ts serve` does), and exits when stdin ends.
const RING = 1024;
const sockets = new Set<WebSocket>();
const ring: string[] = [];
let next = 0;

const server = Deno.serve({
  port: 0,
  hostname: "127.0.0.1",
  onListen: ({ port }) => console.error(`listening on http://127.0.0.1:${port}`),
}, (req) => {
  const from = new URL(req.url).searchParams.get("offset");
  const { socket, response } = Deno.upgradeWebSocket(req);
  socket.onopen = () => {
    socket.send(`{"bare":1,"end_offset":${next}}`);
    if (from !== null) {
      for (let o = Math.max(Number(from), next - ring.length); o < next; o++) {
        socket.send(ring[o % RING]);
      }
    }
    sockets.add(socket);
  };
  socket.onclose = () => sockets.delete(socket);
  socket.onerror = () => sockets.delete(socket);
  return response;
});

const dec = new TextDecoder();
let rest = "";
for await (const chunk of Deno.stdin.readable) {
  const text = rest + dec.decode(chunk, { stream: true });
  const end = text.lastIndexOf("\n");
  if (end === -1) {
    rest = text;
    continue;
  }
  rest = text.slice(end + 1);
  for (const line of text.slice(0, end).split("\n")) {
    if (!line) continue;
    const frame = "[" + next + "," + line + "]";
    ring[next % RING] = frame;
    next++;
    for (const s of sockets) s.send(frame);
  }
}
for (const s of sockets) s.close();
await server.shutdown();
