// The Node contender: a `ws` broadcast server under Node (run with `node`,
// resolving `ws` from the project's node_modules, where `deno install` puts
// the version pinned in deno.json). Same protocol as bench/harness/fanout_server.ts
// (mode "bare"): prints READY, waits for `subs` subscribers, publishes trade
// rows (one JSON.stringify per row, one `send` per subscriber) flat out or at
// `rate` rows/s until "stop" on stdin; answers "mark" with {t, cpuUs, rows}.
//
// usage: node bench/harness/fanout_node.mjs CONFIG_JSON
import process from "node:process";
import { createInterface } from "node:readline";
import { WebSocketServer } from "ws";

const cfg = JSON.parse(process.argv[2]);
const cpu0 = process.cpuUsage();
const wall = () => performance.timeOrigin + performance.now();
const HIGH_WATER = 1 << 20;
let stopping = false;
let published = 0;

// The same rows as tradeRows/liveTradeRows in tests/harness/trades.ts (bench/e2e/fanout.ts
// checks that both make identical rows before it runs).
const SYMBOLS = ["BTC-USD", "ETH-USD", "SOL-USD", "XRP-USD"];
export function tradeRows(seed = 1) {
  let s = seed >>> 0;
  const rand = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
  const prices = [85565, 3120.5, 142.3, 0.61];
  const t0 = 1790038800000000;
  return (i) => {
    const k = Math.floor(rand() * SYMBOLS.length);
    prices[k] = Math.max(0.01, prices[k] * (1 + (rand() - 0.5) * 0.001));
    return {
      event_ts: t0 + i * 1000 + Math.floor(rand() * 1000),
      symbol: SYMBOLS[k],
      price: Math.round(prices[k] * 100) / 100,
      amount: Math.round(rand() * 2_000_000) / 1_000_000,
      side: rand() < 0.5 ? 0 : 1,
      trade_id: 100_000_000 + i,
    };
  };
}

function liveTradeRows(seed = 1) {
  const make = tradeRows(seed);
  return (i) => {
    const row = make(i);
    row.event_ts = Math.round(wall() * 1000);
    return row;
  };
}

if (cfg.print) {
  // `node fanout_node.mjs '{"print":N}'`: the first N rows, for the check.
  const make = tradeRows(1);
  for (let i = 0; i < cfg.print; i++) console.log(JSON.stringify(make(i)));
  process.exit(0);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const yieldNow = () => new Promise((r) => setImmediate(r));

const sockets = new Set();
const wss = new WebSocketServer({ host: "127.0.0.1", port: cfg.port, perMessageDeflate: false });
wss.on("listening", () => console.log("READY"));
wss.on("connection", (ws) => {
  sockets.add(ws);
  ws.on("close", () => sockets.delete(ws));
  ws.on("error", () => sockets.delete(ws));
});

createInterface({ input: process.stdin }).on("line", (line) => {
  const cmd = line.trim();
  if (cmd === "mark") {
    const c = process.cpuUsage(cpu0);
    console.log(JSON.stringify({ t: wall(), cpuUs: c.user + c.system, rows: published }));
  } else if (cmd === "stop") {
    stopping = true;
    for (const ws of sockets) ws.terminate();
    wss.close();
    process.exit(0);
  }
});

while (sockets.size < cfg.subs) await sleep(5);
const make = liveTradeRows(1);
const frame = (i) => "[" + (i + 1) + "," + JSON.stringify(make(i)) + "]";
const list = [...sockets];
if (cfg.rate > 0) {
  // On each timer tick, the rows due by now (one, unless the tick came late).
  const t0 = performance.now();
  let i = 0;
  while (!stopping) {
    const due = Math.floor((performance.now() - t0) * cfg.rate / 1000);
    for (; i < due; i++) {
      const f = frame(i);
      for (const ws of list) ws.send(f);
    }
    published = i;
    const wait = t0 + (i + 1) * 1000 / cfg.rate - performance.now();
    // Always yield, so stdin is read even when sending falls behind the pace.
    await (wait > 0 ? sleep(wait) : yieldNow());
  }
} else {
  const perRound = cfg.round ?? Math.max(1, Math.ceil(4096 / cfg.subs));
  let i = 0;
  while (!stopping) {
    for (let b = 0; b < perRound; b++, i++) {
      const f = frame(i);
      for (const ws of list) ws.send(f);
    }
    published += perRound;
    while (!stopping && list.some((ws) => ws.bufferedAmount > HIGH_WATER)) await sleep(1);
    await yieldNow();
  }
}
