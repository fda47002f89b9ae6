// Benchmark load generator: opens SUBS subscriptions, counts rows until each has
// ROWS, prints one JSON line with the delivered rate (and latency percentiles).
// usage: _fanout_client.ts URL SUBS ROWS [latency]
import process from "node:process";
const [url, subsS, rowsS, latencyMode] = Deno.args;
const subs = Number(subsS);
const rows = Number(rowsS);
const latency = latencyMode === "latency";
let done = 0;
let first = 0;
let last = 0;
let total = 0;
const lat: number[] = [];
const sockets: WebSocket[] = [];
const cpu0 = process.cpuUsage();
await new Promise<void>((resolveAll) => {
  for (let i = 0; i < subs; i++) {
    const ws = new WebSocket(url);
    sockets.push(ws);
    let got = 0;
    let greeted = url.includes("/trades") ? false : true;
    ws.onmessage = (e) => {
      const data = e.data as string;
      if (!greeted) {
        greeted = true;
        return;
      }
      if (first === 0) first = performance.now();
      let n = 1;
      for (let k = data.indexOf("\n"); k !== -1; k = data.indexOf("\n", k + 1)) n++;
      if (latency) {
        const now = (performance.timeOrigin + performance.now()) * 1000;
        for (const line of data.split("\n")) {
          const ts = Number(
            line.slice(
              line.indexOf('"event_ts":') + 11,
              line.indexOf(",", line.indexOf('"event_ts":')),
            ),
          );
          lat.push((now - ts) / 1000);
        }
      }
      got += n;
      total += n;
      if (got >= rows) {
        last = performance.now();
        ws.close();
        if (++done === subs) resolveAll();
      }
    };
    ws.onerror = (e) => console.error("client error", (e as ErrorEvent).message);
  }
});
const ru = process.cpuUsage(cpu0);
const cpuMs = (ru.user + ru.system) / 1000;
lat.sort((a, b) => a - b);
const pct = (p: number) =>
  lat.length ? lat[Math.min(lat.length - 1, Math.floor(lat.length * p))] : null;
console.log(
  JSON.stringify({
    rate: total / ((last - first) / 1000),
    total,
    ms: last - first,
    cpuMs,
    p50: pct(0.5),
    p99: pct(0.99),
    max: pct(1),
  }),
);
