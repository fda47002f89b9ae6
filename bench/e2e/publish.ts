/**
 * Network publishing (docs/SPEC.md §9), acknowledged once durable, against NATS
 * JetStream publishing the same rows in the same run, on the same machine:
 *
 * - one WebSocket publisher pipelining 100-row frames (`publisher()`, 64
 *   frames in flight): durable rows/s, fsync on — against JetStream with one
 *   row a message and the same rows in flight (6,400 PubAcks awaited);
 * - one HTTP client posting 1000-row NDJSON bodies (8 in flight) — against
 *   JetStream publishing the same 1000 rows and awaiting their acks (8 batches
 *   in flight);
 * - a one-row round trip, p50 and p99, fsync on — against one JetStream
 *   publish awaited;
 * - the WebSocket case again with `--no-fsync`: what JetStream 2.9 does (it
 *   has no per-ack fsync), so the two are compared at the same durability.
 *
 * Both servers run as child processes (`cli.ts serve --publish`, Debian's
 * `nats-server -c` with a file store, see `../harness/nats.ts`); this process is the
 * load generator for both. Without nats-server the rows say so.
 *
 * Run alone: deno run --config deno.dev.json -A bench/run.ts --only publish [--quick]
 */
import { connect as natsConnect, type JetStreamClient } from "nats";
import { publisher } from "../../client/publisher.ts";
import { type BenchRow, type BenchSection, median, renderSection } from "../harness/report.ts";
import { startNats } from "../harness/nats.ts";
import { freePort } from "../harness/contenders.ts";

const root = new URL("../..", import.meta.url).pathname;
// Bodies (and JetStream batches) in flight from the one HTTP client.
const HTTP_IN_FLIGHT = 8;

export const SCHEMA = {
  type: "object",
  properties: {
    event_ts: { type: "integer" },
    symbol: { type: "string" },
    price: { type: "number" },
    size: { type: "number" },
    side: { type: "integer", format: "int32" },
  },
  required: ["event_ts", "symbol", "price", "size", "side"],
};

export function makeRows(n: number): Record<string, unknown>[] {
  const out = new Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = {
      event_ts: 1_764_000_000_000_000 + i,
      symbol: ["BTC-USD", "ETH-USD", "SOL-USD"][i % 3],
      price: 85_000 + (i % 1000) / 10,
      size: 0.001 * (1 + (i % 50)),
      side: i % 2 ? 1 : -1,
    };
  }
  return out;
}

export interface Serve {
  url: string;
  /** The server process's id. */
  pid: number;
  stop(): Promise<void>;
}

export async function startServe(fsync: boolean): Promise<Serve> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-publish-bench-" });
  await Deno.writeTextFile(`${dir}/b.json`, JSON.stringify(SCHEMA));
  const port = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${root}cli.ts`,
      "serve",
      "--stream",
      `b=${dir}/b.json`,
      "--root",
      `${dir}/data`,
      "--publish",
      "b",
      "--port",
      String(port),
      "--log-level",
      "warn",
      ...(fsync ? [] : ["--no-fsync"]),
    ],
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let log = "";
  const reader = (async () => {
    for await (const c of child.stderr.pipeThrough(new TextDecoderStream())) log += c;
  })();
  const deadline = Date.now() + 30_000;
  while (!log.includes("listening on")) {
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`serve did not start:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    url: `ws://127.0.0.1:${port}/b`,
    pid: child.pid,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
      await reader.catch(() => {});
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))];
}

// --- streamcast ---

async function wsRows(
  url: string,
  rows: Record<string, unknown>[],
  frame: number,
): Promise<number> {
  const pub = await publisher(url, { producer: `bench-${crypto.randomUUID().slice(0, 8)}` });
  const t0 = performance.now();
  const all: Promise<unknown>[] = [];
  for (let i = 0; i < rows.length; i += frame) {
    all.push(pub.publish(rows.slice(i, i + frame)));
    // Keep the publisher's queue short: the window is the server's 64 frames.
    if (all.length % 256 === 0) await all[all.length - 128];
  }
  await Promise.all(all);
  const s = (performance.now() - t0) / 1000;
  await pub.close();
  return rows.length / s;
}

