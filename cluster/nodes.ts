/**
 * Node registration: each node of a cluster records its name and the URL
 * others reach it at, attached to its own lease, so that the record goes
 * when the node does. A name is one node's: a second live node with the
 * same name and another URL is refused, naming both (the same URL is the
 * same node restarted before its old lease lapsed: it takes the record over).
 *
 * The record also holds the process's `instance`, a random id made at each
 * start: a follower shows it when it opens a leader's replicate route, and
 * the leader compares it with the record ({@linkcode checkMember}), so that
 * only the process that holds a live registration replicates under its name.
 * Who can read etcd can read it: it proves membership to the HTTP side only,
 * where etcd's contents are not shown.
 *
 * ```text
 * PREFIX/nodes/NODE   {"url":"http://10.0.0.1:8801","instance":"<32 hex>"}   (the node's lease)
 * ```
 *
 * @module
 */

import { timingSafeEqual } from "node:crypto";
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
 */
export interface NodeInfo {
  /** Its name. */
  node: string;
  /** Its advertised URL. */
  url: string;
  /**
   * The running process's random id (see {@linkcode newInstanceId}); a
   * record without one admits no follower. @default none
   */
  instance?: string;
}

/**
 * A fresh instance id: 128 random bits as 32 lowercase hex characters.
 *
 * @example
 * ```ts
 * import { match, notEqual } from "node:assert/strict";
 * import { newInstanceId } from "./nodes.ts";
 * match(newInstanceId(), /^[0-9a-f]{32}$/);
 * notEqual(newInstanceId(), newInstanceId());
 * ```
 */
export function newInstanceId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
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
  const value = JSON.stringify(
    me.instance === undefined ? { url: me.url } : { url: me.url, instance: me.instance },
  );
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

function parseNode(key: string, value: string): { url: string; instance: string | null } {
  try {
    const v = JSON.parse(value) as { url?: unknown; instance?: unknown };
    if (typeof v.url === "string") {
      return { url: v.url, instance: typeof v.instance === "string" ? v.instance : null };
    }
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

/**
 * Why a follower claiming to be `node` with `instance` is not that cluster
 * member, or null when it is: the name must be registered live (its record
 * is on the node's lease) and the record's instance id must be `instance`.
 * The message names the node, never an instance id.
 *
 * @example
 * ```ts ignore
 * const why = await checkMember(etcd, "n2", req.headers.get(INSTANCE_HEADER));
 * if (why !== null) return json({ error: "forbidden", detail: why }, 403);
 * ```
 */
export async function checkMember(
  client: EtcdClient,
  node: string,
  instance: string | null,
  prefix: string = DEFAULT_PREFIX,
): Promise<string | null> {
  try {
    checkNodeName(node);
  } catch (err) {
    return (err as Error).message;
  }
  const key = nodeKey(node, prefix);
  const kv = await client.get(key);
  if (kv === null) return `node ${JSON.stringify(node)} is not registered in the cluster`;
  const held = parseNode(key, kv.value).instance;
  if (instance === null) {
    return `node ${JSON.stringify(node)}: no proof of its registration was shown`;
  }
  if (held === null || !sameText(held, instance)) {
    return `node ${JSON.stringify(node)}: the proof shown is not its registration's`;
  }
  return null;
}

// Compares two strings in time that does not depend on where they differ.
function sameText(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
