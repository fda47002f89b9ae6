/**
 * A cluster (DESIGN §18), measured with real processes: one etcd
 * (tests/_etcd.ts) and three `cli.ts serve --cluster` nodes per case, fsync
 * on, on this machine; this process is the load generator.
 *
 * Each R is measured twice, in the order 1 2 3 3 2 1, and the two runs
 * averaged (fresh nodes each time), so that no R only ever runs first.
 *
 * - Publish throughput at R = 1, 2, 3: one WebSocket publisher (`publisher()`,
 *   the server's 64 frames in flight) sending 100-row frames to the leader
 *   for a fixed time; rows acknowledged per second. R = 1 is the baseline
 *   (a cluster node that waits for nobody but itself).
 * - Ack latency at R = 1, 2, 3: one-row POSTs to the leader one after the
 *   other (keep-alive), p50 and p99 of the round trip.
 * - Failover: the leader SIGKILLed while a client POSTs one row at a time to
 *   the surviving nodes (following the 307); the time from the kill to the
 *   first acknowledgement by the new leader, over N trials (lease 2 s; the
 *   killed node is restarted and back in the in-sync set before the next).
 *
 * Targets (issue 29): R = 2 throughput ≥ 0.7× R = 1, its ack p99 ≤ 2× R = 1's,
 * failover ≤ lease + 5 s in every trial.
 *
 * Run alone: deno run --config deno.dev.json -A bench/run.ts --only cluster [--quick]
 * STREAMCAST_BENCH_FAILOVER_TRIALS=N sets the trials (default 20; 3 with --quick).
 */
import { publisher } from "../client/publisher.ts";
import { startEtcd } from "../tests/_etcd.ts";
import { leaderOf, post, rowsOf, startServeNodes } from "../tests/cluster/_serve_nodes.ts";
import { type BenchRow, type BenchSection, median } from "./_report.ts";

const LEASE_S = 2;

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
async function measureAt(etcd: string, replicas: number, quick: boolean): Promise<AtR> {
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
    });
    const leader = await leaderOf(nodes, 30_000);
    // Every follower connected and in the set first (R = 1 too: the same shipping).
    const deadline = Date.now() + 30_000;
    while ((await leader.head())?.in_sync.length !== 3 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const pub = await publisher(`${leader.ws}/t`, { producer: `w-${replicas}` });
    const frame = Array.from({ length: 100 }, (_, i) => ({ p: "w", seq: 0, i }));
    const ms = quick ? 2000 : 6000;
    let rows = 0;
    const t0 = performance.now();
    const inFlight: Promise<unknown>[] = [];
    while (performance.now() - t0 < ms) {
      inFlight.push(pub.publish(frame).then(() => (rows += frame.length)));
      if (inFlight.length >= 128) await inFlight.shift();
    }
    await Promise.all(inFlight);
    const rowsPerS = rows / ((performance.now() - t0) / 1000);
    await pub.close();
    const lat: number[] = [];
    const n = quick ? 100 : 500;
    for (let seq = 1; seq <= n; seq++) {
      const t = performance.now();
      const a = await post(leader.url, rowsOf("h", seq, 1), { producer: "h", seq });
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
  await using etcd = await startEtcd();
  // Each R twice, in the order 1 2 3 3 2 1, averaged: neither goes first only.
  const runs = new Map<number, AtR[]>([[1, []], [2, []], [3, []]]);
  for (const r of [1, 2, 3, 3, 2, 1]) runs.get(r)!.push(await measureAt(etcd.url, r, quick));
  const mean = (xs: AtR[], k: keyof AtR) => xs.reduce((a, x) => a + x[k], 0) / xs.length;
  const at: AtR[] = [1, 2, 3].map((r) => {
    const xs = runs.get(r)!;
    return { rowsPerS: mean(xs, "rowsPerS"), p50: mean(xs, "p50"), p99: mean(xs, "p99") };
  });
  const fo = await failovers(etcd.url, trials);
  const [r1, r2, r3] = at;
  const bound = (LEASE_S + 5) * 1000;
  const row = (
    c: string,
    ours: number,
    base: number,
    unit: string,
    target = "",
    met: boolean | null = null,
  ): BenchRow => ({ case: c, ours, baseline: base, unit, ratio: ours / base, target, met });
  const rows: BenchRow[] = [
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
  ];
  return {
    title: "A cluster: the price of R = 2 and 3, and failover",
    baseline: "R = 1 on the same three nodes and etcd, same run; failover against lease + 5 s",
    rows,
    notes: [
      `Three \`cli.ts serve --cluster\` processes and one etcd on this machine (fsync on, lease ` +
      `${LEASE_S} s, --replica-lag-ms 1000); R = 1: ${Math.round(r1.rowsPerS)} rows/s, p50 ` +
      `${r1.p50.toFixed(2)} ms, p99 ${r1.p99.toFixed(2)} ms; R = 2: ${Math.round(r2.rowsPerS)} ` +
      `rows/s, p50 ${r2.p50.toFixed(2)} ms, p99 ${r2.p99.toFixed(2)} ms; R = 3: ` +
      `${Math.round(r3.rowsPerS)} rows/s, p50 ${r3.p50.toFixed(2)} ms, p99 ${
        r3.p99.toFixed(2)
      } ms.`,
      `Failover, ms, each trial: ${fo.map((t) => Math.round(t)).join(", ")}.`,
    ],
  };
}
