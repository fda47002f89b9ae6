/**
 * The in-sync set of a stream, kept in etcd as Kafka keeps a partition's
 * ISR in ZooKeeper: the nodes that hold every committed row. The leader
 * commits a row once every node of the set holds it (and at least R do);
 * it drops a lagging follower by writing the smaller set to etcd FIRST,
 * and only then commits without it; it adds a follower back once it has
 * caught up. Only a node in the set may become leader (`election.ts`
 * checks it in the same transaction that makes it leader), so a new
 * leader holds every committed row. A set is `fresh` from a stream's first
 * term until a set of R nodes is written; the leader commits nothing while
 * etcd's set is fresh, so while it is, no row was committed and any node may
 * lead (a stream whose only leader lost its disk before a follower joined is
 * not left without a leader).
 *
 * Every write is a compare-and-swap on the set's `mod_revision` and on the
 * leader key still being attached to the writer's lease: a deposed leader's
 * write fails, and so does one based on a set read before another change.
 * A write whose answer is lost may have applied: the set is read back, and
 * what etcd holds is the answer (or, when it cannot be read either, the
 * write throws and the leader counts both sets until a read settles it).
 *
 * ```text
 * PREFIX/streams/NAME/in_sync   {"term":7,"nodes":["n1","n2"]}
 * ```
 *
 * @module
 */

import { type EtcdClient, EtcdIndeterminateError } from "./etcd_client.ts";
import type { StreamKeys } from "./keys.ts";
import type { KeyValue } from "./_etcd_wire.ts";

/**
 * A stream's in-sync set as read from etcd.
 */
export interface InSyncSet {
  /** The term of the leader that wrote it. */
  term: number;
  /** The nodes that hold every committed row, sorted. */
  nodes: string[];
  /** Its revision in etcd: what the next write compares against. */
  modRevision: number;
  /**
   * True while no set of R or more nodes was ever written for the stream: no
   * row can have been committed (a commit needs R nodes of etcd's set), so any
   * node may lead. Absent: rows may have been committed.
   */
  fresh?: boolean;
}

/**
 * The set in `kv` (null for an absent key).
 *
 * @throws {TypeError} for a value that is not such a set, naming the key.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { parseInSync } from "./in_sync.ts";
 * const kv = { key: "/s/in_sync", value: '{"term":2,"nodes":["b","a"]}', createRevision: 5, modRevision: 9, version: 2, lease: "0" };
 * deepEqual(parseInSync(kv), { term: 2, nodes: ["a", "b"], modRevision: 9 });
 * ```
 */
export function parseInSync(kv: KeyValue | null | undefined): InSyncSet | null {
  if (!kv || kv.createRevision === 0) return null;
  let v: { term?: unknown; nodes?: unknown; fresh?: unknown };
  try {
    v = JSON.parse(kv.value);
  } catch {
    throw new TypeError(`${kv.key} in etcd is not JSON: ${kv.value.slice(0, 80)}`);
  }
  if (
    !Number.isSafeInteger(v.term) || !Array.isArray(v.nodes) ||
    !v.nodes.every((n) => typeof n === "string") ||
    (v.fresh !== undefined && typeof v.fresh !== "boolean")
  ) {
    throw new TypeError(`${kv.key} in etcd is not an in-sync set: ${kv.value.slice(0, 80)}`);
  }
  return {
    term: v.term as number,
    nodes: [...v.nodes as string[]].sort(),
    modRevision: kv.modRevision,
    ...(v.fresh === true ? { fresh: true } : {}),
  };
}

/**
 * The text kept at the in-sync key.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { encodeInSync } from "./in_sync.ts";
 * equal(encodeInSync(4, ["n2", "n1", "n1"]), '{"term":4,"nodes":["n1","n2"]}');
 * ```
 */
export function encodeInSync(term: number, nodes: readonly string[], fresh = false): string {
  return JSON.stringify({ term, nodes: [...new Set(nodes)].sort(), ...(fresh ? { fresh } : {}) });
}

/**
 * Whether `node` may become leader: it is in the set, or no set was ever
 * written (a new stream: no row was committed yet), or the set is still
 * fresh (never R nodes: no row can have been committed, whoever held it).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { mayLead } from "./in_sync.ts";
 * const set = { term: 3, nodes: ["n1", "n2"], modRevision: 41 };
 * equal(mayLead(set, "n2"), true);
 * equal(mayLead(set, "n3"), false);
 * equal(mayLead(null, "n3"), true);
 * ```
 */
export function mayLead(set: InSyncSet | null, node: string): boolean {
  return set === null || set.fresh === true || set.nodes.includes(node);
}

