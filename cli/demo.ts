/**
 * `cli.ts demo`: a synthetic trade feed captured into the durable stream
 * "trades" and served with the web viewer, so a newcomer sees streamcast work
 * with one command and no network.
 *
 * ```text
 * deno run -A cli.ts demo [--port 8765] [--root ./data] [--rate ROWS_PER_S]
 * ```
 *
 * Once ready it prints on stderr the viewer's URL, a `tail` command, a plain
 * WebSocket one-liner, and last `listening on http://HOST:PORT`. SIGINT or
 * SIGTERM stops the feed, closes subscribers with 1001, flushes the log and
 * exits 0; a restart on the same root continues the same log (offsets, trade
 * ids and prices).
 *
 * @module
 */

import { resolve } from "node:path";
import { sleep } from "../common/backoff.ts";
import { Logger } from "../common/logger.ts";
import { batchedStderr } from "../common/stderr_lines.ts";
import { LogLockedError } from "../log/mod.ts";
import { DEFAULT_HOST, DEFAULT_PORT } from "../server/serve_options.ts";
import { serve, type Server } from "../server/serve.ts";
import { Stream } from "../server/stream/stream.ts";
import { parse, UsageError } from "./_args.ts";
import { onSignals } from "./_signals.ts";

const USAGE =
  `usage: deno run -A cli.ts demo [--port ${DEFAULT_PORT}] [--root ./data] [--rate ROWS_PER_S]

A synthetic trade feed (random-walk prices for a few symbols, with bursts; no
network needed) captured into the durable stream "trades" under ROOT and
served with the web viewer.

  --port PORT        port to listen on (0: any free port) [${DEFAULT_PORT}]
  --host HOST        address to listen on [${DEFAULT_HOST}]
  --root DIR         the log lives in DIR/trades [./data]
  --rate ROWS_PER_S  average rows per second; bursts run several times faster
                     (0: no feed, serve what the log holds) [50]

Prints the viewer's URL, a tail command and a WebSocket one-liner, then
"listening on http://HOST:PORT" on stderr once ready. A restart on the same
root continues the same log. SIGINT or SIGTERM shuts down cleanly (exit 0).`;

const FLAGS = {
  port: { type: "string" },
  host: { type: "string" },
  root: { type: "string" },
  rate: { type: "string" },
} as const;

/** The name of the demo's stream. */
export const DEMO_STREAM = "trades";

/** Default `--rate`: average rows per second. */
export const DEFAULT_DEMO_RATE = 50;

/** The demo's row schema: one trade. */
export const DEMO_SCHEMA: Record<string, unknown> = {
  type: "object",
  properties: {
    event_ts: {
      type: "integer",
      format: "int64",
      description: "trade time, microseconds since the Unix epoch",
    },
    symbol: { type: "string", minLength: 1 },
    price: { type: "number", format: "double" },
    size: { type: "number", format: "double" },
    side: { type: "string", enum: ["buy", "sell"] },
    trade_id: { type: "integer", format: "int64" },
  },
  required: ["event_ts", "symbol", "price", "size", "side", "trade_id"],
  additionalProperties: false,
};

/** One row of the demo feed. */
export interface Trade {
  /** Trade time, µs since the Unix epoch. */
  event_ts: number;
  /** The instrument. */
  symbol: string;
  /** The traded price. */
  price: number;
  /** The traded quantity. */
  size: number;
  /** The aggressor's side. */
  side: "buy" | "sell";
  /** A unique, increasing trade id. */
  trade_id: number;
}

interface Instrument {
  symbol: string;
  /** Start price. */
  price: number;
  /** Share of the trades. */
  weight: number;
  /** Price tick (rounding), and per-trade volatility as a fraction of price. */
  tick: number;
  vol: number;
  /** Typical trade size. */
  size: number;
}

const INSTRUMENTS: readonly Instrument[] = [
  { symbol: "BTC-USD", price: 85565, weight: 0.4, tick: 0.01, vol: 0.00008, size: 0.05 },
  { symbol: "ETH-USD", price: 3120.5, weight: 0.3, tick: 0.01, vol: 0.0001, size: 0.8 },
  { symbol: "SOL-USD", price: 142.3, weight: 0.2, tick: 0.001, vol: 0.00015, size: 12 },
  { symbol: "XRP-USD", price: 0.6123, weight: 0.1, tick: 0.0001, vol: 0.0002, size: 900 },
];

/** Options of {@linkcode TradeFeed}. */
export interface TradeFeedOptions {
  /** Average rows per second. @default 50 */
  ratePerS?: number;
  /** Seed of the random numbers. @default the time */
  seed?: number;
  /** The next trade id. @default 1 */
  nextTradeId?: number;
  /** Last prices by symbol, to continue a walk (a restart). @default the start prices */
  prices?: Record<string, number>;
}

