// The load generator: one process holding every subscriber of a benchmark,
// counting the rows they receive. The same program measures every contender.
//
// usage: fanout_client.ts CONFIG_JSON   (see LoadConfig)
//
// It prints "OPEN" once every socket is open (and every stalled socket has
// done its handshake), "FLOWING" at the first row, "ALL" once every reading
// subscriber has received a row, then answers each "mark" line on stdin with one JSON line
// ({t, rows, cpuUs, lat?}) and exits on "stop". With `until`, it instead exits
// by itself once `until` rows have arrived, printing {rows, ms, cpuUs}.
//
// Rows are counted from the frames: a text frame is `\n`-joined rows (a JSON
// object first frame is streamcast's greeting and counts nothing); a binary
// frame is one Arrow IPC message whose row count is read from its
// RecordBatch header (the first few are decoded in full with
// arrow/subscription.ts's ArrowFrameDecoder to check that count).
import process from "node:process";
import { Message, MessageHeader } from "apache-arrow";
import { ArrowFrameDecoder } from "../../arrow/subscription.ts";
import { stdinLines } from "./stdin_lines.ts";

/** What the load generator does. */
export interface LoadConfig {
  /** ws:// URL every reading subscriber opens. */
  url: string;
  /** URLs to spread the subscribers over instead (subscriber i opens `urls[i % n]`). */
  urls?: string[];
  /** Reading subscribers. */
  subs: number;
  /** Raw sockets that do the handshake and then never read. */
  stalled?: number;
  /** Collect send→receive latency from each row's event_ts (µs, wall clock). */
  latency?: boolean;
  /**
   * With `latency`: at each mark, also write the window's samples (ms, sorted,
   * as raw float64s) to this file, for a caller merging several generators.
   */
  latFile?: string;
  /** Exit once this many rows arrived in all (replay); print {rows, ms, cpuUs}. */
  until?: number;
  /** Wait for a "go" line on stdin before connecting (so it can start with the server). */
  waitGo?: boolean;
  /** Binary frames hold batched text (rows split by newlines), not Arrow (bench/e2e/memory.ts). */
  binaryText?: boolean;
}

const cfg: LoadConfig = JSON.parse(Deno.args[0]);
const cpu0 = process.cpuUsage();
const cpuUs = () => {
  const c = process.cpuUsage(cpu0);
  return c.user + c.system;
};
const wall = () => performance.timeOrigin + performance.now();

let rows = 0;
let flowing = 0;
let firstAt = 0;
let firstCpu = 0;
let lat = new Float64Array(1 << 16);
let latN = 0;
const sockets: WebSocket[] = [];
const perSub = new Float64Array(cfg.subs);
let perSubAtMark = new Float64Array(cfg.subs);
const stalledConns: Deno.Conn[] = [];
let checked = 0;
let checker: ArrowFrameDecoder | null = null;

function finishUntil(): void {
  const ms = performance.now() - firstAt;
  console.log(JSON.stringify({ rows, ms, cpuUs: cpuUs() - firstCpu, rate: rows / (ms / 1000) }));
  Deno.exit(0);
}

function addLatency(now: number, text: string): void {
  // event_ts is the first key of a trade row; read its digits without parsing.
  let at = text.indexOf('"event_ts":');
  while (at !== -1) {
    let v = 0;
    for (let k = at + 11;; k++) {
      const c = text.charCodeAt(k);
      if (c < 48 || c > 57) break;
      v = v * 10 + (c - 48);
    }
    if (latN === lat.length) {
      const bigger = new Float64Array(lat.length * 2);
      bigger.set(lat);
      lat = bigger;
    }
    lat[latN++] = (now - v) / 1000;
    at = text.indexOf('"event_ts":', at + 11);
  }
}

/** Rows in one binary frame (an Arrow IPC message): its RecordBatch length. */
function arrowRows(buf: ArrayBuffer, first: boolean): number {
  const view = new DataView(buf);
  if (buf.byteLength < 8 || view.getInt32(0, true) !== -1) throw new Error("not an IPC message");
  const len = view.getInt32(4, true);
  const msg = Message.decode(new Uint8Array(buf, 8, len));
  if (msg.headerType === MessageHeader.Schema) {
    if (first) {
      checker = new ArrowFrameDecoder();
      checker.push(buf);
    }
    return 0;
  }
  if (msg.headerType !== MessageHeader.RecordBatch) return 0;
  const n = Number((msg.header() as { length: number | bigint }).length);
  if (first && checker && checked < 8) {
    // Check the cheap count against a full decode on the first frames.
    const batch = checker.push(buf)!;
    if (batch.numRows !== n) throw new Error(`header says ${n} rows, decoded ${batch.numRows}`);
    checked++;
  }
  return n;
}

