/**
 * A cluster (docs/SPEC.md §11), measured with real processes: one etcd
 * (tests/harness/etcd.ts) and three `cli.ts serve --cluster` nodes per case, fsync
 * on, on this machine; this process is the load generator. Against it, NATS
 * JetStream publish on three routed `nats-server`s at the same R
 * (bench/harness/jetstream_publish.ts), the same trade rows (tests/harness/trades.ts).
 *
 * Each R is measured twice, in the order 1 2 3 3 2 1, and the two runs
 * averaged (fresh nodes each time), so that no R only ever runs first;
 * JetStream's cluster runs right after ours at each step. --quick measures
 * each R once, in the order 1 2 3.
 *
 * - Publish throughput at R = 1, 2, 3: one WebSocket publisher (`publisher()`,
 *   the server's 64 frames in flight) sending 100-row frames to the leader
 *   for a fixed time; rows acknowledged per second. R = 1 is the baseline
 *   (a cluster node that waits for nobody but itself). JetStream: one row a
 *   message, async publishes in flight (what a JetStream user does: each row
 *   its own message); and, as its best case without a target, 100 rows a
 *   message.
 * - Ack latency at R = 1, 2, 3: one-row POSTs to the leader one after the
 *   other (keep-alive), p50 and p99 of the round trip. JetStream: one publish
 *   at a time, awaiting its PubAck.
 * - Failover: the leader SIGKILLed while a client POSTs one row at a time to
 *   the surviving nodes (following the 307); the time from the kill to the
 *   first acknowledgement by the new leader, over N trials (lease 2 s; the
 *   killed node is restarted and back in the in-sync set before the next).
 *
 * Targets (issue 29): R = 2 throughput ≥ 0.7× R = 1, its ack p99 ≤ 2× R = 1's,
 * failover ≤ lease + 5 s in every trial. Against JetStream at each R:
 * throughput ≥ 1× its one-row-a-message rate, ack p99 ≤ 1× its p99.
 *
 * Run alone: deno run --config deno.dev.json -A bench/run.ts --only cluster [--quick]
 * STREAMCAST_BENCH_FAILOVER_TRIALS=N sets the trials (default 20; 3 with --quick).
 */
import { publisher } from "../../client/publisher.ts";
import { startEtcd } from "../../tests/harness/etcd.ts";
import { leaderOf, post, rowsOf, startServeNodes } from "../../tests/harness/serve_nodes.ts";
import { jetStreamAt, type JetStreamAtR } from "../harness/jetstream_publish.ts";
import { type BenchRow, benchRow as row, type BenchSection, median } from "../harness/report.ts";
import { SCHEMA, tradeRows } from "../../tests/harness/trades.ts";

const LEASE_S = 2;
// Rows a publish frame (ours) and frames in flight (the server's window).
const FRAME_ROWS = 100;
const FRAMES_IN_FLIGHT = 64;
// How long each throughput case publishes, ms (2 s with --quick).
const THROUGHPUT_MS = 4000;
// JetStream's async publishes in flight, one row a message.
const JS_WINDOW = 1024;

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))];
}

interface AtR {
  rowsPerS: number;
  p50: number;
  p99: number;
}

