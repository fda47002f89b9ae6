// Followers (docs/SPEC.md §10), measured with real processes: a primary
// (`cli.ts serve --stdin`, fed trade rows at a fixed rate by this process),
// followers (`cli.ts serve --follow`), and the load generator
// (bench/harness/fanout_client.ts). CPU of each server process is read from
// /proc/PID/stat over the same window.
//
// 1. What the primary spends on a follower against what it spends on one
//    batched subscriber, in the same run: the primary's CPU with 4 followers
//    and with 4 batched subscribers, each less its CPU with neither.
// 2. A follower's fan-out against the primary's own at 100 and 1000 batched
//    subscribers: CPU per delivered row above each process's own cost at
//    that rate with no subscriber; rows delivered.
// 3. Latency primary → follower → subscriber against primary → subscriber,
//    p50/p99 (event_ts is the wall clock when this process wrote the row).
import { join } from "node:path";
import { type BenchRow, type BenchSection, human } from "../harness/report.ts";
import { freePort, Proc, procCpuMs, sleep } from "../harness/contenders.ts";
import type { LoadConfig } from "../harness/fanout_client.ts";
import { liveTradeRows, SCHEMA } from "../../tests/harness/trades.ts";

const root = new URL("../..", import.meta.url).pathname;
const cli = join(root, "cli.ts");
async function untilHead(
  url: string,
  test: (h: Record<string, unknown>) => boolean,
): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/trades/head`);
      if (res.ok && test(await res.json())) return;
      else await res.body?.cancel();
    } catch {
      // not up yet
    }
    await sleep(50);
  }
  throw new Error(`${url}: no head in time`);
}

function server(name: string, args: string[]): Proc {
  return new Proc(name, Deno.execPath(), [
    "run",
    "-A",
    cli,
    "serve",
    "--log-level",
    "error",
    ...args,
  ]);
}

/** Feeds the primary's stdin at `rate` rows/s in ticks of `tickMs` until stopped. */
class Feeder {
  #stop = false;
  #done: Promise<void>;
  rows = 0;
  constructor(p: Proc, rate: number, tickMs = 10) {
    const make = liveTradeRows(7);
    this.#done = (async () => {
      const t0 = performance.now();
      while (!this.#stop) {
        const due = Math.floor(((performance.now() - t0) / 1000) * rate);
        let text = "";
        for (; this.rows < due; this.rows++) text += JSON.stringify(make(this.rows)) + "\n";
        if (text) await p.send(text.slice(0, -1));
        await sleep(tickMs);
      }
    })();
  }
  async stop(): Promise<void> {
    this.#stop = true;
    await this.#done;
  }
}

/** The primary's rows appended, frames and bytes sent so far (its `/_/metrics`). */
async function sent(
  url: string,
): Promise<{ rows: number; frames: number; bytes: number; t: number }> {
  const text = await (await fetch(`${url}/_/metrics`)).text();
  const get = (name: string) =>
    Number(new RegExp(`^${name}\\{stream="trades"\\} (\\d+)`, "m").exec(text)?.[1] ?? NaN);
  return {
    rows: get("streamcast_rows_appended_total"),
    frames: get("streamcast_frames_sent_total"),
    bytes: get("streamcast_bytes_sent_total"),
    t: performance.now(),
  };
}

/** CPU % of wall time of each pid over `ms`. */
async function cpuOver(pids: number[], ms: number): Promise<number[]> {
  const c0 = pids.map(procCpuMs);
  const t0 = performance.now();
  await sleep(ms);
  const wall = (performance.now() - t0) / 1000;
  return pids.map((p, i) => ((procCpuMs(p) - c0[i]) / 1000 / wall) * 100);
}

async function loadgen(cfg: LoadConfig): Promise<Proc> {
  const p = new Proc("load", Deno.execPath(), [
    "run",
    "-A",
    "--config",
    join(root, "deno.dev.json"),
    join(root, "bench/harness/fanout_client.ts"),
    JSON.stringify(cfg),
  ]);
  // Generous: with 1000 sockets on a loaded 2-core machine the handshakes
  // alone have taken over a minute; a slow start is not a result.
  try {
    await p.line((l) => l === "OPEN", 300_000);
    await p.line((l) => l === "ALL", 180_000);
  } catch (err) {
    p.kill();
    throw new Error(`load generator for ${cfg.subs} subscribers did not start: ${err}`);
  }
  return p;
}

interface Window {
  cpu: number[];
  rowsPerS: number;
  p50: number | null;
  p99: number | null;
}

// A window with the load generator attached: CPU of `pids`, rows delivered, latency.
async function measured(load: Proc, pids: number[], ms: number): Promise<Window> {
  await load.mark();
  // With latency on: first let the backlog of the connect phase drain (up to 30 s).
  for (let k = 0; k < 30; k++) {
    await sleep(1000);
    const m = await load.mark();
    const lat = m.lat as { p50: number | null } | undefined;
    if (!lat || (lat.p50 !== null && lat.p50 < 100)) break;
  }
  const m0 = await load.mark();
  const cpu = await cpuOver(pids, ms);
  const m1 = await load.mark();
  const secs = ((m1.t as number) - (m0.t as number)) / 1000;
  const lat = m1.lat as { p50: number | null; p99: number | null } | undefined;
  return {
    cpu,
    rowsPerS: ((m1.rows as number) - (m0.rows as number)) / secs,
    p50: lat?.p50 ?? null,
    p99: lat?.p99 ?? null,
  };
}

/** The follower benchmark. */
export async function run(quick: boolean): Promise<BenchSection> {
  const ms = quick ? 2500 : 6000;
  const dir = await Deno.makeTempDir({ prefix: "streamcast-bench-follow-" });
  const schema = join(dir, "trades.json");
  await Deno.writeTextFile(schema, JSON.stringify(SCHEMA));
  const procs: Proc[] = [];
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  try {
    const pport = freePort();
    const primary = server("primary", [
      "--root",
      join(dir, "p"),
      "--port",
      String(pport),
      "--stream",
      `trades=${schema}`,
      "--stdin",
      "trades",
      "--seal-every",
      "5",
      "--max-subscribers",
      "5000",
    ]);
    procs.push(primary);
    const purl = `http://127.0.0.1:${pport}`;
    await untilHead(purl, () => true);

    // 1. The primary's cost of a follower against that of a batched subscriber.
    // Each loaded window is flanked by windows without the load (the primary's
    // own cost at this rate drifts a little): the cost is the difference.
    const RATE1 = 20_000;
    let feeder = new Feeder(primary, RATE1);
    await sleep(1000);
    // A window of the primary: its CPU, and rows appended, frames and bytes sent.
    const win = async () => {
      const a = await sent(purl);
      const [cpu] = await cpuOver([primary.pid], ms);
      const b = await sent(purl);
      const secs = (b.t - a.t) / 1000;
      return {
        cpu,
        rows: (b.rows - a.rows) / secs,
        frames: (b.frames - a.frames) / secs,
        bytes: (b.bytes - a.bytes) / secs,
      };
    };
    // CPU µs per appended row: a window's CPU share over its row rate.
    const usPerRow = (w: { cpu: number; rows: number }) => (w.cpu / 100) / w.rows * 1e6;
    const idleA = await win();
    const subs4 = await loadgen({ url: `ws://127.0.0.1:${pport}/trades?frames=batch`, subs: 4 });
    const withSubs = await win();
    await subs4.stop();
    await sleep(500);
    const idleB = await win();
    const followers: { proc: Proc; url: string; port: number }[] = [];
    for (let k = 0; k < 4; k++) {
      const port = freePort();
      const proc = server(`follower${k}`, [
        "--root",
        join(dir, `f${k}`),
        "--port",
        String(port),
        "--follow",
        `trades=ws://127.0.0.1:${pport}/trades`,
        "--max-subscribers",
        "5000",
      ]);
      procs.push(proc);
      followers.push({ proc, url: `http://127.0.0.1:${port}`, port });
    }
    for (const f of followers) await untilHead(f.url, (h) => h.state === "live");
    await sleep(1000);
    const withFollowers = await win();
    for (const f of followers) {
      f.proc.kill();
      await f.proc.child.status;
    }
    await sleep(500);
    const idleC = await win();
    // Per receiver: the loaded window's CPU per row less the flanking windows'.
    const perSub = (usPerRow(withSubs) - (usPerRow(idleA) + usPerRow(idleB)) / 2) / 4;
    const perFollower = (usPerRow(withFollowers) - (usPerRow(idleB) + usPerRow(idleC)) / 2) / 4;
    rows.push({
      case: `primary CPU per row, per follower vs per batched subscriber (4 each, ${
        human(RATE1)
      } rows/s)`,
      ours: perFollower,
      baseline: perSub,
      unit: "µs/row",
      ratio: perSub / perFollower,
      target: "",
      met: null,
      serverCpu: [withFollowers.cpu, withSubs.cpu],
      note: `primary alone ${usPerRow(idleA).toFixed(2)}/${usPerRow(idleB).toFixed(2)}/${
        usPerRow(idleC).toFixed(2)
      } µs/row (before, between, after), with 4 subscribers ${
        usPerRow(withSubs).toFixed(2)
      }, with 4 followers ${usPerRow(withFollowers).toFixed(2)}`,
    });
    // Frames and bytes per appended row, per receiver (less the primary's own: none).
    const per = (w: { frames: number; bytes: number; rows: number }, k: "frames" | "bytes") =>
      (w[k] / w.rows) * 1000 / 4;
    for (const k of ["frames", "bytes"] as const) {
      const ours = per(withFollowers, k);
      const base = per(withSubs, k);
      rows.push({
        case: `${k} the primary sends per 1000 rows, per follower vs per batched subscriber`,
        ours,
        baseline: base,
        unit: k === "frames" ? "frames" : "B",
        ratio: base / ours,
        target: k === "frames" ? "≈ one batched subscriber" : "",
        met: k === "frames" ? ours <= base * 1.25 : null,
      });
    }
    await feeder.stop();
    // A fresh follower for the fan-out cases.
    const fport = freePort();
    const f = {
      port: fport,
      proc: server("follower", [
        "--root",
        join(dir, "f"),
        "--port",
        String(fport),
        "--follow",
        `trades=ws://127.0.0.1:${pport}/trades`,
        "--max-subscribers",
        "5000",
      ]),
    };
    procs.push(f.proc);
    await untilHead(`http://127.0.0.1:${fport}`, (h) => h.state === "live");

    // 2 and 3. Fan-out and latency, follower against primary, at the same rate.
    // Rows/s × subscribers = 200 k rows/s delivered at either count: what
    // both servers keep up with on this machine, so latency is not queueing.
    for (const n of quick ? [100] : [100, 1000]) {
      const RATE2 = 200_000 / n;
      // A tick is about a commit, and a commit a frame to every subscriber: at
      // 1000 subscribers, 10 commits/s keep the sends (10 k frames/s) within
      // what this machine does beside the load generator.
      const tickMs = n >= 1000 ? 100 : 10;
      feeder = new Feeder(primary, RATE2, tickMs);
      await sleep(1000);
      const [pIdle, fIdle] = await cpuOver([primary.pid, f.proc.pid], ms);
      const out: Record<"follower" | "primary", Window> = {} as never;
      for (const who of ["follower", "primary"] as const) {
        const port = who === "follower" ? f.port : pport;
        const load = await loadgen({
          url: `ws://127.0.0.1:${port}/trades?frames=batch`,
          subs: n,
          latency: true,
        });
        out[who] = await measured(load, [primary.pid, f.proc.pid], ms);
        await load.stop();
      }
      // Fan-out CPU per 1000 delivered rows, above each process's own at this rate.
      const fo = (out.follower.cpu[1] - fIdle) / (out.follower.rowsPerS / 1000);
      const po = (out.primary.cpu[0] - pIdle) / (out.primary.rowsPerS / 1000);
      rows.push({
        case: `fan-out CPU per 1k delivered rows/s, ${n} subscribers, follower vs primary`,
        ours: fo,
        baseline: po,
        unit: "% CPU",
        ratio: po / Math.max(fo, 0.001),
        target: "",
        met: null,
        note:
          `delivered ${human(out.follower.rowsPerS)} vs ${human(out.primary.rowsPerS)} rows/s ` +
          `(fed ${human(RATE2 * n)}); server CPU ${out.follower.cpu[1].toFixed(0)} % vs ${
            out.primary.cpu[0].toFixed(0)
          } %`,
        serverCpu: [out.follower.cpu[1], out.primary.cpu[0]],
      });
      for (const q of ["p50", "p99"] as const) {
        const ours = out.follower[q] ?? NaN;
        const base = out.primary[q] ?? NaN;
        rows.push({
          case:
            `latency ${q}, ${n} subscribers: primary → follower → subscriber vs primary → subscriber`,
          ours,
          baseline: base,
          unit: "ms",
          ratio: base / ours,
          target: "",
          met: null,
        });
      }
    }
    await feeder.stop();
    notes.push(
      "Every server is a `cli.ts serve` process (fsync on); the primary is fed on stdin by the " +
        "benchmark at a fixed rate; latency is from the row's `event_ts` (the benchmark's wall " +
        "clock when it wrote the row) to its arrival at the load generator, so it includes the " +
        "primary's ingest and fsync (and the follower's relay and fsync). CPU is from " +
        "/proc/PID/stat over the same window. Ratios are baseline / ours (> 1: the follower " +
        "path costs less).",
    );
  } finally {
    for (const p of procs.reverse()) {
      p.kill();
      await p.child.status;
    }
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  if (Deno.env.get("BENCH_FOLLOW_NOTES")) {
    for (const r of rows) console.error(r.case, r.note ?? "");
  }
  return {
    title: "Followers: the primary's cost per follower, a follower's fan-out and latency",
    baseline: "a batched subscriber of the primary (cost); the primary's own fan-out and " +
      "latency at the same rate and subscriber count (same run)",
    rows,
    notes,
  };
}
