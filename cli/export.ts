/**
 * `cli.ts export ROOT/NAME --format arrow|parquet|ndjson --out FILE`: write a
 * range of a stream's log to an Arrow IPC file, a Parquet file or NDJSON.
 *
 * The log is read without its writer's lock and nothing in it is changed, so
 * an export runs beside a live server. The schema comes from `--schema`, else
 * from `ROOT/NAME/schema.json` (which a stream keeps beside its log); NDJSON
 * needs none.
 *
 * ```text
 * deno run -A cli/export.ts data/trades --format parquet --out trades.parquet
 * ```
 *
 * @module
 */

import { join } from "node:path";
import { LogCorruptError, LogEvictedError } from "../log/mod.ts";
import { ChunkCorruptError } from "../log/chunk/chunk.ts";
import { type ExportFormat, exportLog, type ExportProgress } from "../arrow/export.ts";
import { compileSchema } from "../schema/compile.ts";
import type { RowSchema } from "../schema/row_schema.ts";
import { SchemaError } from "../schema/schema_error.ts";
import { FilterError } from "../wire/filter.ts";
import { SCHEMA_FILE } from "../server/stream/stream.ts";
import { parseSchemaHistory } from "../log/schema_history.ts";
import { parseSince } from "../wire/since.ts";
import { parse, UsageError } from "./_args.ts";
import { Progress } from "./_progress.ts";

const HELP = `usage: deno run -A cli.ts export ROOT/NAME --format arrow|parquet|ndjson --out FILE
                 [--from N] [--to N] [--since T] [--until T] [--schema SCHEMA.json]
                 [--batch-rows N] [--batch-bytes N] [--where JSON]

Writes the rows of the stream's log at ROOT/NAME from offset --from through
--to (both inclusive; default: everything the log holds) to FILE. --since T
and --until T (RFC 3339, e.g. 2026-12-01T09:30:00Z, or µs since the epoch)
keep the rows appended at or after --since and before --until (exclusive),
found through the log's time index as a subscribe's since= is; with --from or
--to as well, the narrower range wins. A --since before the earliest row still
held, when older rows were dropped, is refused (exit 1).

  arrow    an Arrow IPC file, zstd-compressed buffers
  parquet  a Parquet file, zstd-compressed
  ndjson   [offset,msg] lines exactly as stored

Arrow and Parquet files have the column "offset" (int64) first, then the
schema's columns in order; pyarrow, DuckDB and Polars read them. The schema is
--schema, else ROOT/NAME/schema.json (kept there by the server); ndjson needs
none. Rows are written in batches (row groups) of --batch-rows (default 65536)
and at most --batch-bytes of rows as stored (default 67108864, 64 MiB; from
1 MiB to 1 GiB), so large rows (nested values) keep memory bounded.

--where JSON keeps only the rows the filter matches, as a subscribe's where=
does ('{"symbol":["BTC-USD","ETH-USD"],"size":{"gte":1}}'), in every format;
it needs the schema (ndjson too).

The log is read without taking its lock and is not changed: exporting beside a
live server is safe. Only rows on local disk are exported (not rows that are
only in the S3 archive). FILE is written under a temporary name and renamed
into place when complete. Exit 0 on success, 2 for a bad command line, 1 for
anything else (one line on stderr).`;

function offsetFlag(values: Record<string, unknown>, name: string): number | undefined {
  const raw = values[name] as string | undefined;
  if (raw === undefined) return undefined;
  if (!/^\d{1,16}$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new UsageError(`--${name} must be an offset (an integer >= 0), got ${raw}`);
  }
  return Number(raw);
}

// --since/--until T: RFC 3339 or µs (wire/since.ts), as a usage error when bad.
function timeFlag(values: Record<string, unknown>, name: string): number | undefined {
  const raw = values[name] as string | undefined;
  if (raw === undefined) return undefined;
  try {
    return parseSince(raw);
  } catch (err) {
    throw new UsageError(`--${name}: ${(err as Error).message}`);
  }
}

function fmtBytes(n: number): string {
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1 << 30) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  return `${(n / (1 << 30)).toFixed(2)} GiB`;
}

