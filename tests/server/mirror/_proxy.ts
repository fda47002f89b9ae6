// A proxy on 127.0.0.1 in front of a primary, for the mirror tests: it
// relays HTTP and WebSocket, can damage chunks, hold back the live frames,
// answer chosen HTTP paths itself (a primary whose history fails, hangs or
// lies), relay chosen bodies slowly (a modest bandwidth), and cut or refuse
// the WebSocket relay.
export interface Proxy {
  url: string;
  corrupted: Set<string>;
  /** Every HTTP path asked for. */
  paths: string[];
  hold(on: boolean): void;
  /** While set, HTTP requests it answers (non-null) get that answer instead of the target's. */
  answer: ((path: string) => Response | Promise<Response> | null) | null;
  /** While set, relayed bodies of the paths it paces go `bytes` at a time, one piece every `everyMs`. */
  pace: ((path: string) => { bytes: number; everyMs: number } | null) | null;
  /** While true, WebSocket upgrades are answered 503. */
  refuseUpgrades: boolean;
  /** Closes every relayed WebSocket, both ways. */
  dropSockets(): void;
  close(): Promise<void>;
}

/** `body` relayed `bytes` at a time, one piece every `everyMs`. */
function paced(
  body: ReadableStream<Uint8Array>,
  bytes: number,
  everyMs: number,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let left: Uint8Array = new Uint8Array(0);
  return new ReadableStream({
    async pull(c) {
      await new Promise((r) => setTimeout(r, everyMs));
      while (left.length === 0) {
        const { done, value } = await reader.read();
        if (done) return c.close();
        left = value;
      }
      c.enqueue(left.slice(0, bytes));
      left = left.subarray(Math.min(bytes, left.length));
    },
    cancel: (reason) => reader.cancel(reason),
  });
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
        if (p.refuseUpgrades) return new Response("refused", { status: 503 });
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
      const pace = res.body ? p.pace?.(u.pathname) : null;
      const body = pace ? paced(res.body!, pace.bytes, pace.everyMs) : res.body;
      return new Response(body, { status: res.status, headers: res.headers });
    },
  );
  const p: Proxy = {
    answer: null,
    pace: null,
    refuseUpgrades: false,
    dropSockets() {
      for (const s of sockets) s.close();
      sockets.clear();
    },
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
