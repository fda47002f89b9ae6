/**
 * Fan-out throughput and latency, with the load generator in a separate
 * process: streamcast (single frames and batched frames, durable log with
 * fsync) against a bare Deno.upgradeWebSocket broadcast server with no log.
 *
 * Run alone: deno run -A bench/fanout.ts [--quick]
 */
import { type BenchRow, type BenchSection, renderSection } from "./_report.ts";

const here = new URL(".", import.meta.url).pathname;

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const p = (l.addr as Deno.NetAddr).port;
  l.close();
  return p;
}

async function lines(stream: ReadableStream<Uint8Array>, onLine: (l: string) => void) {
  let buf = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    const parts = buf.split("\n");
    buf = parts.pop()!;
    for (const p of parts) onLine(p);
  }
}

interface Result {
  rate: number;
  p50: number | null;
  p99: number | null;
  serverCpuMs: number | null;
  clientCpuMs: number | null;
  ms: number;
}

/** Runs one server + one load generator; returns what the generator measured. */
export async function runCase(
  mode: "bare" | "streamcast",
  frames: "single" | "batch",
  subs: number,
  rows: number,
  rate = 0,
): Promise<Result> {
  const port = freePort();
  const server = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${here}_fanout_server.ts`,
      mode,
      String(port),
      String(subs),
      String(rows),
      String(rate),
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  let serverReport: Record<string, number> | null = null;
  let readyResolve!: () => void;
  const ready = new Promise<void>((r) => (readyResolve = r));
  const serverOut = lines(server.stdout, (l) => {
    if (l === "READY") readyResolve();
    else if (l.startsWith("{")) serverReport = JSON.parse(l);
  });
  try {
    await ready;
    const path = mode === "bare" ? "/" : frames === "batch" ? "/trades?frames=batch" : "/trades";
    const client = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        `${here}_fanout_client.ts`,
        `ws://127.0.0.1:${port}${path}`,
        String(subs),
        String(rows),
        rate > 0 ? "latency" : "",
      ],
      stdout: "piped",
      stderr: "inherit",
    }).output();
    const out = new TextDecoder().decode(client.stdout).trim().split("\n").pop()!;
    const r = JSON.parse(out);
    await server.status;
    await serverOut;
    const sr = serverReport as Record<string, number> | null;
    return {
      rate: r.rate,
      p50: r.p50,
      p99: r.p99,
      serverCpuMs: sr?.cpuMs ?? null,
      clientCpuMs: r.cpuMs,
      ms: r.ms,
    };
  } finally {
    try {
      server.kill("SIGKILL");
    } catch {
      // already exited
    }
    await server.status;
  }
}

function cpu(r: Result): string {
  const s = r.serverCpuMs !== null ? `server CPU ${(r.serverCpuMs / r.ms * 100).toFixed(0)}%` : "";
  const c = r.clientCpuMs !== null
    ? `generator CPU ${(r.clientCpuMs / r.ms * 100).toFixed(0)}%`
    : "";
  return [s, c].filter(Boolean).join(", ");
}

/** The disk's own latency: one 200-byte write + syncData, `n` times. */
async function syncLatency(n: number): Promise<{ p50: number; p99: number }> {
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-" });
  const f = await Deno.open(`${dir}/sync`, { write: true, create: true });
  const buf = new Uint8Array(200).fill(65);
  const lat: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      f.writeSync(buf);
      await f.syncData();
      lat.push(performance.now() - t);
    }
  } finally {
    f.close();
    await Deno.remove(dir, { recursive: true });
  }
  lat.sort((a, b) => a - b);
  return { p50: lat[Math.floor(n / 2)], p99: lat[Math.floor(n * 0.99)] };
}

/** Runs the benchmark and returns its sections (throughput, then latency). */
export async function run(quick = false): Promise<BenchSection> {
  const rows: BenchRow[] = [];
  const chart: { subs: number; bare: number; single: number; batch: number }[] = [];
  for (const subs of [1, 10, 100, 1000]) {
    const n = Math.max(1000, Math.min(200_000, Math.floor((quick ? 200_000 : 1_000_000) / subs)));
    const bare = await runCase("bare", "single", subs, n);
    const single = await runCase("streamcast", "single", subs, n);
    const batch = await runCase("streamcast", "batch", subs, n);
    chart.push({ subs, bare: bare.rate, single: single.rate, batch: batch.rate });
    rows.push({
      case: `${subs} subscribers, single frames (${n} rows)`,
      ours: single.rate,
      baseline: bare.rate,
      unit: "rows/s",
      ratio: single.rate / bare.rate,
      target: "≥ 0.90× bare",
      met: single.rate / bare.rate >= 0.9,
      note: `${cpu(single)}; bare: ${cpu(bare)}`,
    });
    rows.push({
      case: `${subs} subscribers, batched frames vs single`,
      ours: batch.rate,
      baseline: single.rate,
      unit: "rows/s",
      ratio: batch.rate / single.rate,
      target: subs === 100 ? "≥ 20× single" : "",
      met: subs === 100 ? batch.rate / single.rate >= 20 : null,
      note: cpu(batch),
    });
  }
  const seconds = quick ? 3 : 10;
  const disk = await syncLatency(quick ? 1000 : 5000);
  const lat = await runCase("streamcast", "batch", 100, 500 * seconds, 500);
  const latBare = await runCase("bare", "single", 100, 500 * seconds, 500);
  rows.push({
    case: "latency p99, 500 rows/s × 100 subscribers, fsync on",
    ours: lat.p99!,
    baseline: latBare.p99!,
    unit: "ms",
    ratio: lat.p99! / latBare.p99!,
    target: "≤ 5 ms",
    met: lat.p99! <= 5,
    note: `p50 ${lat.p50!.toFixed(2)} ms (bare p50 ${latBare.p50!.toFixed(2)} ms); ` +
      `the disk alone in the same run: write + syncData of one 200-byte record p50 ` +
      `${disk.p50.toFixed(2)} ms, p99 ${disk.p99.toFixed(2)} ms`,
  });
  return {
    title: "Fan-out (server/)",
    baseline:
      "a bare `Deno.upgradeWebSocket` broadcast server with no log (one `JSON.stringify` per row, one `send` per subscriber), driven by the same load-generator process. For batched frames the baseline is streamcast's own single-frame figure.",
    rows,
    notes: [
      "Rows/s is rows delivered to all subscribers together, measured by the load generator from its first to its last row. Both processes share the machine's 2 cores. streamcast appends every row to its log with fsync before sending it.",
      "| subscribers | bare | streamcast single | streamcast batch |\n|---|---|---|---|\n" +
      chart.map((c) =>
        `| ${c.subs} | ${Math.round(c.bare)} | ${Math.round(c.single)} | ${Math.round(c.batch)} |`
      ).join("\n"),
      ...rows.map((r) => `- ${r.case}: ${r.note ?? ""}`),
    ],
  };
}

if (import.meta.main) console.log(renderSection(await run(Deno.args.includes("--quick"))));
