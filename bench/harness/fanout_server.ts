// A fan-out contender's server process (the Deno ones; bench/harness/fanout_node.mjs
// is the Node `ws` one and speaks the same protocol).
//
// usage: fanout_server.ts CONFIG_JSON   (see ServerConfig)
//
// Prints "READY" once listening, waits for `subs` subscribers, then publishes
// trade rows (flat out, or at `rate` rows/s) until "stop" arrives on stdin.
// Each "mark" line on stdin is answered with one JSON line {t, cpuUs, rows}:
// the wall clock, this process's CPU time (process.cpuUsage) and the rows
// published so far; each "memory" line with {heapUsed, external, rss} (bytes,
// Deno.memoryUsage()).
import process from "node:process";
import { setImmediate } from "node:timers";
import { serve, Stream } from "../../mod.ts";
import { liveTradeRows, SCHEMA, tradeRows } from "../../tests/harness/trades.ts";
import { pinMmapThreshold } from "../../server/allocator.ts";
import { stdinLines } from "./stdin_lines.ts";

/** What a contender's server does. */
export interface ServerConfig {
  /**
   * - `bare`: Deno.serve + Deno.upgradeWebSocket, one JSON.stringify per row
   *   and one `send` per subscriber, no log;
   * - `streamcast`: a durable stream (fsync on) served by `serve()`; the
   *   subscriber's URL picks the frame mode;
   * - `raw`: the ceiling: hand-made handshakes over Deno.listen, then one
   *   prebuilt buffer of `framesPerWrite` WebSocket frames (each of
   *   `rowsPerFrame` rows) written to every socket, again and again.
   */
  mode: "bare" | "streamcast" | "raw";
  /** Port to listen on (127.0.0.1). */
  port: number;
  /** Subscribers to wait for before publishing. */
  subs: number;
  /** Rows/s (one at a time, paced by timers); 0: flat out. */
  rate: number;
  /** streamcast, flat out: rows appended per group; two groups in flight. */
  inflight?: number;
  /** bare, flat out: rows per round (each sent to every subscriber) between yields. */
  round?: number;
  /** raw: rows per WebSocket frame. */
  rowsPerFrame?: number;
  /** raw: frames per write. */
  framesPerWrite?: number;
  /**
   * raw: each connection writes the shared buffer in a loop of its own (a
   * stalled one then waits alone), instead of every connection once per round.
   */
  independent?: boolean;
  /**
   * streamcast: the server's ways of sending live frames that a variant
   * changes (its defaults otherwise).
   */
  live?: {
    /** Vectored socket writes (server/vectored_writes.ts): false sets `DENO_USE_WRITEV` empty. @default true */
    writev?: boolean;
    /**
     * Data frames sent as binary: each batched text encoded once (the last
     * one cached, so every socket is handed the same Uint8Array), to see
     * whether Deno copies bytes per socket as it copies strings.
     */
    binary?: boolean;
    sendBufferBytes?: number;
    /** `ServeOptions.fanoutTurnBytes` (0: one synchronous pass). @default the server's */
    turnBytes?: number;
    maxBacklog?: number;
    /** Pin glibc's mmap threshold as `cli.ts serve` does (server/allocator.ts). @default true */
    pinMalloc?: boolean;
  };
}

const cfg: ServerConfig = JSON.parse(Deno.args[0]);
const cpu0 = process.cpuUsage();
const wall = () => performance.timeOrigin + performance.now();
const HIGH_WATER = 1 << 20;
let stopping = false;
let published = 0;
let onStop: () => Promise<void> = () => Promise.resolve();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const yieldNow = () => new Promise((r) => setImmediate(r));

