/**
 * The schema history a stream keeps beside its log, and the rule for a new
 * schema (a schema that can grow: docs/SPEC.md §3.12).
 *
 * @module
 */

import { join } from "node:path";
import { type Log, LogCorruptError } from "../../log/mod.ts";
import {
  encodeSchemaHistory,
  readSchemaHistory,
  SCHEMA_FILE,
  type SchemaVersion,
  writeSchemaHistory,
} from "../../log/schema_history.ts";
import { compileSchema } from "../../schema/compile.ts";
import { schemaChange } from "../../schema/evolution.ts";
import type { RowSchema } from "../../schema/row_schema.ts";

/**
 * Keeps the stream's schema history beside its log (`ROOT/NAME/schema.json`,
 * see `log/schema_history.ts`), so that the log can be read (exported,
 * inspected) without the server's flags. A log that holds rows takes a new
 * schema only when it adds nullable columns at the end (`schema/evolution.ts`):
 * the new version applies from the log's end offset, and the rows already
 * stored keep their bytes. Any other change is refused with one line naming
 * the column and the change. A version no row was written under yet is
 * replaced rather than kept. The file's checksum is kept in
 * `schema.json.crc32`: a damaged schema file of a log that holds rows is
 * refused with `LogCorruptError` naming it. Returns the history.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { Log } from "../../log/mod.ts";
 * import { compileSchema } from "../../schema/compile.ts";
 * import { keepSchema } from "./kept_schema.ts";
 * const dir = await Deno.makeTempDir();
 * const log = await Log.open(dir);
 * const schema = compileSchema({ type: "object", properties: { v: { type: "number" } }, required: ["v"] });
 * deepStrictEqual((await keepSchema(log, schema)).map((v) => v.from), [1]);
 * await log.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function keepSchema(log: Log, schema: RowSchema): Promise<SchemaVersion[]> {
  const path = join(log.dir, SCHEMA_FILE);
  const hasRows = log.endOffset > log.firstOffset;
  let kept: Awaited<ReturnType<typeof readSchemaHistory>> = null;
  try {
    kept = await readSchemaHistory(log.dir);
  } catch (err) {
    // A damaged file matters only once rows were written under it.
    if (!(err instanceof LogCorruptError) || hasRows) throw err;
  }
  let versions: SchemaVersion[] = [{ from: 1, schema: schema.json }];
  if (kept !== null && hasRows) {
    // Versions from the end on hold no row yet: the new schema replaces them.
    const held = kept.versions.filter((v, i) => i === 0 || v.from < log.endOffset);
    const last = held[held.length - 1];
    let before: RowSchema | null = null;
    try {
      before = compileSchema(last.schema);
    } catch {
      // A kept schema this server cannot compile says nothing of the rows: replaced.
    }
    const change = before === null ? { kind: "same" as const } : schemaChange(before, schema);
    if (change.kind === "refused") {
      throw new TypeError(
        `stream "${log.name}": the schema's columns differ from those its log was written with ` +
          `(${path}): ${change.detail}; a log takes only nullable columns added at the end — ` +
          "use a new stream name, or move the old log away",
      );
    }
    versions = change.kind === "same"
      ? [...held.slice(0, -1), { from: last.from, schema: schema.json }]
      : [...held, { from: log.endOffset, schema: schema.json }];
  }
  if (kept === null || !kept.checked || kept.text !== encodeSchemaHistory(versions)) {
    await writeSchemaHistory(log.dir, versions);
  }
  return versions;
}
