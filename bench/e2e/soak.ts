/**
 * A long soak of a real `cli.ts serve`: steady ingest from stdin while virtual
 * subscribers join, pause, leave and resume; checks every row each one gets,
 * the log at the end, and the server's memory all along. The test suite runs
 * the same soak for STREAMCAST_SOAK_SECONDS (default 120); this runs it as
 * long as you like.
 *
 * ```text
 * deno run -A bench/e2e/soak.ts [--seconds 600] [--subscribers 8] [--rate 1000] [--seed 7]
 * ```
 *
 * Prints progress every 10 s and a JSON report at the end; exits 1 when it
 * found a problem (a row out of place, a refusal, RSS over 256 MiB, an
 * unclean stop). The report's `memory` gives, for every server process, the
 * RSS slope over the last two thirds of the run in MiB/min (and the slopes of
 * the JavaScript heap used and of external memory, read from the server's
 * /_/metrics, to tell a JavaScript leak from native growth); one line per
 * process sums it up on stderr. `--samples` keeps every sample in the report.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { runSoak } from "../../tests/harness/soak/soak.ts";

/** Runs the soak with command-line flags; resolves with the exit code. */
export async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      seconds: { type: "string", default: "600" },
      subscribers: { type: "string", default: "8" },
      rate: { type: "string", default: "1000" },
      seed: { type: "string", default: "7" },
      samples: { type: "boolean", default: false },
    },
  });
  const report = await runSoak({
    seconds: Number(values.seconds),
    subscribers: Number(values.subscribers),
    rowsPerSecond: Number(values.rate),
    seed: Number(values.seed),
    log: (line) => console.error(line),
    samples: values.samples,
  });
  console.log(JSON.stringify(report, null, 2));
  for (const [name, m] of Object.entries(report.memory)) {
    console.error(
      `soak: ${name}: RSS ${m.rssFirstMiB.toFixed(0)} -> ${m.rssLastMiB.toFixed(0)} MiB ` +
        `(max ${m.rssMaxMiB.toFixed(0)}), slope over the last two thirds ` +
        `${m.rssSlopeMiBPerMin.toFixed(2)} MiB/min (heap used ${
          m.heapUsedSlopeMiBPerMin.toFixed(2)
        }, external ${m.externalSlopeMiBPerMin.toFixed(2)} MiB/min)`,
    );
  }
  const ok = report.failures.length === 0 && report.serverExit === 0 && report.rssMaxMiB < 256;
  return ok ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
