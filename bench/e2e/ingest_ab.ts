/**
 * Ingest from stdin, this checkout against another in one sitting: paired
 * runs of a real `cli.ts serve --stdin` (fsync on) in ABBA order (before,
 * after, after, before, …, as ../harness/ab.ts pairs them), so that the
 * machine's load falls on both alike; reported as the ratio of each pair's rows/s, server CPU a row and peak RSS
 * (VmHWM), with their medians. On a machine shared with other work the
 * ratios are what carry over, not the rows/s.
 *
 * `--prof DIR` runs one more pair under `deno run --cpu-prof` (profiles in
 * DIR/before and DIR/after) and prints each one's top self times, summed as
 * bench/e2e/profile.ts sums them.
 *
 * Run: STREAMCAST_BENCH_BEFORE=/path/to/checkout deno run --config deno.dev.json -A \
 *   bench/e2e/ingest_ab.ts [--rows N] [--pairs P] [--prof DIR]
 */
import { CLI, makeInput, type ServeRun, serveStdin } from "./ingest.ts";
import { type Ratios, ratios, runPairs } from "../harness/ab.ts";
import { summarize } from "./profile.ts";

function flag(name: string, fallback: string): string {
  const i = Deno.args.indexOf(name);
  return i === -1 ? fallback : Deno.args[i + 1];
}

const before = Deno.env.get("STREAMCAST_BENCH_BEFORE");
if (!before) {
  throw new Error("bench/e2e/ingest_ab.ts: set STREAMCAST_BENCH_BEFORE to the checkout to compare");
}
const n = Number(flag("--rows", "1000000"));
const pairs = Number(flag("--pairs", "4"));
const prof = flag("--prof", "");
const { bytes } = makeInput(n);
const cpuUs = (r: ServeRun): number => r.cpu / 100 * r.wallMs * 1000 / n;
const show = (r: ServeRun): string =>
  `${(r.rate / 1000).toFixed(0)} k rows/s, ${cpuUs(r).toFixed(2)} µs CPU a row, ` +
  `${r.hwmMiB.toFixed(0)} MiB peak RSS`;

const runs = await runPairs(
  pairs,
  (side) => serveStdin(side === "before" ? `${before}/cli.ts` : CLI, bytes, n),
  (got, p, order) =>
    console.log(
      `pair ${p + 1} (${order.join(", ")}): before ${show(got.before)}; after ${show(got.after)}`,
    ),
);
const rate = ratios(runs, (r) => r.rate);
const cpu = ratios(runs, cpuUs);
const rss = ratios(runs, (r) => r.hwmMiB);
const list = (r: Ratios) =>
  `${r.each.map((x) => x.toFixed(2)).join(", ")} (median ${r.median.toFixed(2)}×)`;
console.log(
  `after / before, ${pairs} pairs of ${n} rows: rows/s ${list(rate)}; CPU a row ${list(cpu)}; ` +
    `peak RSS ${list(rss)}`,
);

if (prof) {
  for (const which of ["before", "after"]) {
    const dir = `${prof}/${which}`;
    await Deno.mkdir(dir, { recursive: true });
    const cli = which === "before" ? `${before}/cli.ts` : CLI;
    const r = await serveStdin(cli, bytes, n, ["--cpu-prof", `--cpu-prof-dir=${dir}`]);
    // The main thread's profile is the largest file (the chunk worker writes its own).
    let best = { name: "", size: -1 };
    for await (const e of Deno.readDir(dir)) {
      const size = (await Deno.stat(`${dir}/${e.name}`)).size;
      if (e.name.endsWith(".cpuprofile") && size > best.size) best = { name: e.name, size };
    }
    const s = summarize(JSON.parse(await Deno.readTextFile(`${dir}/${best.name}`)));
    console.log(`\n${which} (profiled: ${show(r)}): ${s.busyMs.toFixed(0)} ms busy`);
    for (const f of s.functions.slice(0, 15)) {
      console.log(`${(f.ms / s.busyMs * 100).toFixed(1).padStart(5)} %  ${f.name.slice(0, 110)}`);
    }
  }
}
