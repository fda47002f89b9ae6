// A real server on 127.0.0.1 for the client tests, and a row generator.
import { serve, type Server, Stream, type StreamOptions } from "../../mod.ts";
import { rmrf, tempDir } from "./util.ts";

export const SCHEMA = {
  type: "object",
  properties: {
    event_ts: { type: "integer" },
    symbol: { type: "string" },
    price: { type: "number" },
    side: { type: "integer", format: "int32" },
  },
  required: ["event_ts", "symbol", "price", "side"],
};

export interface TradeRow {
  event_ts: number;
  symbol: string;
  price: number;
  side: number;
}

/** Row number `i`; `event_ts` carries `i` so a test can see gaps on an ephemeral stream. */
export function row(i: number): TradeRow {
  return { event_ts: i, symbol: i % 2 ? "BTC-USD" : "ETH-USD", price: 100 + i / 8, side: i % 2 };
}

/** The data line the server sends for row `i` at `offset`. */
export function line(offset: number, i = offset): string {
  return `[${offset},${JSON.stringify(row(i))}]`;
}

export interface Fixture {
  root: string;
  stream: Stream;
  server: Server;
  port: number;
  /** ws://127.0.0.1:PORT/trades */
  url: string;
  /** Sends rows `from..to` (inclusive) in one commit. */
  send(from: number, to: number): Promise<void>;
  /** Stops the server and opens a new one on the same port and root; `wipe` deletes the log first. */
  restart(opts?: { wipe?: boolean }): Promise<void>;
  stop(): Promise<void>;
}

/** A server with one stream "trades" (durable unless `ephemeral`). */
export async function fixture(
  opts: Partial<StreamOptions> & { ephemeral?: boolean } = {},
): Promise<Fixture> {
  const root = await tempDir("streamcast-client-");
  const { ephemeral, ...streamOpts } = opts;
  const open = () =>
    Stream.open("trades", { schema: SCHEMA, root: ephemeral ? undefined : root, ...streamOpts });
  let stream = await open();
  let server = serve([stream], { port: 0, onListen: () => {} });
  const port = server.addr.port;
  const f: Fixture = {
    root,
    get stream() {
      return stream;
    },
    get server() {
      return server;
    },
    port,
    url: `ws://127.0.0.1:${port}/trades`,
    async send(from, to) {
      const rows = [];
      for (let i = from; i <= to; i++) rows.push(row(i));
      await stream.sendMany(rows);
    },
    async restart(o = {}) {
      await server.shutdown();
      if (o.wipe) await rmrf(`${root}/trades`);
      stream = await open();
      server = serve([stream], { port, onListen: () => {} });
    },
    async stop() {
      await server.shutdown();
      await rmrf(root);
    },
  };
  return f;
}

/** Collects what a loop yields until `stop` says so; returns the rows. */
export async function take<T>(
  it: AsyncIterable<T>,
  n: number,
): Promise<T[]> {
  const out: T[] = [];
  if (n <= 0) return out;
  for await (const v of it) {
    out.push(v);
    if (out.length >= n) break;
  }
  return out;
}