async function commands(): Promise<void> {
  for await (const cmd of stdinLines()) {
    if (cmd === "mark") {
      const c = process.cpuUsage(cpu0);
      console.log(JSON.stringify({ t: wall(), cpuUs: c.user + c.system, rows: published }));
    } else if (cmd === "memory") {
      const m = Deno.memoryUsage();
      // With --v8-flags=--expose-gc: the heap still used after a full collection.
      const gc = (globalThis as { gc?: () => void }).gc;
      gc?.();
      const live = gc ? Deno.memoryUsage().heapUsed : NaN;
      // streamcast: what the sockets hold unsent, and the subscribers by state (/_/metrics).
      const text = cfg.mode === "streamcast"
        ? await fetch(`http://127.0.0.1:${cfg.port}/_/metrics`).then((r) => r.text()).catch(() =>
          ""
        )
        : "";
      const buffered = Number(/^streamcast_send_buffered_bytes\S* (\S+)/m.exec(text)?.[1] ?? NaN);
      const states = [
        ...text.matchAll(/^streamcast_subscribers\{[^}]*state="(\w+)"[^}]*\} (\S+)/gm),
      ]
        .map((x) => `${x[1]}=${x[2]}`).join(" ");
      console.log(
        JSON.stringify({
          heapUsed: m.heapUsed,
          external: m.external,
          rss: m.rss,
          buffered,
          states,
          live,
        }),
      );
    } else if (cmd === "stop") {
      stopping = true;
      await onStop();
      Deno.exit(0);
    }
  }
}

/**
 * Publishes `rate` rows/s, calling `one(i)` for each, until stopping: on each
 * timer tick, the rows due by now (one, unless the tick came late).
 */
async function paced(one: (i: number) => void): Promise<void> {
  const t0 = performance.now();
  let i = 0;
  while (!stopping) {
    const due = Math.floor((performance.now() - t0) * cfg.rate / 1000);
    for (; i < due; i++) one(i);
    published = i;
    const wait = t0 + (i + 1) * 1000 / cfg.rate - performance.now();
    // Always yield, so stdin is read even when sending falls behind the pace.
    await (wait > 0 ? sleep(wait) : yieldNow());
  }
}

async function bare(): Promise<void> {
  const sockets: WebSocket[] = [];
  const server = Deno.serve(
    { port: cfg.port, hostname: "127.0.0.1", onListen: () => console.log("READY") },
    (req) => {
      const { socket, response } = Deno.upgradeWebSocket(req);
      socket.onopen = () => sockets.push(socket);
      socket.onclose = () => {
        const k = sockets.indexOf(socket);
        if (k >= 0) sockets.splice(k, 1);
      };
      return response;
    },
  );
  onStop = async () => {
    for (const s of sockets) s.close();
    await server.shutdown();
  };
  while (sockets.length < cfg.subs) await sleep(5);
  const make = liveTradeRows(1);
  const frame = (i: number) => "[" + (i + 1) + "," + JSON.stringify(make(i)) + "]";
  if (cfg.rate > 0) {
    return await paced((i) => {
      const f = frame(i);
      for (const s of sockets) s.send(f);
    });
  }
  // Flat out: rounds of ~4096 sends, waiting while any socket holds more than
  // HIGH_WATER bytes (the same mark streamcast uses).
  const perRound = cfg.round ?? Math.max(1, Math.ceil(4096 / cfg.subs));
  let i = 0;
  while (!stopping) {
    for (let b = 0; b < perRound; b++, i++) {
      const f = frame(i);
      for (const s of sockets) s.send(f);
    }
    published += perRound;
    while (!stopping && sockets.some((s) => s.bufferedAmount > HIGH_WATER)) await sleep(1);
    await yieldNow();
  }
}

async function streamcast(): Promise<void> {
  if (cfg.live?.pinMalloc !== false) pinMmapThreshold();
  if (cfg.live?.writev === false) Deno.env.set("DENO_USE_WRITEV", "");
  if (cfg.live?.binary) binaryFrames();
  const root = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
  const stream = await Stream.open("trades", {
    schema: SCHEMA,
    root,
    maxReplay: null,
    ...(cfg.live?.maxBacklog ? { maxBacklog: cfg.live.maxBacklog } : {}),
  });
  const server = serve([stream], {
    port: cfg.port,
    onListen: () => console.log("READY"),
    pingIntervalS: 0,
    ...(cfg.live?.sendBufferBytes ? { sendBufferBytes: cfg.live.sendBufferBytes } : {}),
    ...(cfg.live?.turnBytes !== undefined ? { fanoutTurnBytes: cfg.live.turnBytes } : {}),
  });
  onStop = async () => {
    await server.shutdown();
    await Deno.remove(root, { recursive: true });
  };
  while (stream.subscribers < cfg.subs) await sleep(5);
  const make = liveTradeRows(1);
  if (cfg.rate > 0) {
    return await paced((i) => void stream.send(make(i)));
  }
  // Flat out: groups of `inflight` concurrent single sends, the next group
  // appended while the previous one commits (group commit does the rest).
  const k = cfg.inflight ?? 1024;
  let prev: Promise<unknown> | null = null;
  let i = 0;
  while (!stopping) {
    const group = new Array<Promise<number | null>>(k);
    for (let j = 0; j < k; j++, i++) group[j] = stream.send(make(i));
    const all = Promise.all(group);
    if (prev) await prev;
    published += k;
    prev = all;
  }
}

