/**
 * Every node of a cluster runs each stream with the same schema. The first
 * node to start a stream writes its schema to etcd (a transaction that
 * succeeds only while the key is absent); every node after it compares its
 * own with it and refuses to start on a difference, naming it in one line:
 * where in the schema, what this node has, what the cluster has, and who
 * wrote the cluster's.
 *
 * Key order matters only where it means something: the order of
 * `properties` is the order of the columns; `type` and `required` are sets.
 *
 * ```text
 * PREFIX/streams/NAME/schema   {"schema":{…},"by":"n1"}
 * ```
 *
 * @module
 */

import type { EtcdClient } from "./etcd_client.ts";
import { DEFAULT_PREFIX, streamKeys } from "./keys.ts";

const SETS = new Set(["type", "required"]);

function show(v: unknown): string {
  if (v === undefined) return "nothing";
  const s = JSON.stringify(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

function at(path: string): string {
  return path === "" ? "the top" : path;
}

function join(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/**
 * The first difference between this node's schema `mine` and the cluster's
 * `theirs`, as a phrase, or null when they are the same.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { schemaDifference } from "./schema_check.ts";
 * const a = { type: "object", properties: { px: { type: "number" } }, required: ["px"] };
 * const b = { type: "object", properties: { px: { type: "string" } }, required: ["px"] };
 * equal(schemaDifference(a, a), null);
 * equal(schemaDifference(a, b), 'at properties.px.type this node has "number", the cluster "string"');
 * ```
 */
export function schemaDifference(mine: unknown, theirs: unknown, path = ""): string | null {
  if (isObject(mine) && isObject(theirs)) {
    const keys = [...new Set([...Object.keys(mine), ...Object.keys(theirs)])];
    for (const k of keys) {
      if (!(k in theirs)) {
        return `at ${join(path, k)} this node has ${show(mine[k])}, the cluster nothing`;
      }
      if (!(k in mine)) {
        return `at ${join(path, k)} this node has nothing, the cluster ${show(theirs[k])}`;
      }
      const d = schemaDifference(mine[k], theirs[k], join(path, k));
      if (d !== null) return d;
    }
    if (path.split(".").pop() === "properties") {
      const a = Object.keys(mine);
      const b = Object.keys(theirs);
      if (a.join("\0") !== b.join("\0")) {
        return `the columns at ${at(path)} are in another order: this node ${show(a)}, ` +
          `the cluster ${show(b)}`;
      }
    }
    return null;
  }
  if (Array.isArray(mine) && Array.isArray(theirs)) {
    const key = path.split(".").pop() ?? "";
    const a = SETS.has(key) ? [...mine].map((x) => JSON.stringify(x)).sort() : mine;
    const b = SETS.has(key) ? [...theirs].map((x) => JSON.stringify(x)).sort() : theirs;
    if (a.length !== b.length) {
      return `at ${at(path)} this node has ${show(mine)}, the cluster ${show(theirs)}`;
    }
    for (let i = 0; i < a.length; i++) {
      const d = SETS.has(key)
        ? (a[i] === b[i]
          ? null
          : `at ${at(path)} this node has ${show(mine)}, the cluster ${show(theirs)}`)
        : schemaDifference(a[i], b[i], `${path}[${i}]`);
      if (d !== null) return d;
    }
    return null;
  }
  if (JSON.stringify(mine) === JSON.stringify(theirs)) return null;
  return `at ${at(path)} this node has ${show(mine)}, the cluster ${show(theirs)}`;
}

/**
 * The one line a node prints when it refuses to start a stream whose schema
 * differs from the cluster's.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { schemaMismatchMessage } from "./schema_check.ts";
 * equal(
 *   schemaMismatchMessage("trades", "n1", "at properties.px.type this node has \"string\", the cluster \"number\""),
 *   'stream "trades": this node\'s schema differs from the cluster\'s (written by n1): ' +
 *     'at properties.px.type this node has "string", the cluster "number"',
 * );
 * ```
 */
export function schemaMismatchMessage(stream: string, by: string, difference: string): string {
  return `stream "${stream}": this node's schema differs from the cluster's (written by ${by}): ` +
    difference;
}

/** Options of {@linkcode checkClusterSchema}. */
export interface SchemaCheckOptions {
  /** The prefix of the cluster's keys. @default "/streamcast" */
  prefix?: string;
}

/**
 * Checks `schema` for `stream` against the cluster's: writes it when this
 * node is the first; returns null when it is the cluster's, else the one
 * line naming the difference ({@linkcode schemaMismatchMessage}).
 *
 * @example
 * ```ts ignore
 * const refusal = await checkClusterSchema(etcd, "trades", "n2", schema);
 * if (refusal !== null) fatal(refusal);
 * ```
 */
export async function checkClusterSchema(
  client: EtcdClient,
  stream: string,
  node: string,
  schema: unknown,
  options: SchemaCheckOptions = {},
): Promise<string | null> {
  const key = streamKeys(stream, options.prefix ?? DEFAULT_PREFIX).schema;
  const r = await client.txn(
    [{ key, target: "create", op: "==", value: 0 }],
    [{ put: { key, value: JSON.stringify({ schema, by: node }) } }],
    [{ range: { key } }],
  );
  if (r.succeeded) return null;
  const held = r.ranges[0][0];
  let theirs: { schema?: unknown; by?: unknown };
  try {
    theirs = JSON.parse(held.value);
  } catch {
    throw new TypeError(`${key} in etcd is not JSON: ${held.value.slice(0, 80)}`);
  }
  const d = schemaDifference(schema, theirs.schema);
  return d === null ? null : schemaMismatchMessage(stream, String(theirs.by ?? "?"), d);
}