/** Reads and compiles the schema; `null` when none is given or kept. */
async function loadSchema(
  dir: string,
  flag: string | undefined,
): Promise<{ schema: RowSchema; path: string } | null> {
  const path = flag ?? join(dir, SCHEMA_FILE);
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (flag === undefined && err instanceof Deno.errors.NotFound) return null;
    throw new RuntimeError(`cannot read schema ${path}: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new RuntimeError(`schema ${path} is not JSON: ${(err as Error).message}`);
  }
  // A log whose schema grew keeps its history (log/schema_history.ts): its
  // rows are exported under the latest version (older rows' new columns null).
  if (typeof json === "object" && json !== null && Object.hasOwn(json, "versions")) {
    try {
      const versions = parseSchemaHistory(text, path);
      json = versions[versions.length - 1].schema;
    } catch (err) {
      throw new RuntimeError(`schema ${path}: ${(err as Error).message}`);
    }
  }
  try {
    return { schema: compileSchema(json), path };
  } catch (err) {
    if (err instanceof SchemaError) throw new RuntimeError(`${path}: ${err.message}`);
    throw err;
  }
}

/** A failure reported as one line with exit code 1. */
class RuntimeError extends Error {}

/**
 * Runs `export`; resolves with the exit code (0 done, 2 bad command line, 1
 * anything else), having printed one line on stderr for any failure.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { cmdExport } from "./export.ts";
 * const dir = await Deno.makeTempDir();
 * const args = [`${dir}/missing`, "--format", "ndjson", "--out", `${dir}/x.ndjson`];
 * equal(await cmdExport(args), 1); // and "streamcast export: no log at …" on stderr
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function cmdExport(args: string[]): Promise<number> {
  try {
    return await run(args);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`streamcast export: ${err.message} (see --help)`);
      return 2;
    }
    if (
      err instanceof RuntimeError || err instanceof LogEvictedError || err instanceof FilterError ||
      err instanceof LogCorruptError || err instanceof ChunkCorruptError ||
      err instanceof TypeError || err instanceof RangeError ||
      err instanceof Deno.errors.NotFound || err instanceof Deno.errors.PermissionDenied ||
      err instanceof Deno.errors.IsADirectory || err instanceof Deno.errors.NotADirectory
    ) {
      console.error(`streamcast export: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

async function run(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    from: { type: "string" },
    to: { type: "string" },
    since: { type: "string" },
    until: { type: "string" },
    format: { type: "string" },
    out: { type: "string" },
    schema: { type: "string" },
    "batch-rows": { type: "string" },
    "batch-bytes": { type: "string" },
    where: { type: "string" },
  }, 1);
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError("export takes one log folder ROOT/NAME");
  const dir = positionals[0];
  const format = values.format as string | undefined;
  if (format === undefined) throw new UsageError("--format arrow|parquet|ndjson is required");
  if (format !== "arrow" && format !== "parquet" && format !== "ndjson") {
    throw new UsageError(`--format must be arrow, parquet or ndjson, got ${format}`);
  }
  const out = values.out as string | undefined;
  if (!out) throw new UsageError("--out FILE is required");
  const from = offsetFlag(values, "from");
  const to = offsetFlag(values, "to");
  if (from !== undefined && to !== undefined && from > to) {
    throw new UsageError(`--from ${from} is after --to ${to}`);
  }
  const since = timeFlag(values, "since");
  const until = timeFlag(values, "until");
  if (since !== undefined && until !== undefined && since >= until) {
    throw new UsageError(`--since ${values.since} is not before --until ${values.until}`);
  }
  const rawBatch = values["batch-rows"] as string | undefined;
  let batchRows: number | undefined;
  if (rawBatch !== undefined) {
    batchRows = Number(rawBatch);
    if (!/^\d{1,8}$/.test(rawBatch) || batchRows < 1 || batchRows > 1 << 22) {
      throw new UsageError(`--batch-rows must be an integer from 1 to ${1 << 22}, got ${rawBatch}`);
    }
  }

  const rawBytes = values["batch-bytes"] as string | undefined;
  let batchBytes: number | undefined;
  if (rawBytes !== undefined) {
    batchBytes = Number(rawBytes);
    if (!/^\d{1,10}$/.test(rawBytes) || batchBytes < 1 << 20 || batchBytes > 1 << 30) {
      throw new UsageError(
        `--batch-bytes must be an integer from ${1 << 20} to ${1 << 30}, got ${rawBytes}`,
      );
    }
  }

  const where = values.where as string | undefined;
  let schema: RowSchema | null = null;
  if (format !== "ndjson" || values.schema !== undefined || where !== undefined) {
    const loaded = await loadSchema(dir, values.schema as string | undefined);
    if (loaded === null) {
      if (!(await isLog(dir))) throw new RuntimeError(`no log at ${dir} (log.json is missing)`);
      throw new UsageError(
        `no schema: pass --schema SCHEMA.json (${join(dir, SCHEMA_FILE)} does not exist)`,
      );
    }
    schema = loaded.schema;
  }

  const started = performance.now();
  // Drawn only when stderr is a terminal: a pipe or a log gets the last line alone.
  const progress = new Progress("export");
  const onProgress = (p: ExportProgress): void =>
    progress.update({
      rows: p.rows,
      offset: p.last,
      total: p.to,
      detail: `${fmtBytes(p.bytes)} written`,
    });
  let report;
  try {
    report = await exportLog(dir, schema, {
      format: format as ExportFormat,
      out,
      from,
      to,
      ...(since !== undefined ? { since } : {}),
      ...(until !== undefined ? { until } : {}),
      batchRows,
      ...(batchBytes !== undefined ? { batchBytes } : {}),
      onProgress,
      ...(where !== undefined ? { where } : {}),
    });
  } finally {
    if (progress.drawn) progress.done();
  }
  const seconds = (performance.now() - started) / 1000;
  const range = report.rows === 0 ? "no rows" : `offsets ${report.first}..${report.last}`;
  console.error(
    `export: wrote ${report.rows} rows (${range}) to ${out} as ${format}, ` +
      `${fmtBytes(report.bytes)} in ${seconds.toFixed(1)} s`,
  );
  return 0;
}

async function isLog(dir: string): Promise<boolean> {
  try {
    await Deno.stat(join(dir, "log.json"));
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotADirectory) {
      return false;
    }
    throw err;
  }
}

if (import.meta.main) Deno.exit(await cmdExport(Deno.args));
