/**
 * `cli.ts inspect ROOT/NAME`: a log's chunks and segments (offsets, rows,
 * sizes, beacons), read from its manifest and segment headers without checking
 * every record (that is `verify`).
 *
 * @module
 */

import { inspectLog } from "../log/mod.ts";
import { parse } from "./_args.ts";
import { printReport } from "./_log_report.ts";

const HELP = `usage: deno run -A cli.ts inspect ROOT/NAME [--json]

Lists the log's chunks (from its manifest) and segments (offsets, rows,
sizes, beacons), without checking every record (see verify).`;

/** Runs `inspect`; resolves with the exit code. */
export async function cmdInspect(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { json: { type: "boolean" } }, 1);
  if (values.help || positionals.length !== 1) {
    console.log(HELP);
    return values.help ? 0 : 2;
  }
  const report = await inspectLog(positionals[0]);
  if (values.json) console.log(JSON.stringify(report, null, 2));
  else printReport(report, console.log);
  if (report.error) console.error(`streamcast: ${report.error.message}`);
  return report.error ? 1 : 0;
}
