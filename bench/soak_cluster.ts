/**
 * The soak of a cluster: three real `cli.ts serve --cluster` nodes (R = 2)
 * on a real etcd, sharing an S3 archive (s3rver) that holds the stream's
 * Iceberg table, fed steadily for `--seconds` by the Jepsen-style test's
 * producers (HTTP, the publish socket, `publisher(urls)`, each with its
 * producer id, pausing `--pace` ms after each acknowledgement) and read by
 * its subscribers on every node (raw WebSocket and `connect(urls)` with
 * zstd-stream, filtered and not), one raw subscriber leaving and coming back
 * on the next node every 10 s. No faults: what it looks for is growth. At the
 * end, every check of the Jepsen-style test (tests/cluster/_jepsen_run.ts):
 * every acknowledged row once at its offset, every subscriber's rows, the
 * three logs equal, the Iceberg table holding each row once, `verify` on
 * each node.
 *
 * ```text
 * deno run --config deno.dev.json -A bench/soak_cluster.ts [--seconds 1800] [--window 20] [--pace 20] [--seed N] [--out report.json] [--node-flags "--flag value ..."]
 * ```
 *
 * Prints a progress line every minute and, at the end, two lines per process
 * (the three nodes, etcd, s3rver) about its memory over the last `--window`
 * minutes of the feed (the checks after it are not sampled): RSS first, last
 * and max, its least-squares slope and its means over the window's first and
 * last fifth; then the slopes of RssAnon, of malloc's main heap, of its other
 * arenas and of the rest of the anonymous memory (from /proc/PID/smaps every
 * 30 s), and of the nodes' JavaScript heap, external memory and Iceberg
 * worker heap. `--out` writes every memory sample. Exits 1 when a check
 * failed.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { jepsenRun } from "../tests/cluster/_jepsen_run.ts";
import { MemorySampler } from "../tests/reliability/_memory_samples.ts";

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
    },
  });
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
        }, external ${f(m.externalSlopeMiBPerMin)}, Iceberg worker heap used ${
          f(m.icebergHeapUsedSlopeMiBPerMin)
        }`,
    );
  }
  return report.problems.length === 0 ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
