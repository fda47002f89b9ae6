/**
 * A stream run by a cluster (docs/SPEC.md §11): its log is one
 * replica of the cluster's, and a `ClusterNode` (`cluster/cluster_node.ts`)
 * decides whether this node leads it or follows the node that does.
 *
 * Opening one, in order: the cluster's `stream_id` is claimed (this node's
 * log's, or a fresh one, when it is the first; a log holding another id is
 * refused); the schema is checked against the cluster's (written when this
 * node is the first; a difference is refused in one line naming it); the
 * log is opened replicated with that id; its copy is weighed against the
 * one this node recorded in etcd (`claimCopy`, docs/SPEC.md §11): a log made
 * now for a stream with committed rows — whoever founded it — or another
 * copy than the recorded one is joining, and campaigns only once caught up
 * from a leader (then its copy is recorded); the node is made — a
 * follower's commits reach the stream's fan-out through
 * the stream's `appendCommit` (`streamInside`) — with the member role the stream is served in
 * (`../role.ts`): the publish routes ask it first, the replicate route
 * hands it the sockets, `/head` shows its view, and its close (before the
 * stream's) stops the node. The caller starts the node once the server
 * listens. A stream with an Iceberg table
 * (`options.iceberg`, which needs `options.archive`: the table is shared by
 * every node) keeps it only while this node leads (`leader_table.ts`).
 *
 * @module
 */

import { join } from "node:path";
import type { Logger } from "../../common/logger.ts";
import type { EtcdClient } from "../../cluster/etcd_client.ts";
import { ClusterNode } from "../../cluster/cluster_node.ts";
import { checkMember } from "../../cluster/nodes.ts";
import { checkClusterSchema } from "../../cluster/schema_check.ts";
import {
  claimCopy,
  claimStreamId,
  newStreamId,
  recordCopy,
  streamIdRefusal,
} from "../../cluster/stream_identity.ts";
import { readMeta } from "../../log/log_meta.ts";
import { Stream, streamInside } from "../stream/stream.ts";
import type { StreamMember } from "../role.ts";
import type { StreamOptions } from "../stream/stream_options.ts";
import { ClusterMetrics } from "./cluster_metrics.ts";
import { LeaderTable } from "./leader_table.ts";
import { checkIcebergOptions } from "../../iceberg/options.ts";
import { checkTableColumns } from "../../iceberg/schema.ts";

/** Where a node of a cluster is, and how it runs its streams. */
export interface ClusterMembership {
  /** The cluster's etcd. */
  etcd: EtcdClient;
  /** This node's name, unique in the cluster. */
  node: string;
  /** The URL other nodes and clients reach this node at. */
  url: string;
  /** Nodes that must hold a row before it is committed. */
  replicas: number;
  /** The leader's lease, s. */
  leaseSeconds: number;
  /** How long a follower may lag before it leaves the in-sync set, ms. */
  replicaLagMs: number;
  /** Bytes of recent commits a leader keeps for its followers. */
  replicaRingBytes: number;
  /** The prefix of the cluster's keys in etcd. */
  prefix: string;
  /** The token this node shows the leader's replicate route (null: none). */
  token: string | null;
  /** This process's instance id in its registration: its proof to the leader. */
  instance: string;
  /** Where transitions are reported. */
  logger: Logger;
  /**
   * Told when stream `name`'s node closed because its log stopped for good
   * (a write that failed after its commit was shipped, a full disk say): the
   * stream is to be closed and opened again (its log recovers to what is on
   * disk, and the node rejoins as a follower).
   */
  stopped?: (name: string, err: Error) => void;
}

/**
 * Thrown when this node may not run a stream of the cluster: its schema or
 * its log's `stream_id` differs from the cluster's. The message is one line.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { ClusterRefusedError } from "./clustered_stream.ts";
 * equal(new ClusterRefusedError("x").name, "ClusterRefusedError");
 * ```
 */
export class ClusterRefusedError extends Error {
  /** A refusal saying `message`. */
  constructor(message: string) {
    super(message);
    this.name = "ClusterRefusedError";
  }
}

