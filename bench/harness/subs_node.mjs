// The load generator of bench/e2e/subscribers.ts: thousands of WebSocket
// subscribers in one Node process (the `ws` client, resolved from the
// project's node_modules), their sockets spread over source addresses
// 127.0.0.2 … 127.0.0.(1 + ADDRS) so no one address runs out of ephemeral
// ports (each server port is its own 4-tuple space per source address).
//
// usage: node bench/harness/subs_node.mjs   (commands on stdin, one JSON a line;
// each answered with one JSON line on stdout)
//
//   {"cmd":"open","url":U,"n":N,"window":W}
//       opens N subscribers to U, at most W handshakes in flight; a subscriber
//       counts once its first frame (the greeting) arrives. Answers
//       {ms, opened, refused} (refused: errors, or closes before the greeting).
//   {"cmd":"await","rows":R,"timeoutMs":T}
//       waits until every open subscriber has received R rows in all, then
//       answers {ms, lat: [sorted µs…] per row received since the last await
//       (receipt wall clock minus the row's event_ts), missing, dropped}.
//   {"cmd":"drop"}   ends every socket abruptly (a cut network); answers {closed}.
//   {"cmd":"reconnect","url":U,"window":W,"rows":R}
//       reopens every dropped subscriber at its cursor (U + "offset=" the next
//       offset it has not seen) and waits until each has R rows in all;
//       answers {ms, opened, refused}.
//   {"cmd":"stats"}  answers {open, dropped, refused}.
import process from "node:process";
import { createInterface } from "node:readline";
import WebSocket from "ws";

const ADDRS = 200;
const wall = () => performance.timeOrigin + performance.now();
const EVENT_TS = /"event_ts":(\d+)/g;

/** One subscriber: its socket, rows received, the next offset it wants. */
class Sub {
  constructor(k) {
    this.k = k;
    this.ws = null;
    this.rows = 0;
    this.next = 0;
    this.greeted = false;
  }
}

let subs = [];
let lat = [];
let dropped = 0; // closed by the server while we held them
let refused = 0;
let waiter = null; // re-checked on every row
const wake = () => {
  if (waiter) waiter();
};

function onFrame(s, data) {
  const text = data.toString();
  if (!s.greeted) {
    s.greeted = true;
    s.onGreeted?.();
    return;
  }
  const now = wall() * 1000;
  // One or more `[offset,row]` lines (batched frames join them with "\n").
  for (const line of text.split("\n")) {
    const o = Number(line.slice(1, line.indexOf(",")));
    if (o + 1 > s.next) s.next = o + 1;
    s.rows++;
    EVENT_TS.lastIndex = 0;
    const m = EVENT_TS.exec(line);
    if (m) lat.push(now - Number(m[1]));
  }
  wake();
}

/** Opens `s` to `url`; resolves true once greeted, false when refused. */
function connect(s, url) {
  return new Promise((resolve) => {
    let done = false;
    const finish = (ok) => {
      if (done) return;
      done = true;
      resolve(ok);
    };
    s.greeted = false;
    const ws = new WebSocket(url, {
      localAddress: `127.0.0.${2 + (s.k % ADDRS)}`,
      perMessageDeflate: false,
    });
    s.ws = ws;
    s.onGreeted = () => finish(true);
    ws.on("message", (data) => onFrame(s, data));
    ws.on("error", () => finish(false));
    ws.on("close", () => {
      if (!done) return finish(false);
      if (s.ws === ws && !s.cut) {
        dropped++;
        s.ws = null;
        wake();
      }
    });
  });
}

/** Runs `open` over `list` with at most `window` in flight; answers the counts. */
async function openAll(list, url, window) {
  const t0 = performance.now();
  let i = 0;
  let opened = 0;
  let failed = 0;
  const lane = async () => {
    while (i < list.length) {
      const s = list[i++];
      if (await connect(s, url(s))) opened++;
      else {
        failed++;
        s.ws = null;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(window, list.length) }, lane));
  refused += failed;
  return { ms: performance.now() - t0, opened, refused: failed };
}

/** Resolves when every open subscriber has `rows` rows, or after `timeoutMs`. */
function awaitRows(rows, timeoutMs) {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const check = () => {
      let behind = 0;
      for (const s of subs) if (s.ws && s.rows < rows) behind++;
      if (behind === 0 || performance.now() - t0 > timeoutMs) {
        waiter = null;
        clearTimeout(t);
        resolve({ ms: performance.now() - t0, missing: behind });
      }
    };
    const t = setTimeout(check, timeoutMs + 1);
    waiter = check;
    check();
  });
}

const commands = createInterface({ input: process.stdin });
for await (const line of commands) {
  if (!line.trim()) continue;
  const c = JSON.parse(line);
  let out;
  if (c.cmd === "open") {
    subs = Array.from({ length: c.n }, (_, k) => new Sub(k));
    out = await openAll(subs, () => c.url, c.window);
  } else if (c.cmd === "await") {
    const r = await awaitRows(c.rows, c.timeoutMs);
    const l = lat;
    lat = [];
    l.sort((a, b) => a - b);
    out = { ...r, lat: l, dropped };
  } else if (c.cmd === "drop") {
    let closed = 0;
    for (const s of subs) {
      if (!s.ws) continue;
      s.cut = true;
      s.ws.terminate();
      s.ws = null;
      closed++;
    }
    out = { closed };
  } else if (c.cmd === "reconnect") {
    for (const s of subs) s.cut = false;
    const sep = c.url.includes("?") ? "&" : "?";
    const o = await openAll(subs, (s) => `${c.url}${sep}offset=${s.next}`, c.window);
    const r = await awaitRows(c.rows, c.timeoutMs ?? 60_000);
    lat = [];
    out = { ...o, ms: o.ms + r.ms, missing: r.missing };
  } else if (c.cmd === "stats") {
    out = { open: subs.filter((s) => s.ws).length, dropped, refused };
  } else if (c.cmd === "exit") {
    for (const s of subs) s.ws?.terminate();
    process.exit(0);
  }
  console.log(JSON.stringify(out));
}
