/**
 * `cli.ts verify ROOT/NAME`: read every record of a log and check it; exit 1
 * naming the file and byte position of the first problem. Safe beside a live
 * server.
 *
 * @module
 */

import { DEFAULT_MAX_PRODUCER_HOLDERS, DEFAULT_MAX_PRODUCERS, verifyLog } from "../log/mod.ts";
import { parse } from "./_args.ts";
import { printReport } from "./_log_report.ts";
import { Progress } from "./_progress.ts";

const HELP =
  `usage: deno run -A cli.ts verify ROOT/NAME [--max-producers N] [--max-producer-holders N]

Reads every record of every segment and checks checksums, terminators,
offsets, beacons and end marks; checks every chunk's SHA-256 and lines against
the manifest, and the producer journal (producers.log): its checksums, every
record's rows inside the log's offsets, seqs increasing per producer
(--max-producers: the server's, default ${DEFAULT_MAX_PRODUCERS}; --max-producer-holders: the
server's, default ${DEFAULT_MAX_PRODUCER_HOLDERS}). Exits 0 when all is well, 1 naming the file
and byte position of the first problem. Safe to run beside a live server.`;

/** Runs `verify`; resolves with the exit code. */
export async function cmdVerify(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    "max-producers": { type: "string" },
    "max-producer-holders": { type: "string" },
  }, 1);
  if (values.help || positionals.length !== 1) {
    console.log(HELP);
    return values.help ? 0 : 2;
  }
  const max = values["max-producers"];
  const maxProducers = max === undefined ? DEFAULT_MAX_PRODUCERS : Number(max);
  if (!Number.isSafeInteger(maxProducers) || maxProducers < 1) {
    console.error(`streamcast: --max-producers wants an integer ≥ 1, got ${JSON.stringify(max)}`);
    return 2;
  }
  const holders = values["max-producer-holders"];
  const maxProducerHolders = holders === undefined ? DEFAULT_MAX_PRODUCER_HOLDERS : Number(holders);
  if (!Number.isSafeInteger(maxProducerHolders) || maxProducerHolders < 1) {
    console.error(
      `streamcast: --max-producer-holders wants an integer ≥ 1, got ${JSON.stringify(holders)}`,
    );
    return 2;
  }
  // A progress line on stderr, drawn only when it is a terminal.
  const progress = new Progress("verify");
  const report = await verifyLog(positionals[0], {
    onProgress: (p) => progress.update({ rows: p.rows }),
    maxProducers,
    maxProducerHolders,
  });
  if (progress.drawn) progress.done();
  printReport(report, console.log);
  if (report.error) {
    console.error(`streamcast: verify failed: ${report.error.message}`);
    return 1;
  }
  console.log(`ok: ${report.rows} rows checked`);
  return 0;
}