/**
 * Synthetic trades: each instrument's price is a random walk with a little
 * momentum from the aggressor's side, trade sizes are log-normal, and the
 * arrival rate switches between calm and bursts (a few times the average, for
 * a second or two) the way a market feed does around news.
 *
 * @example
 * ```ts
 * import { equal, ok } from "node:assert/strict";
 * import { TradeFeed } from "./demo.ts";
 * const feed = new TradeFeed({ ratePerS: 1000, seed: 7 });
 * const rows = feed.next(100, Date.now() * 1000);
 * ok(rows.length > 0);
 * equal(rows[0].trade_id, 1);
 * ```
 */
export class TradeFeed {
  readonly #rate: number;
  readonly #prices: number[];
  #seed: number;
  #tradeId: number;
  #burstLeftMs = 0;
  #burstMult = 1;
  #lastTs = 0;

  /** Makes a feed. */
  constructor(options: TradeFeedOptions = {}) {
    this.#rate = options.ratePerS ?? DEFAULT_DEMO_RATE;
    this.#seed = (options.seed ?? Date.now()) >>> 0;
    this.#tradeId = options.nextTradeId ?? 1;
    this.#prices = INSTRUMENTS.map((i) => options.prices?.[i.symbol] ?? i.price);
  }

  /** mulberry32: small, fast, seeded. */
  #rand(): number {
    let t = (this.#seed = (this.#seed + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  #normal(): number {
    const u = 1 - this.#rand();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.#rand());
  }

