// NATS JetStream publish on a three-node nats-server cluster (bench/harness/nats.ts
// startNatsCluster: routes between three local servers, each with JetStream on
// a file store of its own), measured the way bench/e2e/cluster.ts measures
// streamcast's cluster: throughput with a window of publishes in flight, and
// the ack latency of one message at a time (publish, wait for the PubAck).
//
// The stream has `num_replicas` R; a PubAck comes once the stream's leader
// and R − 1 followers hold the message (JetStream's raft group). The client
// connects to the server that leads the stream, as streamcast's publisher
// talks to the leader: no extra hop on either side.
import { connect, type JetStreamClient, type NatsConnection } from "nats";
import { type NatsCluster, startNatsCluster } from "./nats.ts";

/** What one measurement at one R gives. */
export interface JetStreamAtR {
  /** Rows/s acknowledged, one row a message, `window` publishes in flight. */
  rowsPerS: number;
  /** Rows/s acknowledged, `batch` rows a message, `batchWindow` messages in flight. */
  batchRowsPerS: number;
  /** One-message round trips (publish → PubAck), ms. */
  p50: number;
  p99: number;
  /** `nats-server --version`. */
  version: string;
}

/** How to measure. */
export interface JetStreamOptions {
  /** One row's JSON a message, cycled through. */
  rows: readonly Uint8Array[];
  /** Rows per message of the batched case (newline-joined, as NDJSON). */
  batch: number;
  /** How long the one-row-a-message case publishes, ms (the batched case half as long). */
  ms: number;
  /** Messages in flight, one row a message. */
  window: number;
  /** Messages in flight, `batch` rows a message. */
  batchWindow: number;
  /** One-message round trips for the latency. */
  roundTrips: number;
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))];
}

/**
 * Adds file-stored stream TRADES (subject `trades`) with `replicas`
 * replicas, retrying while the cluster cannot place them yet (right after
 * start the servers may not all have joined JetStream's meta group).
 */
export async function addStream(nc: NatsConnection, replicas: number): Promise<void> {
  const jsm = await nc.jetstreamManager();
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await jsm.streams.add({
        name: "TRADES",
        subjects: ["trades"],
        storage: "file" as never,
        num_replicas: replicas,
      });
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`JetStream stream with R = ${replicas}: ${err}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/**
 * The URL of the server that leads stream TRADES, once it has a leader and,
 * for R > 1, every replica is current: a client publishes to it, as
 * streamcast's publisher talks to the leader.
 */
export async function streamLeader(nc: NatsConnection, cluster: NatsCluster): Promise<string> {
  const jsm = await nc.jetstreamManager();
  const deadline = Date.now() + 30_000;
  for (;;) {
    const info = await jsm.streams.info("TRADES").catch(() => null);
    const leader = info?.cluster?.leader;
    const replicas = info?.cluster?.replicas ?? [];
    const i = leader ? cluster.names.indexOf(leader) : -1;
    if (
      i >= 0 && replicas.length === info!.config.num_replicas - 1 &&
      replicas.every((r) => r.current)
    ) {
      return cluster.urls[i];
    }
    if (Date.now() > deadline) {
      throw new Error(`JetStream stream: no leader (${JSON.stringify(info?.cluster)})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

// Messages/s acknowledged with at most `window` in flight (the oldest awaited
// when the window is full), publishing `msgs` in turn for `ms`.
async function windowed(
  js: JetStreamClient,
  msgs: readonly Uint8Array[],
  window: number,
  ms: number,
): Promise<number> {
  const inFlight: Promise<unknown>[] = [];
  let head = 0;
  let acked = 0;
  const t0 = performance.now();
  for (let i = 0; performance.now() - t0 < ms; i++) {
    inFlight.push(js.publish("trades", msgs[i % msgs.length]));
    if (inFlight.length - head >= window) {
      await inFlight[head++];
      acked++;
      if (head >= 4096) {
        inFlight.splice(0, head);
        head = 0;
      }
    }
  }
  await Promise.all(inFlight.slice(head));
  acked += inFlight.length - head;
  return acked / ((performance.now() - t0) / 1000);
}

/**
 * Starts a fresh three-server cluster, adds a file-stored stream with
 * `num_replicas` = `replicas`, measures, and stops the cluster.
 */
export async function jetStreamAt(replicas: number, o: JetStreamOptions): Promise<JetStreamAtR> {
  const cluster = await startNatsCluster(3);
  try {
    let url: string;
    const admin = await connect({ servers: cluster.urls });
    try {
      await addStream(admin, replicas);
      url = await streamLeader(admin, cluster);
    } finally {
      await admin.close();
    }
    const nc = await connect({ servers: url });
    try {
      const js = nc.jetstream();
      const enc = new TextEncoder();
      const dec = new TextDecoder();
      const batches: Uint8Array[] = [];
      for (let i = 0; i + o.batch <= o.rows.length; i += o.batch) {
        const text = o.rows.slice(i, i + o.batch).map((r) => dec.decode(r)).join("\n");
        batches.push(enc.encode(text));
      }
      await windowed(js, o.rows, o.window, Math.min(500, o.ms)); // warm-up
      const rowsPerS = await windowed(js, o.rows, o.window, o.ms);
      const batchRowsPerS = o.batch * await windowed(js, batches, o.batchWindow, o.ms / 2);
      const lat: number[] = [];
      for (let i = 0; i < o.roundTrips; i++) {
        const t = performance.now();
        await js.publish("trades", o.rows[i % o.rows.length]);
        lat.push(performance.now() - t);
      }
      return {
        rowsPerS,
        batchRowsPerS,
        p50: pct(lat, 0.5),
        p99: pct(lat, 0.99),
        version: cluster.version,
      };
    } finally {
      await nc.close();
    }
  } finally {
    await cluster.stop();
  }
}
