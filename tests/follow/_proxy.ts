// A proxy on 127.0.0.1 in front of a primary, for the follower tests: it
// relays HTTP and WebSocket, can damage chunks, hold back the live frames,
// and answer chosen HTTP paths itself (a primary whose history fails).
export interface Proxy {
  url: string;
  corrupted: Set<string>;
  /** Every HTTP path asked for. */
  paths: string[];
  hold(on: boolean): void;
  /** While set, HTTP requests it answers (non-null) get that answer instead of the target's. */
  answer: ((path: string) => Response | null) | null;
  close(): Promise<void>;
}

// Forwards HTTP and WebSocket to `target` (`http://HOST:PORT`); the first copy
// of each chunk it passes has one byte flipped; `hold(true)` holds back the
// frames relayed to WebSocket clients until `hold(false)`.
export function startProxy(target: string, corrupt = true): Proxy {
  const corrupted = new Set<string>();
  const paths: string[] = [];
  let held = false;
  const waiting: (() => void)[] = [];
  const ac = new AbortController();
  const sockets = new Set<WebSocket>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    async (req) => {
      const u = new URL(req.url);
      if (req.headers.get("upgrade") === "websocket") {
        const { socket, response } = Deno.upgradeWebSocket(req);
        const up = new WebSocket(`${target.replace("http", "ws")}${u.pathname}${u.search}`);
        sockets.add(socket).add(up);
        up.onmessage = (e) => {
          const send = () => socket.readyState === WebSocket.OPEN && socket.send(e.data);
          if (held) waiting.push(send);
          else send();
        };
        up.onclose = (e) => {
          const go = () => {
            if (socket.readyState !== WebSocket.OPEN) return;
            socket.close(e.code >= 3000 || e.code === 1000 ? e.code : 1001, e.reason);
          };
          if (held) waiting.push(go);
          else go();
        };
        up.onerror = () => {};
        socket.onclose = () => up.close();
        socket.onerror = () => {};
        return response;
      }
      paths.push(u.pathname);
      const own = p.answer?.(u.pathname) ?? null;
      if (own !== null) return own;
      const res = await fetch(`${target}${u.pathname}${u.search}`, { headers: req.headers });
      const sha = /\/chunks\/([0-9a-f]{64})$/.exec(u.pathname)?.[1];
      if (corrupt && sha && res.ok && !corrupted.has(sha)) {
        corrupted.add(sha);
        const bytes = await res.bytes();
        bytes[bytes.length >> 1] ^= 0x40;
        return new Response(bytes, { status: 200, headers: res.headers });
      }
      return new Response(res.body, { status: res.status, headers: res.headers });
    },
  );
  const p: Proxy = {
    answer: null,
    url: `http://127.0.0.1:${server.addr.port}`,
    corrupted,
    paths,
    hold(on) {
      held = on;
      if (!on) { for (const f of waiting.splice(0)) f(); }
    },
    async close() {
      for (const s of sockets) s.close();
      ac.abort();
      await server.finished;
    },
  };
  return p;
}
