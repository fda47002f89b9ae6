/**
 * One `stream_id` for a stream on every node of a cluster (DESIGN §18: a
 * consumer moves between nodes with its cursor and `stream_id`). The first
 * node to start the stream writes its id to etcd; every other node creates
 * its log with that id, and a node whose log already has another id refuses
 * to start, naming both (its folder holds another stream's history).
 *
 * ```text
 * PREFIX/streams/NAME/stream_id   {"stream_id":"0f3a…","by":"n1"}
 * ```
 *
 * @module
 */

import type { EtcdClient } from "./etcd_client.ts";
import { DEFAULT_PREFIX, streamKeys } from "./keys.ts";

/**
 * The stream id the cluster has for a stream, and the node that wrote it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { ClusterStreamId } from "./stream_identity.ts";
 * const id: ClusterStreamId = { streamId: "a".repeat(32), by: "n1" };
 * equal(id.by, "n1");
 * ```
 */
export interface ClusterStreamId {
  /** The id (32 lowercase hex). */
  streamId: string;
  /** The node that wrote it. */
  by: string;
}

/**
 * A fresh stream id: 128 random bits as 32 lowercase hex characters.
 *
 * @example
 * ```ts
 * import { match } from "node:assert/strict";
 * import { newStreamId } from "./stream_identity.ts";
 * match(newStreamId(), /^[0-9a-f]{32}$/);
 * ```
 */
export function newStreamId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * Writes `proposed` as `stream`'s id unless the cluster has one; answers the
 * cluster's id (the proposed one when this node was first).
 *
 * @throws {TypeError} when the key in etcd is not such a record.
 *
 * @example
 * ```ts ignore
 * const local = (await readMeta(dir))?.meta.stream_id ?? null;
 * const cluster = await claimStreamId(etcd, "trades", "n2", local ?? newStreamId());
 * if (local !== null && local !== cluster.streamId) fatal(streamIdRefusal("trades", local, cluster));
 * const log = await Log.open(dir, { streamId: cluster.streamId, replicated: true });
 * ```
 */
export async function claimStreamId(
  client: EtcdClient,
  stream: string,
  node: string,
  proposed: string,
  options: { prefix?: string } = {},
): Promise<ClusterStreamId> {
  if (!/^[0-9a-f]{32}$/.test(proposed)) {
    throw new TypeError(`a stream id is 32 lowercase hex characters, got ${proposed}`);
  }
  const key = streamKeys(stream, options.prefix ?? DEFAULT_PREFIX).streamId;
  const r = await client.txn(
    [{ key, target: "create", op: "==", value: 0 }],
    [{ put: { key, value: JSON.stringify({ stream_id: proposed, by: node }) } }],
    [{ range: { key } }],
  );
  if (r.succeeded) return { streamId: proposed, by: node };
  const held = r.ranges[0][0];
  let v: { stream_id?: unknown; by?: unknown };
  try {
    v = JSON.parse(held.value);
  } catch {
    throw new TypeError(`${key} in etcd is not JSON: ${held.value.slice(0, 80)}`);
  }
  if (typeof v.stream_id !== "string" || !/^[0-9a-f]{32}$/.test(v.stream_id)) {
    throw new TypeError(`${key} in etcd is not a stream id record: ${held.value.slice(0, 80)}`);
  }
  return { streamId: v.stream_id, by: String(v.by ?? "?") };
}

/**
 * The one line a node prints when its log of `stream` has another id than
 * the cluster's.
 *
 * @example
 * ```ts
 * import { match } from "node:assert/strict";
 * import { streamIdRefusal } from "./stream_identity.ts";
 * const line = streamIdRefusal("trades", "a".repeat(32), { streamId: "b".repeat(32), by: "n1" });
 * match(line, /stream "trades": this node's log has stream_id a{32}, the cluster's is b{32}/);
 * ```
 */
export function streamIdRefusal(stream: string, local: string, cluster: ClusterStreamId): string {
  return `stream "${stream}": this node's log has stream_id ${local}, the cluster's is ` +
    `${cluster.streamId} (written by ${cluster.by}); it holds another stream's rows: ` +
    `move its folder away to join the cluster`;
}
