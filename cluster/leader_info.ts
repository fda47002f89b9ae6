/**
 * What the leader key of a stream says: which node leads, where it is
 * reached, and in which term.
 *
 * ```text
 * PREFIX/streams/NAME/leader   {"node":"n1","url":"http://10.0.0.1:8801","term":7}   (its lease)
 * ```
 *
 * @module
 */

import type { KeyValue } from "./_etcd_wire.ts";

/**
 * A stream's leader as the leader key records it.
 */
export interface LeaderInfo {
  /** The leader's node name. */
  node: string;
  /** Its advertised URL (where publishers are redirected, where followers replicate from). */
  url: string;
  /** The term it leads. */
  term: number;
  /** The lease its key is attached to. */
  lease: string;
}

/**
 * The leader in a leader key.
 *
 * @throws {TypeError} for a value that is not such a record, naming the key.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { parseLeader } from "./leader_info.ts";
 * const kv = { key: "/s/leader", value: '{"node":"n1","url":"http://h:1","term":3}', createRevision: 4, modRevision: 4, version: 1, lease: "99" };
 * deepEqual(parseLeader(kv), { node: "n1", url: "http://h:1", term: 3, lease: "99" });
 * ```
 */
export function parseLeader(kv: KeyValue): LeaderInfo {
  let v: { node?: unknown; url?: unknown; term?: unknown };
  try {
    v = JSON.parse(kv.value);
  } catch {
    throw new TypeError(`${kv.key} in etcd is not JSON: ${kv.value.slice(0, 80)}`);
  }
  if (typeof v.node !== "string" || typeof v.url !== "string" || !Number.isSafeInteger(v.term)) {
    throw new TypeError(`${kv.key} in etcd is not a leader record: ${kv.value.slice(0, 80)}`);
  }
  return { node: v.node, url: v.url, term: v.term as number, lease: kv.lease };
}
