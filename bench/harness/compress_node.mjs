// The permessage-deflate contender of bench/e2e/compress.ts: a Node `ws` server
// with perMessageDeflate on (threshold 0: every message compressed, context
// kept per connection, ws's zlib defaults otherwise), sending the same frames
// as streamcast's batched ones: `[offset,row]` lines joined with `\n`.
//
// usage: node bench/harness/compress_node.mjs CONFIG_JSON   (the config of compress_server.ts)
//
// Replay: each subscriber is sent the `prefill` rows at once, in frames of at
// most 256 KiB (streamcast's catch-up slice). Live: after `subs` subscribers,
// `rate` rows/s in frames of `tick` rows, each sent to every subscriber.
import process from "node:process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { WebSocketServer } from "ws";

const cfg = JSON.parse(process.argv[2]);
const cpu0 = process.cpuUsage();
const wall = () => performance.timeOrigin + performance.now();
const rows = readFileSync(cfg.rows, "utf8").trim().split("\n");
const line = (i) => "[" + (i + 1) + "," + rows[i % rows.length] + "]";
let published = 0;
let stopping = false;

const replay = [];
for (let i = 0, cur = [], size = 0; i < cfg.prefill; i++) {
  const l = line(i);
  cur.push(l);
  size += l.length + 1;
  if (size >= 256 * 1024 || cur.length === 4096 || i === cfg.prefill - 1) {
    replay.push(cur.join("\n"));
    cur = [];
    size = 0;
  }
}

const sockets = new Set();
const wss = new WebSocketServer({
  host: "127.0.0.1",
  port: cfg.port,
  perMessageDeflate: { threshold: 0 },
});
wss.on("listening", () => console.log("READY"));
wss.on("connection", (ws) => {
  sockets.add(ws);
  ws.on("close", () => sockets.delete(ws));
  ws.on("error", () => sockets.delete(ws));
  for (const f of replay) ws.send(f);
});
createInterface({ input: process.stdin }).on("line", (l) => {
  const cmd = l.trim();
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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
while (sockets.size < cfg.subs) await sleep(5);
if (cfg.rate > 0) {
  const list = [...sockets];
  const t0 = performance.now();
  let i = cfg.prefill;
  while (!stopping) {
    const due = cfg.prefill + Math.floor((performance.now() - t0) * cfg.rate / 1000);
    while (i + cfg.tick <= due) {
      const f = Array.from({ length: cfg.tick }, (_, k) => line(i + k)).join("\n");
      for (const ws of list) ws.send(f);
      i += cfg.tick;
    }
    published = i - cfg.prefill;
    const wait = t0 + (i + cfg.tick - cfg.prefill) * 1000 / cfg.rate - performance.now();
    await sleep(Math.max(0, wait));
  }
}