/**
 * Reads a stream's in-sync set (null when none was written).
 *
 * @example
 * ```ts ignore
 * const set = await readInSync(etcd, streamKeys("trades"));
 * console.log(set?.nodes);
 * ```
 */
export async function readInSync(client: EtcdClient, keys: StreamKeys): Promise<InSyncSet | null> {
  return parseInSync(await client.get(keys.inSync));
}

/** Who writes the set: the leader of `term`, holding `leaseId`. */
export interface InSyncWriter {
  /** Its term. */
  readonly term: number;
  /** The lease its leader key is attached to. */
  readonly leaseId: string;
  /** Whether its lease is still its own on its clock. */
  valid(): boolean;
}

/**
 * What {@linkcode writeInSync} did: written (the new set), or refused (the
 * set as etcd holds it now; `deposed` when the writer is no longer leader).
 */
export type InSyncWrite =
  | { written: true; set: InSyncSet }
  | { written: false; deposed: boolean; set: InSyncSet | null };

/**
 * Replaces the in-sync set by `nodes`, if it is still the one read
 * (`expected`, null for none) and `leader` still holds the leader key with
 * its lease. The leader's own node must be in `nodes`.
 *
 * @throws {RangeError} when the writer's lease ran out on its clock (it
 *   must not act as leader), or `nodes` is empty.
 *
 * @example
 * ```ts ignore
 * const set = await readInSync(etcd, keys);
 * const r = await writeInSync(etcd, keys, leadership, set, set!.nodes.filter((n) => n !== "n3"));
 * if (r.written) console.log("n3 dropped, term", r.set.term);
 * ```
 */
export async function writeInSync(
  client: EtcdClient,
  keys: StreamKeys,
  leader: InSyncWriter,
  expected: InSyncSet | null,
  nodes: readonly string[],
  replicas?: number,
): Promise<InSyncWrite> {
  if (nodes.length === 0) throw new RangeError("an in-sync set holds at least the leader");
  if (!leader.valid()) {
    throw new RangeError(`the leader of term ${leader.term} no longer holds its lease`);
  }
  // Fresh only while it stays fresh and short of R (unknown R: no longer fresh).
  const fresh = expected?.fresh === true && replicas !== undefined &&
    new Set(nodes).size < replicas;
  const value = encodeInSync(leader.term, nodes, fresh);
  let r;
  try {
    r = await client.txn(
      [
        { key: keys.inSync, target: "mod", op: "==", value: expected?.modRevision ?? 0 },
        { key: keys.leader, target: "lease", op: "==", value: leader.leaseId },
      ],
      [{ put: { key: keys.inSync, value } }, { range: { key: keys.inSync } }],
      [{ range: { key: keys.inSync } }, { range: { key: keys.leader } }],
    );
  } catch (err) {
    if (!(err instanceof EtcdIndeterminateError)) throw err;
    // It may have applied: what etcd holds now says whether it did. A read
    // that fails too leaves it undecided: the original error goes up.
    let now;
    try {
      now = await readInSyncAs(client, keys, leader);
    } catch {
      throw err;
    }
    const set = now.set;
    // Only the leader of this term writes this term's value: finding it is
    // finding this write (or an earlier one of the same set, which is as good).
    const ours = !now.deposed && set !== null && set.term === leader.term &&
      encodeInSync(set.term, set.nodes, set.fresh === true) === value;
    return ours ? { written: true, set: set! } : { written: false, ...now };
  }
  if (r.succeeded) return { written: true, set: parseInSync(r.ranges[1][0])! };
  const leaderKv = r.ranges[1][0];
  return {
    written: false,
    deposed: !leaderKv || leaderKv.lease !== leader.leaseId,
    set: parseInSync(r.ranges[0][0]),
  };
}

/**
 * The set as etcd holds it now, and whether `leader` no longer holds the
 * leader key (one snapshot of both keys): what a leader re-reads after a
 * write of the set whose answer was lost.
 *
 * @example
 * ```ts ignore
 * const { set, deposed } = await readInSyncAs(etcd, keys, leadership);
 * if (!deposed) tracker.adopt(set);
 * ```
 */
export async function readInSyncAs(
  client: EtcdClient,
  keys: StreamKeys,
  leader: Pick<InSyncWriter, "leaseId">,
): Promise<{ deposed: boolean; set: InSyncSet | null }> {
  const r = await client.txn([], [{ range: { key: keys.inSync } }, {
    range: { key: keys.leader },
  }]);
  const leaderKv = r.ranges[1][0];
  return {
    deposed: !leaderKv || leaderKv.lease !== leader.leaseId,
    set: parseInSync(r.ranges[0][0]),
  };
}
