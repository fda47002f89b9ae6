/**
 * Node registration: each node of a cluster records its name and the URL
 * others reach it at, attached to its own lease, so that the record goes
 * when the node does. A name is one node's: a second live node with the
 * same name and another URL is refused, naming both (the same URL is the
 * same node restarted before its old lease lapsed: it takes the record over).
 *
 * ```text
 * PREFIX/nodes/NODE   {"url":"http://10.0.0.1:8801"}   (the node's lease)
 * ```
 *
 * @module
 */

import type { EtcdClient } from "./etcd_client.ts";
import { checkNodeName, DEFAULT_PREFIX, nodeKey } from "./keys.ts";

/**
 * Another live node holds the name.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { NodeNameTakenError } from "./nodes.ts";
 * const err = new NodeNameTakenError("n1", "http://h2:8801", "http://h1:8801", 5);
 * equal(err.message.startsWith('node name "n1" is registered by http://h1:8801'), true);
 * ```
 */
export class NodeNameTakenError extends Error {
  /** The name. */
  readonly node: string;
  /** The URL of the node that holds it. */
  readonly heldBy: string;

  /** `node`, wanted for `url`, is held by the node at `heldBy`. */
  constructor(node: string, url: string, heldBy: string, ttlSeconds: number) {
    super(
      `node name "${node}" is registered by ${heldBy}, not this node (${url}): give each node ` +
        `its own --node; if that node is gone, its registration lapses within ${ttlSeconds} s`,
    );
    this.name = "NodeNameTakenError";
    this.node = node;
    this.heldBy = heldBy;
  }
}

/**
 * A registered node.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { NodeInfo } from "./nodes.ts";
 * const n: NodeInfo = { node: "n1", url: "http://h1:8801" };
 * equal(n.node, "n1");
 * ```
 */
export interface NodeInfo {
  /** Its name. */
  node: string;
  /** Its advertised URL. */
  url: string;
}

/**
 * Records `node` at `url` with lease `leaseId` (the node keeps the lease).
 *
 * @throws {NodeNameTakenError} when a live node with another URL holds the name.
 *
 * @example
 * ```ts ignore
 * const lease = await LeaseKeeper.grant(etcd, { ttlSeconds: 5 });
 * await registerNode(etcd, { node: "n1", url: "http://h1:8801" }, lease.id, 5);
 * ```
 */
export async function registerNode(
  client: EtcdClient,
  me: NodeInfo,
  leaseId: string,
  ttlSeconds: number,
  prefix: string = DEFAULT_PREFIX,
): Promise<void> {
  const key = nodeKey(checkNodeName(me.node), prefix);
  const value = JSON.stringify({ url: me.url });
  for (let attempt = 0; attempt < 10; attempt++) {
    const r = await client.txn(
      [{ key, target: "create", op: "==", value: 0 }],
      [{ put: { key, value, lease: leaseId } }],
      [{ range: { key } }],
    );
    if (r.succeeded) return;
    const held = r.ranges[0][0];
    if (!held) continue; // gone meanwhile: create it
    const url = parseNode(held.key, held.value).url;
    if (held.lease !== leaseId && url !== me.url) {
      throw new NodeNameTakenError(me.node, me.url, url, ttlSeconds);
    }
    const swap = await client.txn(
      [{ key, target: "mod", op: "==", value: held.modRevision }],
      [{ put: { key, value, lease: leaseId } }],
    );
    if (swap.succeeded) return;
  }
  throw new Error(`node ${me.node}: its registration kept changing under it in etcd`);
}

function parseNode(key: string, value: string): { url: string } {
  try {
    const v = JSON.parse(value) as { url?: unknown };
    if (typeof v.url === "string") return { url: v.url };
  } catch {
    // reported below
  }
  throw new TypeError(`${key} in etcd is not a node record: ${value.slice(0, 80)}`);
}

/**
 * The registered nodes, by name.
 *
 * @example
 * ```ts ignore
 * for (const n of await listNodes(etcd)) console.log(n.node, n.url);
 * ```
 */
export async function listNodes(
  client: EtcdClient,
  prefix: string = DEFAULT_PREFIX,
): Promise<NodeInfo[]> {
  const dir = nodeKey("", prefix);
  const { kvs } = await client.range(dir, { prefix: true });
  return kvs.map((kv) => ({ node: kv.key.slice(dir.length), url: parseNode(kv.key, kv.value).url }))
    .sort((a, b) => a.node < b.node ? -1 : a.node > b.node ? 1 : 0);
}
