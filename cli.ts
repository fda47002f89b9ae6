/**
 * The streamcast command line: this file names the commands and runs one;
 * each command is a file in `cli/`.
 *
 * ```text
 * deno run -A cli.ts serve   --stream NAME=SCHEMA.json ...   capture and serve streams
 * deno run -A cli.ts demo                                     a synthetic feed with the viewer
 * deno run -A cli.ts tail    URL [--offset N|earliest]        print a stream as NDJSON
 * deno run -A cli.ts head    URL                              print a stream's head
 * deno run -A cli.ts publish URL < rows.ndjson                send rows, acknowledged once durable
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

import { stderrLines } from "./common/stderr_lines.ts";
import { UsageError } from "./cli/_args.ts";
import { cmdServe } from "./cli/serve/serve.ts";
import { cmdDemo } from "./cli/demo.ts";
import { cmdTail } from "./cli/tail.ts";
import { cmdHead } from "./cli/head.ts";
import { cmdStreams } from "./cli/streams.ts";
import { cmdPublish } from "./cli/publish.ts";
import { cmdInspect } from "./cli/inspect.ts";
import { cmdVerify } from "./cli/verify.ts";
import { cmdExport } from "./cli/export.ts";
import { cmdRestore } from "./cli/restore.ts";

interface Command {
  /** Runs the command with its arguments; resolves with the exit code. */
  run(args: string[]): Promise<number>;
  /** One line for the usage. */
  summary: string;
}

/** Every command, in the order the usage lists them. */
const COMMANDS: Record<string, Command> = {
  serve: {
    run: cmdServe,
    summary: "capture feeds into durable streams and serve them over WebSocket",
  },
  demo: { run: cmdDemo, summary: 'a synthetic trade feed on stream "trades", with the web viewer' },
  tail: { run: cmdTail, summary: "print a stream as NDJSON [offset,msg] lines" },
  head: { run: cmdHead, summary: "print a stream's head (end offset, subscribers, schema)" },
  streams: {
    run: cmdStreams,
    summary: "list a server's streams; create and delete streams while it serves",
  },
  publish: {
    run: cmdPublish,
    summary: "send NDJSON rows from stdin to a stream, acknowledged once durable",
  },
  inspect: { run: cmdInspect, summary: "list a log's segments, offsets and sizes" },
  verify: {
    run: cmdVerify,
    summary: "check every record of a log; exit 1 naming the first bad one",
  },
  export: { run: cmdExport, summary: "write a range of a log to Arrow IPC, Parquet or NDJSON" },
  restore: {
    run: cmdRestore,
    summary: "rebuild a stream's log from its S3 archive (producer failover)",
  },
};

const USAGE = `streamcast — a replayable WebSocket multicaster

usage: deno run -A cli.ts COMMAND [options]

commands:
${Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(8)} ${c.summary}`).join("\n")}

Run 'deno run -A cli.ts COMMAND --help' for a command's options.`;

/** Runs the command line; resolves with the exit code. */
export async function main(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  const run = Object.hasOwn(COMMANDS, command) ? COMMANDS[command].run : undefined;
  if (!run) {
    console.error(`streamcast: unknown command ${command}\n\n${USAGE}`);
    return 2;
  }
  try {
    return await run(rest);
  } catch (err) {
    // The log lines queued before the failure go out before its line.
    stderrLines.flush();
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

if (import.meta.main) {
  const code = await main(Deno.args);
  stderrLines.flush();
  Deno.exit(code);
}