function open(i: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(cfg.urls ? cfg.urls[i % cfg.urls.length] : cfg.url);
    ws.binaryType = "arraybuffer";
    sockets.push(ws);
    let got = false;
    ws.onopen = () => resolve();
    ws.onmessage = (e) => {
      const d = e.data;
      let n: number;
      if (typeof d === "string") {
        if (d.charCodeAt(0) === 123) return; // the greeting
        n = 1;
        for (let k = d.indexOf("\n"); k !== -1; k = d.indexOf("\n", k + 1)) n++;
        if (cfg.latency) addLatency(wall() * 1000, d);
      } else if (cfg.binaryText) {
        const b = new Uint8Array(d as ArrayBuffer);
        if (b[0] === 123) return; // the greeting
        n = 1;
        for (let k = b.indexOf(10); k !== -1; k = b.indexOf(10, k + 1)) n++;
      } else {
        n = arrowRows(d as ArrayBuffer, i === 0);
        if (n === 0) return;
      }
      if (rows === 0) {
        firstAt = performance.now();
        firstCpu = cpuUs();
      }
      if (rows === 0) console.log("FLOWING");
      rows += n;
      perSub[i] += n;
      if (!got) {
        got = true;
        if (++flowing === cfg.subs) console.log("ALL");
      }
      if (cfg.until && rows >= cfg.until) finishUntil();
    };
    ws.onerror = (e) => reject(new Error(`subscriber ${i}: ${(e as ErrorEvent).message}`));
    ws.onclose = (e) => {
      if (e.code !== 1000 && e.code !== 1005 && e.code !== 1006) {
        console.error(`subscriber ${i} closed: ${e.code} ${e.reason}`);
      }
    };
  });
}

/** A subscriber that does the handshake and then never reads (tests/harness/raw_ws.ts style). */
async function stall(url: URL): Promise<void> {
  const conn = await Deno.connect({ hostname: url.hostname, port: Number(url.port) });
  stalledConns.push(conn);
  const req = `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n` +
    `Upgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
  await conn.write(new TextEncoder().encode(req));
  // Read just the response head (the greeting may follow; it stays unread).
  const buf = new Uint8Array(1024);
  const n = await conn.read(buf);
  const head = new TextDecoder().decode(buf.subarray(0, n ?? 0));
  if (!head.startsWith("HTTP/1.1 101")) throw new Error(`stalled handshake: ${head}`);
}

let go: () => void = () => {};
const started = new Promise<void>((r) => (go = r));
if (!cfg.until) void commands();
if (cfg.waitGo) await started;

// Open in waves, so a thousand handshakes do not all land at once.
for (let i = 0; i < cfg.subs; i += 50) {
  const wave = [];
  for (let k = i; k < Math.min(cfg.subs, i + 50); k++) wave.push(open(k));
  await Promise.all(wave);
}
const stalledUrl = new URL(cfg.url.replace(/^ws/, "http"));
for (let i = 0; i < (cfg.stalled ?? 0); i += 50) {
  const wave = [];
  for (let k = i; k < Math.min(cfg.stalled!, i + 50); k++) wave.push(stall(stalledUrl));
  await Promise.all(wave);
}
console.log("OPEN");

function percentile(xs: Float64Array, p: number): number | null {
  if (xs.length === 0) return null;
  return xs[Math.min(xs.length - 1, Math.floor(xs.length * p))];
}

async function commands(): Promise<void> {
  for await (const cmd of stdinLines()) {
    if (cmd === "go") go();
    else if (cmd === "mark") {
      const out: Record<string, unknown> = { t: wall(), rows, cpuUs: cpuUs() };
      // Fairness: how the rows since the last mark spread over subscribers.
      const d = perSub.map((x, k) => x - perSubAtMark[k]).sort();
      out.perSub = { min: d[0], median: d[d.length >> 1], max: d[d.length - 1] };
      perSubAtMark = perSub.slice();
      if (cfg.latency) {
        const xs = lat.slice(0, latN).sort();
        if (cfg.latFile) Deno.writeFileSync(cfg.latFile, new Uint8Array(xs.buffer));
        out.lat = {
          n: latN,
          p50: percentile(xs, 0.5),
          p99: percentile(xs, 0.99),
          p999: percentile(xs, 0.999),
          p9999: percentile(xs, 0.9999),
          max: percentile(xs, 1),
        };
        latN = 0;
      }
      console.log(JSON.stringify(out));
    } else if (cmd === "stop") {
      for (const s of sockets) s.close();
      for (const c of stalledConns) c.close();
      Deno.exit(0);
    }
  }
  Deno.exit(0);
}
