// The floor of a WebSocket round trip: Deno.serve + Deno.upgradeWebSocket,
// each message sent back as it is.
//
// usage: echo_server.ts
//
// Prints "listening on http://127.0.0.1:PORT" on stderr once listening (as
// `cli.ts serve` does), and exits when stdin ends.
const server = Deno.serve({
  port: 0,
  hostname: "127.0.0.1",
  onListen: ({ port }) => console.error(`listening on http://127.0.0.1:${port}`),
}, (req) => {
  const { socket, response } = Deno.upgradeWebSocket(req);
  socket.onmessage = (e) => socket.send(e.data);
  return response;
});
for await (const _ of Deno.stdin.readable) {
  // Nothing is read from stdin but its end.
}
await server.shutdown();