async function httpRows(
  url: string,
  rows: Record<string, unknown>[],
  body: number,
): Promise<number> {
  const http = url.replace(/^ws/, "http");
  const bodies: string[] = [];
  for (let i = 0; i < rows.length; i += body) {
    bodies.push(rows.slice(i, i + body).map((r) => JSON.stringify(r)).join("\n"));
  }
  const t0 = performance.now();
  let next = 0;
  // Bodies in flight may commit out of the order they started, so each
  // worker has a producer of its own (its seqs go up one at a time).
  await Promise.all(Array.from({ length: HTTP_IN_FLIGHT }, async (_, w) => {
    let mine = 0;
    while (next < bodies.length) {
      const b = bodies[next++];
      const res = await fetch(http, {
        method: "POST",
        body: b,
        headers: {
          "content-type": "application/x-ndjson",
          "streamcast-producer": `bench-http-${w}`,
          "streamcast-seq": String(++mine),
        },
      });
      if (res.status !== 200) throw new Error(`POST: ${res.status} ${await res.text()}`);
      await res.body?.cancel();
    }
  }));
  return rows.length / ((performance.now() - t0) / 1000);
}

async function wsRoundTrips(url: string, n: number): Promise<number[]> {
  const pub = await publisher(url, { producer: `bench-rtt-${crypto.randomUUID().slice(0, 8)}` });
  const rows = makeRows(n);
  const us: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await pub.send(rows[i]);
    us.push((performance.now() - t0) * 1000);
  }
  await pub.close();
  return us;
}

// --- NATS JetStream ---

async function natsRows(js: JetStreamClient, rows: Uint8Array[], window: number): Promise<number> {
  const t0 = performance.now();
  let inFlight: Promise<unknown>[] = [];
  for (const r of rows) {
    inFlight.push(js.publish("bench.rows", r));
    if (inFlight.length >= window) {
      await Promise.all(inFlight);
      inFlight = [];
    }
  }
  await Promise.all(inFlight);
  return rows.length / ((performance.now() - t0) / 1000);
}

async function natsBatches(
  js: JetStreamClient,
  rows: Uint8Array[],
  batch: number,
): Promise<number> {
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: HTTP_IN_FLIGHT }, async () => {
    while (next < rows.length) {
      const from = next;
      next += batch;
      await Promise.all(rows.slice(from, from + batch).map((r) => js.publish("bench.http", r)));
    }
  }));
  return rows.length / ((performance.now() - t0) / 1000);
}

async function natsRoundTrips(js: JetStreamClient, n: number): Promise<number[]> {
  const enc = new TextEncoder();
  const rows = makeRows(n).map((r) => enc.encode(JSON.stringify(r)));
  const us: number[] = [];
  for (const r of rows) {
    const t0 = performance.now();
    await js.publish("bench.rtt", r);
    us.push((performance.now() - t0) * 1000);
  }
  return us;
}

