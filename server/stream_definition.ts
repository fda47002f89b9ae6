/**
 * A stream's definition, as `PUT /_/streams/{name}` takes it and
 * `ROOT/streams.json` keeps it: its schema, whether it takes network
 * publishes, whether it is ephemeral, whether it keeps an Iceberg table,
 * its retention bounds and its key columns. {@linkcode parseDefinition}
 * checks a body (every problem named), {@linkcode compareDefinitions} says
 * whether a definition given again is the same, grows the schema only (§14's
 * rule: nullable columns added at the end), or conflicts.
 *
 * @module
 */

import { compileSchema } from "../schema/compile.ts";
import { parseRetainAge, parseRetainBytes } from "../common/retention_bounds.ts";
import { inertForm } from "../schema/inert_form.ts";
import { schemaChange } from "../schema/evolution.ts";
import { SchemaError } from "../schema/schema_error.ts";
import type { RowSchema } from "../schema/row_schema.ts";
import { keyColumnsOf } from "../schema/key_check.ts";

/** A stream's definition, checked, every field present. */
export interface StreamDefinition {
  /** The JSON Schema of its rows. */
  readonly schema: Record<string, unknown>;
  /** Opened for network publishing (`POST /{name}`, the publish socket). */
  readonly publish: boolean;
  /** Without a log (nothing replayable). */
  readonly ephemeral: boolean;
  /** Keeps an Apache Iceberg table of its sealed rows. */
  readonly iceberg: boolean;
  /** Local history kept by age, seconds; null: the server's. */
  readonly retainAge: number | null;
  /** Local history kept by size, bytes; null: the server's. */
  readonly retainBytes: number | null;
  /** Its key columns (the latest row per key); null: none. */
  readonly key: readonly string[] | null;
}

/** The fields a definition may have. */
export const DEFINITION_FIELDS: readonly string[] = [
  "schema",
  "publish",
  "ephemeral",
  "iceberg",
  "retainAge",
  "retainBytes",
  "key",
];

/** The largest definition body taken, bytes (a schema of a few hundred columns fits). */
export const MAX_DEFINITION_BYTES = 1 << 20;

