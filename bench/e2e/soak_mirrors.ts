/**
 * The mirrors' long soak: a real primary (`serve --stdin --publish`) fed
 * on stdin and by a WebSocket and an HTTP publisher, two real followers, and
 * subscribers (single, batch, batch+zstd, the client library with a zstd
 * dictionary; unfiltered and filtered) joining, stalling, leaving and moving
 * between the three servers. Checks every row every subscriber got, every
 * acked frame, both followers against the primary, `verify` on all three, and
 * samples each server's memory all along (tests/harness/soak/soak_mirrors.ts).
 *
 * ```text
 * deno run -A bench/e2e/soak_mirrors.ts [--seconds 1800] [--subscribers 8] [--rate 1000] [--seed N] [--out report.json]
 * ```
 *
 * Prints a progress line every minute and, at the end, one line per server
 * process: RSS first/last/max and its slope over the last two thirds of the
 * run (the last 20 minutes of 30), with the JavaScript heap's and external
 * memory's slopes beside it, to tell a JavaScript leak from native growth.
 * `--out` writes the whole report, with every memory sample. Exits 1 when it
 * found a problem or a server's RSS went over 256 MiB.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { runMirrorsSoak } from "../../tests/harness/soak/soak_mirrors.ts";

/** Runs the soak with command-line flags; resolves with the exit code. */
export async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      seconds: { type: "string", default: "1800" },
      subscribers: { type: "string", default: "8" },
      rate: { type: "string", default: "1000" },
      seed: { type: "string" },
      out: { type: "string" },
    },
  });
  const seed = values.seed === undefined
    ? crypto.getRandomValues(new Uint32Array(1))[0]
    : Number(values.seed) >>> 0;
  console.error(`soak2: seed ${seed}, ${values.seconds} s`);
  const t0 = Date.now();
  const report = await runMirrorsSoak({
    seconds: Number(values.seconds),
    subscribers: Number(values.subscribers),
    rowsPerSecond: Number(values.rate),
    seed,
    log: (line) => console.error(line),
    progressEvery: 60,
    samples: values.out !== undefined,
  });
  if (values.out) await Deno.writeTextFile(values.out, JSON.stringify(report, null, 1));
  const { memorySamples: _, ...summary } = report;
  console.log(JSON.stringify(summary, null, 2));
  console.error(
    `soak2: ${report.rows} rows (${report.stdinRows} from stdin, ${report.publishedFrames} ` +
      `published frames), ${report.sessions} sessions (${report.visits.join("/")}), ` +
      `${report.rowsDelivered} rows delivered, ${report.failures.length} failures, ` +
      `${((Date.now() - t0) / 60000).toFixed(1)} min`,
  );
  for (const [name, m] of Object.entries(report.memory)) {
    console.error(
      `soak2: ${name}: RSS ${m.rssFirstMiB.toFixed(0)} -> ${m.rssLastMiB.toFixed(0)} MiB ` +
        `(max ${m.rssMaxMiB.toFixed(0)}), slope over the last two thirds ` +
        `${m.rssSlopeMiBPerMin.toFixed(2)} MiB/min (heap used ${
          m.heapUsedSlopeMiBPerMin.toFixed(2)
        }, external ${m.externalSlopeMiBPerMin.toFixed(2)} MiB/min)`,
    );
  }
  const rssOk = Object.values(report.memory).every((m) => m.rssMaxMiB < 256);
  const ok = report.failures.length === 0 && report.exits.every((c) => c === 0) && rssOk;
  return ok ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
