/**
 * The streamcast command line.
 *
 * ```text
 * deno run -A cli.ts serve   --stream NAME=SCHEMA.json ...   capture and serve streams
 * deno run -A cli.ts demo                                     a synthetic feed with the viewer
 * deno run -A cli.ts tail    URL [--offset N|earliest]        print a stream as NDJSON
 * deno run -A cli.ts head    URL                              print a stream's head
 * deno run -A cli.ts inspect ROOT/NAME                        segments, offsets, sizes
 * deno run -A cli.ts verify  ROOT/NAME                        check every record
 * deno run -A cli.ts export  ROOT/NAME --format parquet --out F  a range as Arrow/Parquet/NDJSON
 * deno run -A cli.ts restore NAME --root DIR --archive s3://…   rebuild a log from its archive
 * ```
 *
 * Run `deno run -A cli.ts COMMAND --help` for a command's flags.
 *
 * @module
 */

import { DEFAULT_MAX_PRODUCERS, inspectLog, type LogReport, verifyLog } from "./log/mod.ts";
import { parse, UsageError } from "./cli/_args.ts";
import { cmdServe } from "./cli/serve.ts";
import { cmdHead, cmdTail } from "./cli/tail.ts";
import { cmdRestore } from "./cli/restore.ts";
import { cmdExport } from "./cli/export.ts";
import { cmdDemo } from "./cli/demo.ts";
import { cmdPublish } from "./cli/publish.ts";
import { Progress } from "./cli/_progress.ts";

const USAGE = `streamcast — a replayable WebSocket multicaster

usage: deno run -A cli.ts COMMAND [options]

commands:
  serve    capture feeds into durable streams and serve them over WebSocket
  demo     a synthetic trade feed on stream "trades", with the web viewer
  tail     print a stream as NDJSON [offset,msg] lines
  head     print a stream's head (end offset, subscribers, schema)
  publish  send NDJSON rows from stdin to a stream, acknowledged once durable
  inspect  list a log's segments, offsets and sizes
  verify   check every record of a log; exit 1 naming the first bad one
  export   write a range of a log to Arrow IPC, Parquet or NDJSON
  restore  rebuild a stream's log from its S3 archive (producer failover)

Run 'deno run -A cli.ts COMMAND --help' for a command's options.`;

function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1 << 30) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  return `${(n / (1 << 30)).toFixed(2)} GiB`;
}

function fmtTime(us: number | null): string {
  return us ? new Date(us / 1000).toISOString() : "-";
}

function printReport(r: LogReport, out: (s: string) => void): void {
  out(`log ${r.dir}  stream "${r.name}"  id ${r.streamId}`);
  out(`segments: ${r.segments.length}  chunks: ${r.manifest?.chunks.length ?? 0}  rows: ${r.rows}`);
  if (r.manifest) {
    const m = r.manifest;
    const bytes = m.chunks.reduce((n, c) => n + c.bytes, 0);
    out(
      `manifest: generation ${m.generation}  through ${m.through}  ${fmtBytes(bytes)} in chunks` +
        (m.retired.length ? `  ${m.retired.length} retired` : ""),
    );
    for (const c of m.chunks) {
      out(
        `  chunk ${c.sha256.slice(0, 16)}…  offsets ${c.first}..${c.last}  rows ${c.rows}  ` +
          `${fmtBytes(c.bytes)}  ${fmtTime(c.first_ts)} .. ${fmtTime(c.last_ts)}`,
      );
    }
  }
  if (r.producers) {
    const p = r.producers;
    out(
      `producers.log: ${p.records} records  ${p.producers} producers` +
        (p.pending ? `  ${p.pending} of an unacknowledged commit (open drops them)` : "") +
        (p.tailBytes ? `  torn tail ${p.tailBytes} B (open cuts it)` : ""),
    );
  }
  for (const s of r.segments) {
    const range = s.lastOffset === null ? "empty" : `${s.firstOffset}..${s.lastOffset}`;
    out(
      `  ${s.file}  ${s.sealed ? "sealed" : "active"}  offsets ${range}  rows ${s.rows}  ` +
        `${fmtBytes(s.bytes)}  beacons ${s.beacons}` +
        (s.tailBytes ? `  unfinished tail ${s.tailBytes} B` : "") +
        (s.lastTimeUs ? `  last append ${fmtTime(s.lastTimeUs)}` : ""),
    );
  }
}

async function cmdInspect(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { json: { type: "boolean" } }, 1);
  if (values.help || positionals.length !== 1) {
    console.log(`usage: deno run -A cli.ts inspect ROOT/NAME [--json]

Lists the log's chunks (from its manifest) and segments (offsets, rows,
sizes, beacons), without checking every record (see verify).`);
    return values.help ? 0 : 2;
  }
  const report = await inspectLog(positionals[0]);
  if (values.json) console.log(JSON.stringify(report, null, 2));
  else printReport(report, console.log);
  if (report.error) console.error(`streamcast: ${report.error.message}`);
  return report.error ? 1 : 0;
}

async function cmdVerify(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { "max-producers": { type: "string" } }, 1);
  if (values.help || positionals.length !== 1) {
    console.log(`usage: deno run -A cli.ts verify ROOT/NAME [--max-producers N]

Reads every record of every segment and checks checksums, terminators,
offsets, beacons and end marks; checks every chunk's SHA-256 and lines against
the manifest, and the producer journal (producers.log): its checksums, every
record's rows inside the log's offsets, seqs increasing per producer
(--max-producers: the server's, default ${DEFAULT_MAX_PRODUCERS}). Exits 0 when all is well, 1 naming the file
and byte position of the first problem. Safe to run beside a live server.`);
    return values.help ? 0 : 2;
  }
  const max = values["max-producers"];
  const maxProducers = max === undefined ? DEFAULT_MAX_PRODUCERS : Number(max);
  if (!Number.isSafeInteger(maxProducers) || maxProducers < 1) {
    console.error(`streamcast: --max-producers wants an integer ≥ 1, got ${JSON.stringify(max)}`);
    return 2;
  }
  // A progress line on stderr, drawn only when it is a terminal.
  const progress = new Progress("verify");
  const report = await verifyLog(positionals[0], {
    onProgress: (p) => progress.update({ rows: p.rows }),
    maxProducers,
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

const COMMANDS: Record<string, (args: string[]) => Promise<number>> = {
  serve: cmdServe,
  demo: cmdDemo,
  tail: cmdTail,
  head: cmdHead,
  publish: cmdPublish,
  inspect: cmdInspect,
  restore: cmdRestore,
  export: cmdExport,
  verify: cmdVerify,
};

/** Runs the command line; resolves with the exit code. */
export async function main(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  const run = COMMANDS[command];
  if (!run) {
    console.error(`streamcast: unknown command ${command}\n\n${USAGE}`);
    return 2;
  }
  try {
    return await run(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`streamcast ${command}: ${err.message} (see --help)`);
      return 2;
    }
    if (err instanceof Deno.errors.NotFound) {
      console.error(`streamcast ${command}: ${err.message}`);
      return 1;
    }
    // Anything else: one line naming what failed (the stack with STREAMCAST_DEBUG=1).
    let debug = false;
    try {
      debug = Deno.env.get("STREAMCAST_DEBUG") === "1";
    } catch {
      // no env permission: no stack
    }
    console.error(
      `streamcast ${command}: ${
        debug && err instanceof Error ? err.stack : err instanceof Error ? err.message : err
      }`,
    );
    return 1;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