  #poisson(mean: number): number {
    if (mean > 30) return Math.max(0, Math.round(mean + Math.sqrt(mean) * this.#normal()));
    const limit = Math.exp(-mean);
    let k = 0;
    for (let p = this.#rand(); p > limit; p *= this.#rand()) k++;
    return k;
  }

  /** The trades of the last `dtMs` milliseconds, ending at `nowUs` (µs since the epoch). */
  next(dtMs: number, nowUs: number): Trade[] {
    // Calm most of the time at a bit under the average; now and then a burst.
    // Bursts start 0.05 times a second, last 1.5 s and run 3.75 times the
    // average (means): 7 % of the time. Calm at 0.8 keeps the average at the rate.
    if (this.#burstLeftMs <= 0 && this.#rand() < 0.05 * dtMs / 1000) {
      this.#burstLeftMs = 500 + this.#rand() * 2000;
      this.#burstMult = 2.5 + this.#rand() * 2.5;
    }
    const mult = this.#burstLeftMs > 0 ? this.#burstMult : 0.8;
    this.#burstLeftMs -= dtMs;
    const n = this.#poisson(this.#rate * mult * dtMs / 1000);
    const times: number[] = [];
    for (let i = 0; i < n; i++) times.push(nowUs - Math.floor(this.#rand() * dtMs * 1000));
    times.sort((a, b) => a - b);
    const rows: Trade[] = [];
    for (const t of times) {
      let pick = this.#rand();
      let k = 0;
      while (k < INSTRUMENTS.length - 1 && pick >= INSTRUMENTS[k].weight) {
        pick -= INSTRUMENTS[k].weight;
        k++;
      }
      const inst = INSTRUMENTS[k];
      const buy = this.#rand() < 0.5;
      const drift = (buy ? 0.25 : -0.25) * inst.vol;
      const next = this.#prices[k] * (1 + drift + inst.vol * this.#normal());
      this.#prices[k] = Math.max(inst.tick, Math.round(next / inst.tick) * inst.tick);
      const digits = Math.max(0, Math.round(-Math.log10(inst.tick)));
      this.#lastTs = Math.max(this.#lastTs, t);
      rows.push({
        event_ts: this.#lastTs,
        symbol: inst.symbol,
        price: Number(this.#prices[k].toFixed(digits)),
        size: Number((inst.size * Math.exp(0.9 * this.#normal())).toFixed(4)),
        side: buy ? "buy" : "sell",
        trade_id: this.#tradeId++,
      });
    }
    return rows;
  }
}

/** The last price of each symbol among the stream's newest rows, to continue the walk. */
async function lastPrices(stream: Stream, rows = 2000): Promise<Record<string, number>> {
  const log = stream.log;
  const out: Record<string, number> = {};
  if (!log || log.earliest === null) return out;
  const reader = log.reader(Math.max(log.earliest, log.endOffset - rows));
  const decoder = new TextDecoder();
  try {
    while (true) {
      const b = await reader.read();
      if (b.count === 0) break;
      for (let i = 0; i < b.count; i++) {
        const row = JSON.parse(
          decoder.decode(b.buf.subarray(b.starts[i], b.starts[i] + b.lengths[i])),
        );
        if (typeof row.symbol === "string" && typeof row.price === "number") {
          out[row.symbol] = row.price;
        }
      }
    }
  } finally {
    reader.close();
  }
  return out;
}

function positiveNumber(v: unknown, flag: string, max: number): number {
  const n = Number(v);
  if (typeof v !== "string" || v.trim() === "" || !Number.isFinite(n) || n < 0 || n > max) {
    throw new UsageError(`${flag} must be a number from 0 to ${max}, got ${JSON.stringify(v)}`);
  }
  return n;
}

function oneLine(err: unknown): string {
  return String(err instanceof Error ? err.message : err).split("\n")[0];
}

/** Sends the feed's rows every `tickMs` until `signal` aborts. */
async function runFeed(
  stream: Stream,
  feed: TradeFeed,
  signal: AbortSignal,
  tickMs = 50,
): Promise<void> {
  let last = performance.now();
  while (!signal.aborted) {
    await sleep(tickMs, signal);
    if (signal.aborted) break;
    const now = performance.now();
    const rows = feed.next(now - last, Date.now() * 1000);
    last = now;
    if (rows.length > 0) await stream.sendMany(rows);
  }
}

/** Runs `demo` with its arguments; resolves with the exit code. */
export async function cmdDemo(args: string[]): Promise<number> {
  let port: number;
  let host: string;
  let root: string;
  let rate: number;
  try {
    const { values } = parse(args, FLAGS, 0);
    if (values.help) {
      console.log(USAGE);
      return 0;
    }
    const p = values.port ?? String(DEFAULT_PORT);
    port = positiveNumber(p, "--port", 65535);
    if (!Number.isInteger(port)) throw new UsageError(`--port must be an integer, got ${p}`);
    host = (values.host as string | undefined) ?? DEFAULT_HOST;
    root = (values.root as string | undefined) ?? "./data";
    rate = positiveNumber(values.rate ?? String(DEFAULT_DEMO_RATE), "--rate", 1_000_000);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`streamcast demo: ${err.message} (see --help)`);
    return 2;
  }
  const logger = new Logger({ write: batchedStderr });
  const signals = onSignals(
    Deno.build.os === "windows" ? ["SIGINT", "SIGBREAK"] : ["SIGINT", "SIGTERM"],
    () => logger,
    "demo",
  );
  try {
    if (port !== 0) {
      // Report a busy port before a log is created or opened.
      try {
        Deno.listen({ hostname: host, port }).close();
      } catch (err) {
        const why = err instanceof Deno.errors.AddrInUse
          ? "the address is in use (another server?)"
          : oneLine(err);
        console.error(`streamcast demo: cannot listen on ${host}:${port}: ${why}`);
        return 1;
      }
    }
    let stream: Stream;
    try {
      stream = await Stream.open(DEMO_STREAM, { root, schema: DEMO_SCHEMA });
    } catch (err) {
      if (err instanceof LogLockedError) {
        console.error(`streamcast demo: ${oneLine(err)} (is another demo running on ${root}?)`);
        return 1;
      }
      throw err;
    }
    let server: Server;
    try {
      server = serve([stream], { hostname: host, port, onListen: () => {} });
    } catch (err) {
      await stream.close();
      console.error(`streamcast demo: cannot listen on ${host}:${port}: ${oneLine(err)}`);
      return 1;
    }
    const feed = new TradeFeed({
      ratePerS: rate,
      nextTradeId: stream.endOffset ?? 1,
      prices: await lastPrices(stream),
    });
    const stop = new AbortController();
    const feeding = rate > 0 ? runFeed(stream, feed, stop.signal) : Promise.resolve();
    const feedError = feeding.then(() => null, (err: unknown) => err ?? "unknown error");

    const shown = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
    const hostPort = `${shown.includes(":") ? `[${shown}]` : shown}:${server.addr.port}`;
    const ws = `ws://${hostPort}/${DEMO_STREAM}`;
    const held = (stream.endOffset ?? 1) - 1;
    console.error(
      `streamcast demo: synthetic trades (~${rate} rows/s, with bursts) into stream ` +
        `"${DEMO_STREAM}", logged in ${resolve(root, DEMO_STREAM)}` +
        (held > 0 ? ` (continuing after offset ${held})` : ""),
    );
    console.error(`  open the viewer:   http://${hostPort}/${DEMO_STREAM}`);
    console.error(`  tail from a shell: npx -y deno@2 run -A cli.ts tail ${ws} --offset earliest`);
    console.error(`  any WebSocket:     npx -y wscat -c '${ws}?offset=0'`);
    console.error(`listening on http://${hostPort}`);

    // Until a signal, or the feed fails (a full disk, say): then stop it and
    // shut down with what is durable.
    await Promise.race([signals.received, feedError]);
    stop.abort();
    const failed = await feedError;
    let code = 0;
    if (failed !== null) {
      console.error(`streamcast demo: the feed failed: ${oneLine(failed)}; shutting down`);
      code = 1;
    }
    try {
      await server.shutdown();
    } catch (err) {
      console.error(`streamcast demo: shutdown failed: ${oneLine(err)}`);
      code = 1;
    }
    return code;
  } finally {
    signals.remove();
  }
}