/**
 * Opens stream `name` as this node's replica of the cluster's (see the
 * module doc); the node is made, not started. Serve the stream with its
 * member role; close the member before the stream.
 *
 * @throws {ClusterRefusedError} when the schema or the log's id differs from the cluster's.
 * @throws {TypeError} when `options.iceberg` is asked without `options.archive`.
 *
 * @example
 * ```ts ignore
 * const { stream, node, member } = await openClustered("trades", { root, schema }, membership);
 * const server = serve([{ stream, role: { kind: "member", member } }], { publish: ["trades"] });
 * node.start();
 * ```
 */
export async function openClustered(
  name: string,
  options: StreamOptions & { root: string },
  m: ClusterMembership,
): Promise<{ stream: Stream; node: ClusterNode; member: StreamMember }> {
  const { iceberg, ...streamOptions } = options;
  const tableOptions = iceberg === undefined || iceberg === false
    ? null
    : checkIcebergOptions(iceberg);
  if (tableOptions !== null && (options.archive === undefined || options.archive === null)) {
    throw new TypeError(
      `stream "${name}": a cluster's Iceberg table needs an archive (each node's disk would ` +
        "hold a table of its own)",
    );
  }
  if (tableOptions !== null) checkTableColumns(options.schema);
  const dir = join(options.root, name === "" ? "_" : name);
  const local = (await readMeta(dir).catch(() => null))?.meta.stream_id ?? null;
  const prefix = { prefix: m.prefix };
  const id = await claimStreamId(m.etcd, name, m.node, local ?? newStreamId(), prefix);
  if (local !== null && local !== id.streamId) {
    throw new ClusterRefusedError(streamIdRefusal(name, local, id));
  }
  const difference = await checkClusterSchema(m.etcd, name, m.node, options.schema, prefix);
  if (difference !== null) throw new ClusterRefusedError(difference);
  // The table is kept by the leader alone (below), not by the stream.
  const stream = await Stream.open(name, {
    ...streamOptions,
    logOptions: { ...options.logOptions, replicated: true, streamId: id.streamId },
  });
  const log = stream.log!;
  let standing;
  let createdUs;
  try {
    createdUs = (await readMeta(dir))!.meta.created_us;
    const rep = log.replication!;
    standing = await claimCopy(m.etcd, name, m.node, {
      createdUs,
      madeNow: local === null,
      end: rep.durableEnd,
      committed: rep.commitIndex,
    }, prefix);
  } catch (err) {
    await stream.close();
    throw err;
  }
  if (standing.joining) {
    m.logger.warn("cluster_joining", { stream: name, node: m.node, why: standing.why });
  }
  const inside = streamInside(stream);
  const node = new ClusterNode(m.etcd, log, {
    stream: name,
    node: m.node,
    url: m.url,
    replicas: m.replicas,
    leaseSeconds: m.leaseSeconds,
    replicaLagMs: m.replicaLagMs,
    replicaRingBytes: m.replicaRingBytes,
    prefix: m.prefix,
    token: m.token ?? undefined,
    instance: m.instance,
    append: (commit) => inside.appendCommit(commit),
    // A copy that may lack committed rows: no campaign before it is caught up.
    joining: standing.joining,
    joined: () => recordCopy(m.etcd, name, m.node, createdUs, prefix),
    logger: m.logger,
    onStopped: (err) => m.stopped?.(name, err),
  });
  const metrics = new ClusterMetrics(name, inside.metrics, node, log.replication!);
  const table = tableOptions === null ? null : LeaderTable.start(node, log, {
    stream: name,
    archive: options.archive!,
    iceberg: tableOptions,
    logger: m.logger,
  });
  let closing: Promise<void> | null = null;
  const member: StreamMember = {
    head: () => ({
      cluster: {
        ...node.view,
        commit_index: log.replication!.commitIndex,
        durable_end: log.replication!.durableEnd,
      },
      ...table?.head(),
    }),
    publishable: () => node.publishable(),
    accept: (socket, follower) => node.accept(socket, follower),
    admit: (follower, instance) => checkMember(m.etcd, follower, instance, m.prefix),
    token: m.token,
    replicaLagMs: m.replicaLagMs,
    // The table and the metrics go even when the node fails to close (a
    // node whose log stopped on a full disk cannot checkpoint).
    close: () =>
      closing ??= (async () => {
        try {
          await node.close();
        } finally {
          try {
            await table?.close();
          } finally {
            metrics.close();
          }
        }
      })(),
  };
  return { stream, node, member };
}
