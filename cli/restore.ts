/**
 * `cli.ts restore NAME --root DIR --archive s3://…`: rebuild a stream's log
 * from its archive on a new machine (producer failover). The stream id is
 * kept and offsets are fenced 2^20 above the archived end.
 *
 * @module
 */

import { join } from "node:path";
import { restoreLog } from "../log/mod.ts";
import { isStreamName } from "../wire/stream_name.ts";
import { parse, UsageError } from "./_args.ts";
import { Progress } from "./_progress.ts";
import { S3_FLAGS, S3_FLAGS_HELP, s3FlagOptions } from "./_s3_flags.ts";

const HELP = `usage: deno run -A cli.ts restore NAME --root DIR --archive s3://BUCKET/PREFIX
                 [--hydrate] [--s3-endpoint URL] [--s3-path-style] [--s3-timeout S]

Rebuilds the log of stream NAME under DIR from the archive: the stream id is
kept, and the next offset is the archived end plus 2^20, so that no offset is
ever issued twice with different data (consumers resume from their cursors and
see a gap). Refuses if DIR/NAME already holds a log. NAME may be "" (the
unnamed stream, stored as DIR/_).

  --hydrate          copy every archived chunk back to local disk (otherwise
                     history stays in the archive; serve it with --replay-archive)
${S3_FLAGS_HELP}

Credentials and region come from the AWS SDK's chain (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION, profiles).

Stop the old producer first: a restore cannot tell that another host still
writes the stream.`;

/** Runs `restore`; resolves with the exit code. */
export async function cmdRestore(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    root: { type: "string" },
    archive: { type: "string" },
    hydrate: { type: "boolean" },
    ...S3_FLAGS,
  }, 1);
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError("restore takes one stream NAME");
  const name = positionals[0];
  if (!isStreamName(name)) throw new UsageError(`invalid stream name ${JSON.stringify(name)}`);
  const root = values.root as string | undefined;
  const uri = values.archive as string | undefined;
  if (!root) throw new UsageError("--root DIR is required");
  if (!uri) throw new UsageError("--archive s3://BUCKET/PREFIX is required");
  const s3 = s3FlagOptions(values);
  const dir = join(root, name === "" ? "_" : name);
  // What the restore is doing, redrawn on one line when stderr is a terminal; quiet otherwise.
  const progress = new Progress("restore");
  try {
    const { log, report } = await restoreLog(dir, name, {
      archive: { uri, ...s3 },
      hydrate: values.hydrate === true,
      logOptions: { chunks: true, archiveWaitMs: 0 },
      progress: (m) => progress.update({ detail: m }),
    });
    if (progress.drawn) progress.done();
    await log.close();
    console.log(JSON.stringify({ stream: name, dir, ...report }));
    console.error(
      `restore: stream ${JSON.stringify(name)} restored in ${dir}; archived through ` +
        `${report.archivedThrough}, next offset ${report.nextOffset}. Serve it with ` +
        `--root ${root} --stream ${name}=SCHEMA.json --archive ${uri}`,
    );
    return 0;
  } catch (err) {
    if (progress.drawn) progress.done();
    if (err instanceof Deno.errors.AlreadyExists || err instanceof Deno.errors.NotFound) {
      console.error(`streamcast restore: ${err.message}`);
      return 1;
    }
    if (err instanceof TypeError) {
      console.error(`streamcast restore: ${err.message}`);
      return 2;
    }
    const e = err as { name?: string; message?: string };
    console.error(
      `streamcast restore: cannot read the archive: ${e.name ?? "Error"}: ${e.message ?? err}`,
    );
    return 1;
  }
}
