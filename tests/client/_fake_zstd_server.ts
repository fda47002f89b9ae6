// A fake server for the client's compressed-frame tests: `onSocket` for each
// subscribe (after the upgrade), `dictionary` for GET /x/dictionaries/ID
// (404 when not given); stopped with `stop()`.

/** The greeting of a server that agreed to compress=zstd. */
export const ZSTD_GREETING = {
  streamcast: 2,
  stream: "x",
  stream_id: null,
  end_offset: null,
  replay: null,
  log: null,
  durable: false,
  schema: {},
  frames: "batch",
  compress: "zstd",
};

/** Starts the fake server on a free port of 127.0.0.1. */
export function fakeServer(
  onSocket: (ws: WebSocket, url: URL) => void,
  dictionary: (id: string) => Response = () => new Response("no", { status: 404 }),
): { url: string; stop(): Promise<void> } {
  const ac = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    (req) => {
      const u = new URL(req.url);
      const m = /^\/x\/dictionaries\/(.*)$/.exec(u.pathname);
      if (m) return dictionary(m[1]);
      const { socket, response } = Deno.upgradeWebSocket(req);
      socket.onopen = () => onSocket(socket, u);
      socket.onerror = () => {};
      return response;
    },
  );
  return {
    url: `ws://127.0.0.1:${server.addr.port}/x`,
    async stop() {
      ac.abort();
      await server.finished;
    },
  };
}