// Data frames (they start with "[") as binary, one shared Uint8Array per text.
function binaryFrames(): void {
  const send = WebSocket.prototype.send;
  const enc = new TextEncoder();
  let last = "";
  let bytes = new Uint8Array(0);
  WebSocket.prototype.send = function (data) {
    if (typeof data !== "string" || data.charCodeAt(0) !== 91) return send.call(this, data);
    if (data !== last) {
      last = data;
      bytes = enc.encode(data);
    }
    return send.call(this, bytes);
  };
}

async function sha1Base64(text: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(text));
  return btoa(String.fromCharCode(...new Uint8Array(d)));
}

/** One unmasked text frame holding `payload`. */
function textFrame(payload: Uint8Array): Uint8Array {
  const n = payload.length;
  const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const out = new Uint8Array(head + n);
  out[0] = 0x81;
  if (n < 126) out[1] = n;
  else if (n < 65536) {
    out[1] = 126;
    out[2] = n >> 8;
    out[3] = n & 255;
  } else {
    out[1] = 127;
    new DataView(out.buffer).setBigUint64(2, BigInt(n));
  }
  out.set(payload, head);
  return out;
}

async function raw(): Promise<void> {
  const conns: Deno.Conn[] = [];
  const listener = Deno.listen({ hostname: "127.0.0.1", port: cfg.port });
  console.log("READY");
  const accept = async () => {
    for await (const conn of listener) {
      (async () => {
        let head = "";
        const buf = new Uint8Array(4096);
        while (!head.includes("\r\n\r\n")) {
          const n = await conn.read(buf);
          if (n === null) return;
          head += new TextDecoder().decode(buf.subarray(0, n));
        }
        const key = /sec-websocket-key:\s*(\S+)/i.exec(head)?.[1] ?? "";
        const accept = await sha1Base64(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
        await conn.write(
          new TextEncoder().encode(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
              `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
          ),
        );
        conns.push(conn);
      })().catch(() => {});
    }
  };
  void accept().catch(() => {});
  onStop = () => {
    listener.close();
    for (const c of conns) {
      try {
        c.close();
      } catch {
        // already closed
      }
    }
    return Promise.resolve();
  };
  while (conns.length < cfg.subs) await sleep(5);
  // The rows: trade rows as `[offset,msg]` lines, built once.
  const r = cfg.rowsPerFrame ?? 1;
  const n = cfg.framesPerWrite ?? 1;
  const make = tradeRows(1);
  const enc = new TextEncoder();
  const frames: Uint8Array[] = [];
  for (let f = 0, o = 1; f < n; f++) {
    const lines = [];
    for (let k = 0; k < r; k++, o++) lines.push(`[${o},${JSON.stringify(make(o))}]`);
    frames.push(textFrame(enc.encode(lines.join("\n"))));
  }
  const all = new Uint8Array(frames.reduce((s, f) => s + f.length, 0));
  frames.reduce((at, f) => (all.set(f, at), at + f.length), 0);
  const writeAll = async (c: Deno.Conn) => {
    for (let o = 0; o < all.length;) o += await c.write(all.subarray(o));
  };
  if (cfg.independent) {
    // One shared buffer handed to every connection's writes (Deno.Conn.write
    // keeps a reference, no copy); published: the rows written, per connection.
    await Promise.all(conns.map(async (c) => {
      while (!stopping) {
        await writeAll(c);
        published += r * n / conns.length;
      }
    })).catch(() => {});
    return;
  }
  while (!stopping) {
    await Promise.all(conns.map(writeAll)).catch(() => {});
    published += r * n;
  }
}

void commands();
if (cfg.mode === "bare") await bare();
else if (cfg.mode === "streamcast") await streamcast();
else await raw();