/** A definition that cannot be taken; the message names what is wrong. */
export class DefinitionError extends Error {
  /** Makes one. */
  constructor(message: string) {
    super(message);
    this.name = "DefinitionError";
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * A retention age, seconds: a number of seconds, or a string such as `90s`,
 * `15m`, `24h`, `7d`, 1 s to 100 years (`common/retention_bounds.ts`); null
 * for null or absent.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { durationSeconds } from "./stream_definition.ts";
 * equal(durationSeconds("15m", "retainAge"), 900);
 * equal(durationSeconds(30, "retainAge"), 30);
 * ```
 */
export function durationSeconds(v: unknown, what: string): number | null {
  if (v === undefined || v === null) return null;
  try {
    return parseRetainAge(v, what);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    throw new DefinitionError(err.message);
  }
}

/**
 * A retention size, bytes: a number of bytes, or a string such as `500MB`,
 * `2GiB`, 1 KiB to 1 PiB (`common/retention_bounds.ts`); null for null or
 * absent.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { sizeBytes } from "./stream_definition.ts";
 * equal(sizeBytes("2GiB", "retainBytes"), 2 ** 31);
 * equal(sizeBytes(4096, "retainBytes"), 4096);
 * ```
 */
export function sizeBytes(v: unknown, what: string): number | null {
  if (v === undefined || v === null) return null;
  try {
    return parseRetainBytes(v, what);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    throw new DefinitionError(err.message);
  }
}

function flag(body: Record<string, unknown>, key: string): boolean {
  const v = body[key];
  if (v === undefined) return false;
  if (typeof v !== "boolean") {
    throw new DefinitionError(`${key} must be true or false, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * Checks a definition (the parsed JSON of a `PUT` body, or an entry of
 * `streams.json`): only `schema` is required; a {@linkcode DefinitionError}
 * names the first problem (unknown fields all at once).
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { parseDefinition } from "./stream_definition.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * const d = parseDefinition({ schema, publish: true, retainAge: "1h" });
 * equal(d.retainAge, 3600);
 * throws(() => parseDefinition({ schema, colour: 1, size: 2 }), {
 *   message: 'unknown fields "colour", "size" (known: schema, publish, ephemeral, iceberg, retainAge, retainBytes, key)',
 * });
 * ```
 */
export function parseDefinition(body: unknown): StreamDefinition {
  if (!isObject(body)) throw new DefinitionError(`the body must be a JSON object {"schema": {…}}`);
  const unknown = Object.keys(body).filter((k) => !DEFINITION_FIELDS.includes(k));
  if (unknown.length > 0) {
    throw new DefinitionError(
      `unknown field${unknown.length > 1 ? "s" : ""} ${
        unknown.map((k) => JSON.stringify(k.slice(0, 40))).join(", ")
      } (known: ${DEFINITION_FIELDS.join(", ")})`,
    );
  }
  if (body.schema === undefined) throw new DefinitionError(`"schema" is required`);
  if (!isObject(body.schema)) throw new DefinitionError(`schema must be a JSON Schema object`);
  let compiled: RowSchema;
  try {
    compiled = compileSchema(body.schema);
  } catch (err) {
    if (!(err instanceof SchemaError)) throw err;
    throw new DefinitionError(`schema is refused: ${err.message}`);
  }
  const publish = flag(body, "publish");
  const ephemeral = flag(body, "ephemeral");
  const iceberg = flag(body, "iceberg");
  const retainAge = durationSeconds(body.retainAge, "retainAge");
  const retainBytes = sizeBytes(body.retainBytes, "retainBytes");
  let key: string[] | null = null;
  if (body.key !== undefined && body.key !== null) {
    if (!Array.isArray(body.key) || body.key.length === 0) {
      throw new DefinitionError(`key must be a non-empty array of column names`);
    }
    for (const k of body.key) {
      if (typeof k !== "string") {
        throw new DefinitionError(`key: ${JSON.stringify(k)} is not a column name`);
      }
    }
    try {
      // The key columns' own rule: required, not nullable, a string, an integer or a boolean.
      keyColumnsOf(compiled, body.key);
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      throw new DefinitionError(`key: ${err.message}`);
    }
    key = [...body.key];
  }
  if (ephemeral) {
    const durableOnly = [
      publish && "publish",
      iceberg && "iceberg",
      retainAge !== null && "retainAge",
      retainBytes !== null && "retainBytes",
      key !== null && "key",
    ].filter((x) => x !== false);
    if (durableOnly.length > 0) {
      throw new DefinitionError(
        `an ephemeral stream has no log: ${durableOnly.join(", ")} need${
          durableOnly.length > 1 ? "" : "s"
        } a durable stream`,
      );
    }
  }
  return {
    schema: body.schema,
    publish,
    ephemeral,
    iceberg,
    retainAge,
    retainBytes,
    key,
  };
}

/**
 * A definition as JSON, every field present (what `streams.json` and
 * `GET /_/streams` show).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { definitionJson, parseDefinition } from "./stream_definition.ts";
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * deepStrictEqual(Object.keys(definitionJson(parseDefinition({ schema }))), [
 *   "schema", "publish", "ephemeral", "iceberg", "retainAge", "retainBytes", "key",
 * ]);
 * ```
 */
export function definitionJson(d: StreamDefinition): Record<string, unknown> {
  return {
    schema: d.schema,
    publish: d.publish,
    ephemeral: d.ephemeral,
    iceberg: d.iceberg,
    retainAge: d.retainAge,
    retainBytes: d.retainBytes,
    key: d.key === null ? null : [...d.key],
  };
}

// JSON text with object keys sorted, so that two equal values give one text.
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (isObject(v)) {
    return `{${
      Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")
    }}`;
  }
  return JSON.stringify(v);
}

/** How a definition given again compares with the one in force. */
export type DefinitionChange =
  | { kind: "same" }
  | { kind: "grows" }
  | { kind: "conflict"; detail: string };

/**
 * Compares `after` (given now) with `before` (in force): `same` (equal, or
 * schemas that differ only in annotations — title, description, `$comment`,
 * examples — or in the order of `required`: see `schema/inert_form.ts`),
 * `grows` (only the schema differs, and only by nullable columns added at
 * the end, or by constraints of its columns: the new schema applies from the
 * next row), or a `conflict` naming the first difference.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { compareDefinitions, parseDefinition } from "./stream_definition.ts";
 * const v1 = parseDefinition({ schema: { type: "object", properties: { a: { type: "number" } }, required: ["a"] } });
 * const v2 = parseDefinition({
 *   schema: { type: "object", properties: { a: { type: "number" }, b: { type: ["string", "null"] } }, required: ["a", "b"] },
 * });
 * equal(compareDefinitions(v1, v1).kind, "same");
 * const described = { ...v1, schema: { ...v1.schema, description: "a", required: ["a"] } };
 * equal(compareDefinitions(v1, described).kind, "same");
 * equal(compareDefinitions(v1, v2).kind, "grows");
 * equal(compareDefinitions(v2, v1).kind, "conflict");
 * equal(compareDefinitions(v1, { ...v1, publish: true }).kind, "conflict");
 * ```
 */
export function compareDefinitions(
  before: StreamDefinition,
  after: StreamDefinition,
): DefinitionChange {
  for (const k of DEFINITION_FIELDS) {
    if (k === "schema") continue;
    const a = (before as unknown as Record<string, unknown>)[k];
    const b = (after as unknown as Record<string, unknown>)[k];
    if (canonical(a) !== canonical(b)) {
      return {
        kind: "conflict",
        detail: `${k} is ${JSON.stringify(a)} here, ${JSON.stringify(b)} in the request`,
      };
    }
  }
  const change = schemaChange(compileSchema(before.schema), compileSchema(after.schema));
  // Another description or order of `required`: nothing to reopen; the definition in force
  // stays. The text is compared with its keys sorted, so the columns' order is checked apart.
  if (
    change.kind === "same" &&
    canonical(inertForm(before.schema)) === canonical(inertForm(after.schema))
  ) {
    return { kind: "same" };
  }
  if (change.kind === "refused") {
    return {
      kind: "conflict",
      detail: `the schema ${change.detail}; a stream takes only nullable columns added at the end`,
    };
  }
  return { kind: "grows" };
}