/** Runs the benchmark; `quick` publishes fewer rows. */
export async function run(quick: boolean): Promise<BenchSection> {
  const N = quick ? 200_000 : 1_000_000;
  const RTT = quick ? 200 : 1000;
  const rows = makeRows(N);
  const enc = new TextEncoder();
  const natsPayloads = rows.map((r) => enc.encode(JSON.stringify(r)));

  const ours: Record<string, number> = {};
  let rttOurs: number[] = [];
  const sc = await startServe(true);
  try {
    await wsRows(sc.url, rows.slice(0, 20_000), 100); // warm-up
    ours.ws = await wsRows(sc.url, rows, 100);
    ours.http = await httpRows(sc.url, rows, 1000);
    rttOurs = await wsRoundTrips(sc.url, RTT);
  } finally {
    await sc.stop();
  }
  const noSync = await startServe(false);
  try {
    await wsRows(noSync.url, rows.slice(0, 20_000), 100);
    ours.wsNoFsync = await wsRows(noSync.url, rows, 100);
  } finally {
    await noSync.stop();
  }

  const theirs: Record<string, number> = {};
  let rttNats: number[] = [];
  let natsNote: string;
  const nats = await startNats();
  if ("missing" in nats) {
    natsNote = `NATS JetStream not measured: ${nats.missing}`;
  } else {
    natsNote =
      `NATS JetStream: ${nats.version}, file store (npm:nats 2.29.3); JetStream 2.9 has no ` +
      "per-ack fsync option (sync_interval came in 2.10): its PubAck follows a write to the OS";
    const nc = await natsConnect({ servers: nats.url });
    try {
      const jsm = await nc.jetstreamManager();
      await jsm.streams.add({ name: "BENCH", subjects: ["bench.>"], storage: "file" as never });
      const js = nc.jetstream();
      await natsRows(js, natsPayloads.slice(0, 20_000), 6400); // warm-up
      theirs.ws = await natsRows(js, natsPayloads, 6400);
      theirs.http = await natsBatches(js, natsPayloads, 1000);
      rttNats = await natsRoundTrips(js, RTT);
    } finally {
      await nc.close();
      await nats.stop();
    }
  }
  const nan = Number.NaN;
  const row = (
    c: string,
    o: number,
    b: number | undefined,
    unit: string,
    target: string,
    met: boolean | null,
    lowerBetter = false,
  ): BenchRow => ({
    case: c,
    ours: o,
    baseline: b ?? nan,
    unit,
    ratio: b === undefined ? nan : lowerBetter ? b / o : o / b,
    target,
    met,
  });
  const load = (() => {
    try {
      return Deno.readTextFileSync("/proc/loadavg").split(" ")[0];
    } catch {
      return "?";
    }
  })();
  const limit = `a commit with producer records pays two fdatasyncs (journal, then segment) and ` +
    `the rows' parse, validation and encoding on one core; load average ${load} at the end of the run`;
  const rows_: BenchRow[] = [
    row(
      "WebSocket publisher, 100-row frames, 64 in flight, fsync on",
      ours.ws,
      theirs.ws,
      "rows/s",
      "≥ 200k rows/s",
      ours.ws >= 200_000,
    ),
    row(
      "HTTP POST, 1000-row NDJSON bodies, 8 in flight, fsync on",
      ours.http,
      theirs.http,
      "rows/s",
      "≥ 200k rows/s",
      ours.http >= 200_000,
    ),
    row(
      "one-row round trip, p50, fsync on",
      median(rttOurs),
      rttNats.length ? median(rttNats) : undefined,
      "µs",
      "",
      null,
      true,
    ),
    row(
      "one-row round trip, p99, fsync on",
      pct(rttOurs, 0.99),
      rttNats.length ? pct(rttNats, 0.99) : undefined,
      "µs",
      "",
      null,
      true,
    ),
    row(
      "WebSocket publisher, 100-row frames, --no-fsync",
      ours.wsNoFsync,
      theirs.ws,
      "rows/s",
      "",
      null,
    ),
  ];
  return {
    title: "Publishing over the network: durable acks",
    baseline:
      "NATS JetStream (Debian's nats-server, file store) publishing the same rows, one row " +
      "a message, the same rows in flight, from the same load-generator process, in the same run",
    rows: rows_.map((r) => (r.met === false ? { ...r, limit } : r)),
    notes: [
      `${N} rows of 5 columns (~95 bytes of JSON); ${RTT} round trips. Both servers are child ` +
      "processes on 127.0.0.1; this process generates the load for both. A streamcast ack " +
      "comes after the producer journal's and the segment's fdatasync (fsync on). " + natsNote +
      ".",
    ],
  };
}

if (import.meta.main) {
  console.log(renderSection(await run(Deno.args.includes("--quick"))));
}
