/**
 * One `stream_id` for a stream on every node of a cluster (docs/SPEC.md §11: a
 * consumer moves between nodes with its cursor and `stream_id`). The first
 * node to start the stream writes its id to etcd; every other node creates
 * its log with that id, and a node whose log already has another id refuses
 * to start, naming both (its folder holds another stream's history).
 *
 * Each node's copy of the log is known too. A copy is named by the time
 * its `log.json` was made (`created_us`): a folder wiped and made again, or
 * replaced by another node's, is another copy. A node records its copy once
 * it holds every committed row — at start when it does, or once it has
 * caught up from the leader — and `null` while it holds none. A node whose
 * copy is not the one it recorded (its log was made anew, or is not the log
 * it vouched for) while rows may have been committed is a **joining** node:
 * it does not campaign before it has caught up, whoever founded the stream
 * and whatever the in-sync set says of its name. That costs two reads and
 * at most one write per stream at start and one write on joining; nothing on
 * the commit path.
 *
 * ```text
 * PREFIX/streams/NAME/stream_id     {"stream_id":"0f3a…","by":"n1"}
 * PREFIX/streams/NAME/copies/NODE   {"created_us":1765000000000000}   (null: joining)
 * ```
 *
 * @module
 */

import { type EtcdClient, EtcdIndeterminateError } from "./etcd_client.ts";
import { readInSync } from "./in_sync.ts";
import { DEFAULT_PREFIX, streamKeys } from "./keys.ts";

/**
 * The stream id the cluster has for a stream, and the node that wrote it.
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
  const claim = () =>
    client.txn(
      [{ key, target: "create", op: "==", value: 0 }],
      [{ put: { key, value: JSON.stringify({ stream_id: proposed, by: node }) } }],
      [{ range: { key } }],
    );
  // A claim whose answer was lost may have applied: sending it again reads
  // the key back (held by this node's claim, if it did).
  const r = await claim().catch((err) => {
    if (err instanceof EtcdIndeterminateError) return claim();
    throw err;
  });
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

/**
 * Whether a node's copy of a stream's log may stand for the committed rows
 * (it may campaign at once), or the node is joining (it campaigns only once
 * caught up from a leader), and why.
 */
export interface CopyStanding {
  /** The node must catch up from a leader before it campaigns. */
  joining: boolean;
  /** Why (one phrase), or null when the copy stands. */
  why: string | null;
}

/** This node's copy of a stream's log, as {@linkcode claimCopy} weighs it. */
export interface LogCopy {
  /** When the copy's `log.json` was made, µs since the epoch. */
  createdUs: number;
  /** This process created the log when it opened it: no log was in its folder. */
  madeNow: boolean;
  /** The end of the rows it holds (the next offset). */
  end: number;
  /** The commit index it recorded for itself: rows below it were committed. */
  committed: number;
}

/**
 * Weighs `copy`, node `node`'s log of `stream`, against what the cluster
 * recorded, and records the outcome. A copy that ends before the commit
 * index it recorded itself lost committed rows (segments removed, an older
 * folder put back) and is joining. Otherwise the copy stands when no row can have
 * been committed yet (no in-sync set was ever written: no leader ever took
 * a term), when it is the copy the node recorded, or when the node has no
 * record at all and the log is older than this start (a log from before
 * copies were recorded); it is then recorded. Otherwise — a log made now
 * for a stream with a history, a node whose record says it holds no copy
 * (it was joining when it stopped), or another copy than the recorded one —
 * the node is joining, and its record says it holds none until
 * {@linkcode recordCopy} says otherwise, so that a restart halfway through
 * catching up is still joining.
 *
 * @throws {TypeError} when the copy record in etcd is not such a record.
 *
 * @example
 * ```ts ignore
 * const standing = await claimCopy(etcd, "trades", "n1", { createdUs, madeNow });
 * if (standing.joining) console.log(`joining: ${standing.why}`);
 * ```
 */
export async function claimCopy(
  client: EtcdClient,
  stream: string,
  node: string,
  copy: LogCopy,
  options: { prefix?: string } = {},
): Promise<CopyStanding> {
  const keys = streamKeys(stream, options.prefix ?? DEFAULT_PREFIX);
  const key = keys.copies + node;
  const set = await readInSync(client, keys);
  const recorded = await readCopy(client, key);
  let why: string | null = null;
  if (copy.end < copy.committed) {
    why = `this node's log ends at ${copy.end} but rows up to ${copy.committed - 1} ` +
      "were committed";
  } else if (set === null || set.fresh === true || recorded?.createdUs === copy.createdUs) {
    why = null;
  } else if (recorded === null) {
    why = copy.madeNow ? "this node's log was made now for a stream with committed rows" : null;
  } else if (recorded.createdUs === null) {
    why = "this node stopped before it caught up";
  } else if (copy.madeNow) why = "this node's log was made now; the copy it recorded is gone";
  else {
    why = `this node's log (made at ${copy.createdUs} µs) is not the copy it recorded ` +
      `(made at ${recorded.createdUs} µs)`;
  }
  const held = why === null ? copy.createdUs : null;
  if (recorded?.createdUs !== held) await putCopy(client, key, held);
  return { joining: why !== null, why };
}

/**
 * Records `createdUs` as the copy of `stream`'s log in which node `node`
 * holds every committed row (once caught up from the leader).
 *
 * @example
 * ```ts ignore
 * await recordCopy(etcd, "trades", "n2", createdUs); // caught up: n2 may campaign
 * ```
 */
export async function recordCopy(
  client: EtcdClient,
  stream: string,
  node: string,
  createdUs: number,
  options: { prefix?: string } = {},
): Promise<void> {
  const key = streamKeys(stream, options.prefix ?? DEFAULT_PREFIX).copies + node;
  await putCopy(client, key, createdUs);
}

// Puts a copy record; one whose answer was lost is sent again (the same put
// applied twice is the same record).
async function putCopy(client: EtcdClient, key: string, createdUs: number | null): Promise<void> {
  const value = JSON.stringify({ created_us: createdUs });
  await client.put(key, value).catch((err) => {
    if (err instanceof EtcdIndeterminateError) return client.put(key, value);
    throw err;
  });
}

// The copy recorded at `key`: null when there is no record, createdUs null
// when the node holds none.
async function readCopy(
  client: EtcdClient,
  key: string,
): Promise<{ createdUs: number | null } | null> {
  const kv = await client.get(key);
  if (!kv || kv.createRevision === 0) return null;
  let v: { created_us?: unknown };
  try {
    v = JSON.parse(kv.value);
  } catch {
    throw new TypeError(`${key} in etcd is not JSON: ${kv.value.slice(0, 80)}`);
  }
  if (v.created_us !== null && !Number.isSafeInteger(v.created_us)) {
    throw new TypeError(`${key} in etcd is not a copy record: ${kv.value.slice(0, 80)}`);
  }
  return { createdUs: v.created_us as number | null };
}
