// Benchmark server process: waits for N subscribers, then publishes ROWS rows.
// usage: _fanout_server.ts MODE PORT SUBS ROWS [RATE]
//   MODE: streamcast | bare (a bare Deno.upgradeWebSocket broadcast server, no log)
//   RATE: rows/s, paced (for latency); 0 or absent: as fast as it goes.
import process from "node:process";
import { serve, Stream } from "../mod.ts";
import { setImmediate } from "node:timers";

const [mode, portS, subsS, rowsS, rateS] = Deno.args;
const port = Number(portS);
const subs = Number(subsS);
const rows = Number(rowsS);
const rate = Number(rateS ?? 0);

export const SCHEMA = {
  type: "object",
  properties: {
    event_ts: { type: "integer" },
    symbol: { type: "string" },
    price: { type: "number" },
    amount: { type: "number" },
    side: { type: "integer", format: "int32" },
    trade_id: { type: "integer" },
  },
  required: ["event_ts", "symbol", "price", "amount", "side", "trade_id"],
};

function row(i: number) {
  return {
    event_ts: Math.round((performance.timeOrigin + performance.now()) * 1000),
    symbol: "BTC-USD",
    price: 85565 + (i % 100) / 4,
    amount: 0.015,
    side: i & 1,
    trade_id: 1_000_000 + i,
  };
}

const cpu0 = process.cpuUsage();
const ready = () => console.log("READY");
function report(extra: Record<string, unknown>) {
  const ru = process.cpuUsage(cpu0);
  const cpuMs = (ru.user + ru.system) / 1000;
  console.log(JSON.stringify({ cpuMs, rssMB: Deno.memoryUsage().rss / 1e6, ...extra }));
}

if (mode === "bare") {
  // The platform's ceiling: Deno.upgradeWebSocket broadcast, no log, one encode per row.
  const sockets: WebSocket[] = [];
  const ac = new AbortController();
  const server = Deno.serve(
    { port, hostname: "127.0.0.1", signal: ac.signal, onListen: ready },
    (req) => {
      const { socket, response } = Deno.upgradeWebSocket(req);
      socket.onopen = () => sockets.push(socket);
      return response;
    },
  );
  while (sockets.length < subs) await new Promise((r) => setTimeout(r, 5));
  const t0 = performance.now();
  const interval = rate > 0 ? 1000 / rate : 0;
  let next = performance.now();
  for (let i = 0; i < rows; i++) {
    if (interval) {
      next += interval;
      const wait = next - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    const frame = "[" + (i + 1) + "," + JSON.stringify(row(i)) + "]";
    for (const s of sockets) s.send(frame);
    if ((i & 255) === 255) await new Promise((r) => setImmediate(r));
  }
  report({ publishMs: performance.now() - t0 });
  // Wait until the client says it is done (it closes its sockets).
  while (sockets.some((s) => s.readyState === WebSocket.OPEN)) {
    await new Promise((r) => setTimeout(r, 20));
  }
  ac.abort();
  await server.finished;
} else {
  const root = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
  const stream = await Stream.open("trades", {
    schema: SCHEMA,
    root,
    maxReplay: null,
    maxBacklog: 1 << 20,
  });
  const server = serve([stream], { port, onListen: ready, pingIntervalS: 0 });
  while (stream.subscribers < subs) await new Promise((r) => setTimeout(r, 5));
  const t0 = performance.now();
  if (rate > 0) {
    const interval = 1000 / rate;
    let next = performance.now();
    for (let i = 0; i < rows; i++) {
      next += interval;
      const wait = next - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      void stream.send(row(i));
    }
  } else {
    // As fast as it goes, keeping 4096 sends in flight (group commit does the rest).
    const inflight: Promise<unknown>[] = [];
    for (let i = 0; i < rows; i++) {
      inflight.push(stream.send(row(i)));
      if (inflight.length >= 4096) {
        await Promise.all(inflight);
        inflight.length = 0;
      }
    }
    await Promise.all(inflight);
  }
  report({ publishMs: performance.now() - t0 });
  while (stream.subscribers > 0) await new Promise((r) => setTimeout(r, 20));
  await server.shutdown();
  await Deno.remove(root, { recursive: true });
}
