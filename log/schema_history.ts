/**
 * The schema history a log keeps beside its rows, `schema.json`: every
 * version of the stream's schema with the first offset it applies from.
 * The text is kept with its checksum in the sidecar `schema.json.crc32`
 * (see `disk/meta_file.ts`). Two forms, both read:
 *
 * ```text
 * form 1 (one version; every log before schema evolution, and every log
 *         whose schema never grew): the bare JSON Schema, pretty-printed,
 *         which other tools read as is. It applies from offset 1.
 *   {
 *     "type": "object",
 *     ...
 *   }
 *
 * form 2 (more than one version): one object, pretty-printed
 *   {
 *     "format": 2,
 *     "versions": [
 *       { "from": 1, "schema": { ...the first schema... } },
 *       { "from": 5001, "schema": { ...the same columns and more, at the end... } }
 *     ]
 *   }
 *   versions in offset order, "from" strictly increasing, the first from 1;
 *   a version applies from its "from" up to the next version's.
 * ```
 *
 * A log written before versions existed is form 1 and opens unchanged: the
 * file is rewritten only when the schema grows (or its annotations change).
 * Which changes are allowed is the stream's business (`schema/evolution.ts`);
 * this module only keeps the list.
 *
 * @module
 */

import { join } from "node:path";
import { LogCorruptError } from "./errors.ts";
import { readCheckedText, writeCheckedText } from "./disk/meta_file.ts";

/** The name of the schema file kept in a stream's log folder. */
export const SCHEMA_FILE = "schema.json";
/** The `format` of a schema history with more than one version. */
export const SCHEMA_HISTORY_FORMAT = 2;

/**
 * One version of a stream's schema.
 */
export interface SchemaVersion {
  /** The first offset the version applies to (1 for the first version). */
  from: number;
  /** The JSON Schema as declared. */
  schema: Record<string, unknown>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Parses the text of a schema file (either form); `path` names it in errors
 * ({@linkcode LogCorruptError} for text that is neither form).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { parseSchemaHistory } from "./schema_history.ts";
 * deepStrictEqual(parseSchemaHistory('{"type":"object"}', "schema.json"), [
 *   { from: 1, schema: { type: "object" } },
 * ]);
 * ```
 */
export function parseSchemaHistory(text: string, path: string): SchemaVersion[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new LogCorruptError(path, 0, "not valid JSON");
  }
  if (!isObject(parsed)) throw new LogCorruptError(path, 0, "not a JSON object");
  if (!Object.hasOwn(parsed, "versions")) return [{ from: 1, schema: parsed }];
  if (parsed.format !== SCHEMA_HISTORY_FORMAT) {
    throw new LogCorruptError(
      path,
      0,
      `schema history format ${JSON.stringify(parsed.format)} is not ${SCHEMA_HISTORY_FORMAT} ` +
        "(written by a newer streamcast?)",
    );
  }
  const versions = parsed.versions;
  if (!Array.isArray(versions) || versions.length === 0) {
    throw new LogCorruptError(path, 0, '"versions" is not a non-empty list');
  }
  let last = 0;
  return versions.map((v, i) => {
    if (!isObject(v) || !Number.isSafeInteger(v.from) || !isObject(v.schema)) {
      throw new LogCorruptError(path, 0, `version ${i} is not {"from":N,"schema":{…}}`);
    }
    const from = v.from as number;
    if (i === 0 ? from !== 1 : from <= last) {
      throw new LogCorruptError(
        path,
        0,
        `version ${i} starts at ${from}, ` +
          (i === 0 ? "not at 1" : `not after the previous version's ${last}`),
      );
    }
    last = from;
    return { from, schema: v.schema };
  });
}

/**
 * The text of a schema file holding `versions`: form 1 for one version,
 * else form 2 (see the module doc).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { encodeSchemaHistory } from "./schema_history.ts";
 * // One version from offset 1: the bare schema, pretty-printed.
 * const text = encodeSchemaHistory([{ from: 1, schema: { type: "object" } }]);
 * equal(text, '{\n  "type": "object"\n}\n');
 * ```
 */
export function encodeSchemaHistory(versions: readonly SchemaVersion[]): string {
  if (versions.length === 1 && versions[0].from === 1) {
    return JSON.stringify(versions[0].schema, null, 2) + "\n";
  }
  const body = {
    format: SCHEMA_HISTORY_FORMAT,
    versions: versions.map(({ from, schema }) => ({ from, schema })),
  };
  return JSON.stringify(body, null, 2) + "\n";
}

/**
 * Reads the schema history of the log in `dir`; `null` when it keeps none.
 * `text` is the file as read (to tell whether a rewrite changes it);
 * `checked` whether it had its sidecar checksum.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { readSchemaHistory, writeSchemaHistory } from "./schema_history.ts";
 * const dir = await Deno.makeTempDir();
 * await writeSchemaHistory(dir, [{ from: 1, schema: { type: "object" } }, { from: 7, schema: { type: "object" } }]);
 * deepStrictEqual((await readSchemaHistory(dir))?.versions.map((v) => v.from), [1, 7]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readSchemaHistory(
  dir: string,
): Promise<{ versions: SchemaVersion[]; text: string; checked: boolean } | null> {
  const path = join(dir, SCHEMA_FILE);
  const kept = await readCheckedText(path);
  if (kept === null) return null;
  return { versions: parseSchemaHistory(kept.text, path), text: kept.text, checked: kept.checked };
}

/**
 * Writes the schema history of the log in `dir` (crash-safe, with its
 * sidecar checksum).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { readCheckedText } from "./disk/meta_file.ts";
 * import { writeSchemaHistory } from "./schema_history.ts";
 * const dir = await Deno.makeTempDir();
 * await writeSchemaHistory(dir, [{ from: 1, schema: { type: "object" } }]);
 * equal((await readCheckedText(`${dir}/schema.json`))?.checked, true); // its sidecar agrees
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeSchemaHistory(
  dir: string,
  versions: readonly SchemaVersion[],
): Promise<void> {
  await writeCheckedText(join(dir, SCHEMA_FILE), encodeSchemaHistory(versions));
}