// Throughput and latency at R = `replicas`, on three fresh nodes.
async function measureAt(
  etcd: string,
  replicas: number,
  quick: boolean,
  rows: readonly Record<string, unknown>[],
): Promise<AtR> {
  const root = await Deno.makeTempDir({ prefix: "streamcast-bench-cluster-" });
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], {
      etcd,
      replicas,
      leaseSeconds: LEASE_S,
      extra: [
        "--cluster-prefix",
        `/bench-r${replicas}-${crypto.randomUUID().slice(0, 8)}`,
        "--log-level",
        "error",
      ],
    }, SCHEMA);
    const leader = await leaderOf(nodes, 30_000);
    // Every follower connected and in the set first (R = 1 too: the same shipping).
    const deadline = Date.now() + 30_000;
    while ((await leader.head())?.in_sync.length !== 3 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const pub = await publisher(`${leader.ws}/t`, { producer: `w-${replicas}` });
    const ms = quick ? 2000 : THROUGHPUT_MS;
    let acked = 0;
    const t0 = performance.now();
    const inFlight: Promise<unknown>[] = [];
    for (let i = 0; performance.now() - t0 < ms; i = (i + FRAME_ROWS) % rows.length) {
      inFlight.push(pub.publish(rows.slice(i, i + FRAME_ROWS)).then(() => (acked += FRAME_ROWS)));
      if (inFlight.length >= 2 * FRAMES_IN_FLIGHT) await inFlight.shift();
    }
    await Promise.all(inFlight);
    const rowsPerS = acked / ((performance.now() - t0) / 1000);
    await pub.close();
    const lat: number[] = [];
    const n = quick ? 100 : 500;
    for (let seq = 1; seq <= n; seq++) {
      const body = JSON.stringify(rows[seq % rows.length]) + "\n";
      const t = performance.now();
      const a = await post(leader.url, body, { producer: "h", seq });
      if (a?.status !== 200) throw new Error(`R=${replicas}: POST answered ${JSON.stringify(a)}`);
      lat.push(performance.now() - t);
    }
    return { rowsPerS, p50: pct(lat, 0.5), p99: pct(lat, 0.99) };
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

// Failover times over `trials` SIGKILLs of the leader (R = 2), ms.
async function failovers(etcd: string, trials: number): Promise<number[]> {
  const root = await Deno.makeTempDir({ prefix: "streamcast-bench-failover-" });
  const times: number[] = [];
  try {
    await using nodes = await startServeNodes(root, ["n1", "n2", "n3"], {
      etcd,
      replicas: 2,
      leaseSeconds: LEASE_S,
      extra: [
        "--cluster-prefix",
        `/bench-fo-${crypto.randomUUID().slice(0, 8)}`,
        "--log-level",
        "error",
      ],
    });
    let seq = 0;
    for (let t = 0; t < trials; t++) {
      const leader = await leaderOf(nodes, 60_000);
      // Everyone back in the set, so that any survivor may lead.
      const deadline = Date.now() + 60_000;
      while ((await leader.head())?.in_sync.length !== 3 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
      }
      const a = await post(leader.url, rowsOf("f", ++seq, 1), { producer: "f", seq });
      if (a?.status !== 200) throw new Error(`before trial ${t}: ${JSON.stringify(a)}`);
      const killed = performance.now();
      await leader.kill();
      const alive = nodes.filter((n) => n.running);
      let k = 0;
      seq++;
      for (;;) {
        const r = await post(alive[k++ % alive.length].url, rowsOf("f", seq, 1), {
          producer: "f",
          seq,
        }, 1000);
        if (r?.status === 200) break;
        await new Promise((r) => setTimeout(r, 20));
        if (performance.now() - killed > 60_000) throw new Error(`trial ${t}: no new leader`);
      }
      times.push(performance.now() - killed);
      await leader.start();
    }
    return times;
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

/** Runs the cluster benchmark. */
export async function run(quick: boolean): Promise<BenchSection> {
  const trials = Number(Deno.env.get("STREAMCAST_BENCH_FAILOVER_TRIALS") ?? (quick ? 3 : 20));
  const make = tradeRows(29);
  const rows = Array.from({ length: 100_000 }, (_, i) => make(i));
  const enc = new TextEncoder();
  const natsRows = rows.map((r) => enc.encode(JSON.stringify(r)));
  await using etcd = await startEtcd();
  // Each R twice, in the order 1 2 3 3 2 1, averaged: neither goes first only
  // (once each with --quick). JetStream's cluster right after ours at each R.
  const runs = new Map<number, AtR[]>([[1, []], [2, []], [3, []]]);
  const peer = new Map<number, JetStreamAtR[]>([[1, []], [2, []], [3, []]]);
  for (const r of quick ? [1, 2, 3] : [1, 2, 3, 3, 2, 1]) {
    runs.get(r)!.push(await measureAt(etcd.url, r, quick, rows));
    peer.get(r)!.push(
      await jetStreamAt(r, {
        rows: natsRows,
        batch: FRAME_ROWS,
        ms: quick ? 2000 : THROUGHPUT_MS,
        window: JS_WINDOW,
        batchWindow: FRAMES_IN_FLIGHT,
        roundTrips: quick ? 100 : 500,
      }),
    );
  }
  const mean = <T>(xs: T[], k: keyof T) => xs.reduce((a, x) => a + (x[k] as number), 0) / xs.length;
  const at: AtR[] = [1, 2, 3].map((r) => {
    const xs = runs.get(r)!;
    return { rowsPerS: mean(xs, "rowsPerS"), p50: mean(xs, "p50"), p99: mean(xs, "p99") };
  });
  const js = [1, 2, 3].map((r) => {
    const xs = peer.get(r)!;
    return {
      rowsPerS: mean(xs, "rowsPerS"),
      batchRowsPerS: mean(xs, "batchRowsPerS"),
      p50: mean(xs, "p50"),
      p99: mean(xs, "p99"),
    };
  });
  const version = peer.get(1)![0].version;
  const fo = await failovers(etcd.url, trials);
  const [r1, r2, r3] = at;
  const bound = (LEASE_S + 5) * 1000;
  // Ack latency p50 (no target) and p99 (≤ 1× JetStream's, with what limits it when missed).
  const latencyRows = (
    what: string,
    against: string,
    o: { p50: number; p99: number },
    j: { p50: number; p99: number },
    limit: string,
  ): BenchRow[] => [
    row(`${what} p50${against}`, o.p50, j.p50, "ms"),
    {
      ...row(
        `${what} p99${against}`,
        o.p99,
        j.p99,
        "ms",
        "≤ 1× (ahead of JetStream)",
        o.p99 <= j.p99,
      ),
      ...(o.p99 > j.p99 ? { limit } : {}),
    },
  ];
  const rows_: BenchRow[] = [
    row(
      "publish throughput, R = 2 vs R = 1",
      r2.rowsPerS,
      r1.rowsPerS,
      "rows/s",
      "≥ 0.7×",
      r2.rowsPerS >= 0.7 * r1.rowsPerS,
    ),
    row("publish throughput, R = 3 vs R = 1", r3.rowsPerS, r1.rowsPerS, "rows/s"),
    row("ack latency p50, R = 2 vs R = 1", r2.p50, r1.p50, "ms"),
    row(
      "ack latency p99, R = 2 vs R = 1 (ratio: R = 2's / R = 1's)",
      r2.p99,
      r1.p99,
      "ms",
      "≤ 2×",
      r2.p99 <= 2 * r1.p99,
    ),
    row("ack latency p50, R = 3 vs R = 1", r3.p50, r1.p50, "ms"),
    row("ack latency p99, R = 3 vs R = 1", r3.p99, r1.p99, "ms"),
  ];
  for (const [k, r] of [1, 2, 3].entries()) {
    const o = at[k];
    const j = js[k];
    rows_.push(
      {
        ...row(
          `R = ${r}: publish throughput vs JetStream R = ${r}, one row a message`,
          o.rowsPerS,
          j.rowsPerS,
          "rows/s",
          "≥ 1× (ahead of JetStream)",
          o.rowsPerS >= j.rowsPerS,
        ),
        ...(o.rowsPerS < j.rowsPerS
          ? {
            limit: `${(o.rowsPerS / j.rowsPerS).toFixed(2)}× JetStream's rows/s; not profiled`,
          }
          : {}),
      },
      row(
        `R = ${r}: publish throughput vs JetStream R = ${r}, ${FRAME_ROWS} rows a message`,
        o.rowsPerS,
        j.batchRowsPerS,
        "rows/s",
      ),
      ...latencyRows(
        `R = ${r}: ack latency`,
        ` vs JetStream R = ${r} (ratio: ours / JetStream's)`,
        o,
        j,
        (o.p99 / j.p99).toFixed(1) +
          `× JetStream's p99 (ours ${o.p99.toFixed(2)} ms, p50 ${
            o.p50.toFixed(2)
          } ms: a one-row POST to the leader, fsync on every ` +
          `node; JetStream's PubAck follows no fsync); not profiled`,
      ),
    );
  }
  rows_.push(
    row(
      `failover median of ${fo.length}, SIGKILL → first ack (vs lease + 5 s)`,
      median(fo),
      bound,
      "ms",
    ),
    row(
      `failover max of ${fo.length} (vs lease + 5 s)`,
      Math.max(...fo),
      bound,
      "ms",
      `≤ ${bound / 1000} s every trial`,
      Math.max(...fo) <= bound,
    ),
  );
  const fmt = (x: { rowsPerS: number; p50: number; p99: number }) =>
    `${Math.round(x.rowsPerS)} rows/s, p50 ${x.p50.toFixed(2)} ms, p99 ${x.p99.toFixed(2)} ms`;
  return {
    title: "A cluster: the price of R = 2 and 3, and failover",
    baseline: "R = 1 on the same three nodes and etcd, same run; NATS JetStream on a " +
      "three-server cluster at the same R, same rows, same run; failover against lease + 5 s",
    rows: rows_,
    notes: [
      `Three \`cli.ts serve --cluster\` processes and one etcd on this machine (fsync on, lease ` +
      `${LEASE_S} s, --replica-lag-ms 1000), stream \`t\` with the 6-column trade schema ` +
      `(tests/harness/trades.ts). Throughput: one WebSocket \`publisher()\` sending ${FRAME_ROWS}-row ` +
      `frames to the leader for ${quick ? 2 : THROUGHPUT_MS / 1000} s (the server's ` +
      `${FRAMES_IN_FLIGHT} frames in flight); rows acknowledged per second. Latency: one-row ` +
      `POSTs to the leader one after the other (keep-alive), p50 and p99 of the round trip. ` +
      `R = 1: ${fmt(r1)}; R = 2: ${fmt(r2)}; R = 3: ${fmt(r3)}.`,
      `JetStream: Debian's ${version} (npm:nats 2.29.3), three servers joined by cluster ` +
      "routes on 127.0.0.1, each with JetStream on a file store of its own, started afresh " +
      "for each measurement; a file-stored stream with `num_replicas` R; the client connected " +
      "to the server that leads the stream (as ours talks to the leader). The same trade rows " +
      "as JSON, one row a message: a JetStream user publishes a message per event (each row " +
      "then has its own sequence, subject, dedup id and ack, as each of our rows has its own " +
      "offset; JetStream 2.9 has no batch publish), with " +
      `${JS_WINDOW} async publishes in flight (of 64, 256, 1024 and 6400 tried here, the ` +
      `fastest) for ${quick ? 2 : THROUGHPUT_MS / 1000} s. The ${FRAME_ROWS}-rows-a-message ` +
      "rows give JetStream our frame's shape instead (newline-joined rows in one message, " +
      `${FRAMES_IN_FLIGHT} in flight, for half as long): JetStream's best case, not a ` +
      "target, since its rows " +
      "are then no longer messages of their own. Latency: one publish at a time, awaiting " +
      "its PubAck. Durability: nats-server 2.9 has no per-ack fsync (`sync_interval: always` " +
      "came with 2.10; this version refuses the field), so JetStream runs as configured by " +
      "default: a PubAck follows R servers' writes to the OS, the file store syncing on its " +
      "own timer (every 2 minutes by default); ours acknowledges only after an fdatasync on " +
      "R nodes. The two are not at the same durability: JetStream's is the weaker. " +
      `R = 1: ${fmt(js[0])}, ${
        Math.round(js[0].batchRowsPerS)
      } rows/s in ${FRAME_ROWS}-row messages; R = 2: ${fmt(js[1])}, ${
        Math.round(js[1].batchRowsPerS)
      } rows/s; R = 3: ${fmt(js[2])}, ${Math.round(js[2].batchRowsPerS)} rows/s.`,
      "`serve --cluster` refuses `--no-fsync` (a node holds a row only once it is synced), so " +
      "there is no case at JetStream's durability.",
      `Failover, ms, each trial: ${fo.map((t) => Math.round(t)).join(", ")}.`,
    ],
  };
}
