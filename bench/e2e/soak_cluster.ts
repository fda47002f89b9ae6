/**
 * The soak of a cluster: three real `cli.ts serve --cluster` nodes (R = 2)
 * on a real etcd, sharing an S3 archive (s3rver) that holds the stream's
 * Iceberg table, fed steadily for `--seconds` by the Jepsen-style test's
 * producers (HTTP, the publish socket, `publisher(urls)`, each with its
 * producer id, pausing `--pace` ms after each acknowledgement) and read by
 * its subscribers on every node (raw WebSocket and `connect(urls)` with
 * zstd-stream, filtered and not), one raw subscriber leaving and coming back
 * on the next node every 10 s. No faults: what it looks for is growth. At the
 * end, every check of the Jepsen-style test (tests/harness/jepsen/run.ts):
 * every acknowledged row once at its offset, every subscriber's rows, the
 * three logs equal, the Iceberg table holding each row once, `verify` on
 * each node.
 *
 * ```text
 * deno run --config deno.dev.json -A bench/e2e/soak_cluster.ts [--seconds 1800] [--window 20] [--pace 20] [--seed N] [--out report.json] [--step 10] [--node-flags="--flag value ..."]
 * deno run --config deno.dev.json -A bench/e2e/soak_cluster.ts --levels report.json [--step 10]
 * ```
 *
 * Prints a progress line every minute and, at the end, two lines per process
 * (the three nodes, etcd, s3rver) about its memory over the last `--window`
 * minutes of the feed (the checks after it are not sampled): RSS first, last
 * and max, its least-squares slope and its means over the window's first and
 * last fifth; then the slopes of RssAnon, of malloc's main heap, of its other
 * arenas and of the rest of the anonymous memory (from /proc/PID/smaps every
 * 30 s), and of the nodes' JavaScript heap, external memory and Iceberg
 * worker heap; then each process's mean memory over every `--step` minutes
 * of the feed (RSS, RssAnon, the arenas, the other anonymous memory, the
 * JavaScript heap used and reserved, external, the worker threads' heaps
 * reserved, and malloc's in use and free from its own account), which tells
 * memory still rising from memory that has levelled off. `--out` writes
 * every memory sample; `--levels FILE` prints that table again from such a
 * file, without a run. Exits 1 when a check failed.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { jepsenRun } from "../../tests/harness/jepsen/run.ts";
import {
  memoryLevels,
  type MemorySample,
  MemorySampler,
} from "../../tests/harness/soak/memory_samples.ts";

const USAGE = `usage: soak_cluster.ts [--seconds 1800] [--window 20] [--pace 20] [--seed N]
                       [--out report.json] [--step 10] [--node-flags="..."]
       soak_cluster.ts --levels report.json [--step 10]
  --seconds   how long the feed runs
  --window    the last minutes of the feed the slopes are taken over
  --pace      ms each producer pauses after an acknowledgement
  --seed      the Jepsen-style run's seed (default: a fresh one, printed)
  --out       write every memory sample to this JSON file when the feed ends
  --step      minutes per row of the memory-levels table
  --levels    print the memory-levels table of a file --out wrote, and exit
  --node-flags  extra flags for each node's serve command, after its own (a later
              flag wins); written --node-flags="--lease-seconds 5", with "="`;

// The mean memory of each process over every `step` minutes, a table.
function printLevels(samples: Record<string, MemorySample[]>, step: number): void {
  const f = (x: number) => Number.isFinite(x) ? x.toFixed(0).padStart(5) : "    -";
  console.error(
    `soak-cluster: memory by ${step}-minute step, mean MiB: ` +
      "RSS, RssAnon, malloc heap, other arenas, other anonymous, JS heap used, JS heap total, " +
      "external, background thread heap total, malloc in use, malloc free",
  );
  for (const [name, list] of Object.entries(samples)) {
    for (const l of memoryLevels(list, step)) {
      console.error(
        `soak-cluster: ${name.padEnd(6)} min ${String(l.fromMinute).padStart(3)}` +
          [
            l.rss,
            l.rssAnon,
            l.mallocHeap,
            l.mallocArenas,
            l.otherAnon,
            l.heapUsed,
            l.heapTotal,
            l.external,
            l.backgroundHeapTotal,
            l.mallocInUse,
            l.mallocFree,
          ]
            .map(f).join(""),
      );
    }
  }
}

/** Runs the soak with command-line flags; resolves with the exit code. */
export async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      seconds: { type: "string", default: "1800" },
      window: { type: "string", default: "20" },
      pace: { type: "string", default: "20" },
      seed: { type: "string" },
      out: { type: "string" },
      "node-flags": { type: "string", default: "" },
      step: { type: "string", default: "10" },
      levels: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const step = Number(values.step);
  if (!(step > 0)) {
    throw new Error(`--step must be a positive number of minutes, got ${values.step}`);
  }
  if (values.levels !== undefined) {
    const saved = JSON.parse(Deno.readTextFileSync(values.levels));
    if (typeof saved?.samples !== "object" || saved.samples === null) {
      throw new Error(`${values.levels}: no "samples" (not a file soak_cluster.ts --out wrote)`);
    }
    printLevels(saved.samples, step);
    return 0;
  }
  const seed = values.seed === undefined
    ? crypto.getRandomValues(new Uint32Array(1))[0]
    : Number(values.seed) >>> 0;
  const seconds = Number(values.seconds);
  console.error(`soak-cluster: seed ${seed}, ${seconds} s, producers pause ${values.pace} ms`);
  const sampler = new MemorySampler();
  const outText = () =>
    JSON.stringify(
      { seed, seconds, memory: sampler.report(Number(values.window)), samples: sampler.samples() },
      null,
      1,
    );
  const t0 = Date.now();
  const report = await jepsenRun(seed, seconds, {
    faults: false,
    paceMs: Number(values.pace),
    started: (name, pid, url) => {
      sampler.add(name, pid, url);
      if (name === "n3") sampler.start(1000, 5, 30);
    },
    // The samples are written when the feed ends: a check that fails after it loses none.
    fed: () => {
      sampler.stop();
      if (values.out) Deno.writeTextFileSync(values.out, outText());
    },
    progress: (line) => console.error(`soak-cluster: ${line}`),
    nodeFlags: values["node-flags"].split(" ").filter((f) => f !== ""),
  });
  sampler.stop();
  const memory = sampler.report(Number(values.window));
  console.error(report.history.toString());
  console.error(
    `soak-cluster: ${report.rows} rows in the final log, ${report.problems.length} problems, ` +
      `${((Date.now() - t0) / 60000).toFixed(1)} min`,
  );
  for (const p of report.problems) console.error(`soak-cluster: PROBLEM ${p}`);
  const f = (x: number) => Number.isFinite(x) ? x.toFixed(2) : "-";
  for (const [name, m] of Object.entries(memory)) {
    const rss = `RSS ${m.rssFirstMiB.toFixed(0)} -> ${m.rssLastMiB.toFixed(0)} MiB ` +
      `(max ${m.rssMaxMiB.toFixed(0)})`;
    const window = `over the last ${m.windowMinutes.toFixed(1)} min of the feed ` +
      `${f(m.rssSlopeMiBPerMin)} MiB/min, mean ${m.rssWindowStartMiB.toFixed(0)} MiB in its ` +
      `first fifth and ${m.rssWindowEndMiB.toFixed(0)} in its last`;
    console.error(`soak-cluster: ${name}: ${rss}; ${window}`);
    console.error(
      `soak-cluster: ${name}: slopes, MiB/min: RssAnon ${f(m.rssAnonSlopeMiBPerMin)}, ` +
        `malloc heap ${f(m.mallocHeapSlopeMiBPerMin)}, other arenas ${
          f(m.mallocArenasSlopeMiBPerMin)
        }, other anonymous ${f(m.otherAnonSlopeMiBPerMin)}, JS heap used ${
          f(m.heapUsedSlopeMiBPerMin)
        }, external ${f(m.externalSlopeMiBPerMin)}, background thread heap used ${
          f(m.backgroundHeapUsedSlopeMiBPerMin)
        }`,
    );
  }
  printLevels(sampler.samples(), step);
  return report.problems.length === 0 ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
