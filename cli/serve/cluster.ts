/**
 * `serve --cluster`: this node joins the cluster (its record in etcd, on a
 * lease of its own) and opens every declared stream as its replica of the
 * cluster's (`server/member/clustered_stream.ts`), each with its cluster
 * node, not started: `serve` starts them once it listens, so that the first
 * follower to connect finds the replicate route.
 *
 * @module
 */

import type { Logger } from "../../common/logger.ts";
import type { ClusterNode } from "../../cluster/cluster_node.ts";
import { EtcdClient } from "../../cluster/etcd_client.ts";
import { NodeNameTakenError } from "../../cluster/nodes.ts";
import { LogCorruptError, LogLockedError } from "../../log/mod.ts";
import type { Stream } from "../../server/stream/stream.ts";
import type { StreamOptions } from "../../server/stream/stream_options.ts";
import type { StreamMember } from "../../server/role.ts";
import type { ServedStream } from "../../server/serve.ts";
import { ClusterRefusedError, openClustered } from "../../server/member/clustered_stream.ts";
import { NodeRegistration } from "../../server/member/node_registration.ts";
import { Fatal, oneLine, show } from "./fatal.ts";
import type { Settings } from "./run_settings.ts";
import { streamOptionsOf } from "./streams.ts";

/** This node in its cluster: its streams, their nodes, and its registration. */
export interface ClusterJoined {
  /** The streams, each a replica of the cluster's, with its member role. */
  streams: ServedStream[];
  /** Each stream's cluster node, by stream name (not started). */
  nodes: Map<string, ClusterNode>;
  /** The cluster's etcd. */
  etcd: EtcdClient;
  /** The prefix of its keys. */
  prefix: string;
  /**
   * Opens one more stream as this node's replica of the cluster's (a stream
   * created while serving); its node is in `nodes`, not started.
   */
  open(name: string, options: StreamOptions & { root: string }): Promise<ServedStream>;
  /** Stops stream `name`'s node (it resigns what it leads) and closes the stream. */
  close(name: string): Promise<void>;
  /**
   * Closes stream `name` and opens it again with the options it was opened
   * with (its node in `nodes`, not started).
   */
  reopen(name: string): Promise<ServedStream>;
  /**
   * Told when a stream's node closed because its log stopped for good (a
   * write that failed after its commit was shipped): call `reopen`.
   */
  onStopped: ((name: string, err: Error) => void) | null;
  /** Stops the nodes (they resign what they lead) and removes this node's record. */
  leave(): Promise<void>;
}

/**
 * The URL this node is reached at: `--advertise`, else `http(s)://HOST:PORT`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { advertisedUrl } from "./cluster.ts";
 * equal(advertisedUrl({ advertise: null, host: "10.0.0.1", port: 8801 }, false), "http://10.0.0.1:8801");
 * ```
 */
export function advertisedUrl(
  s: Pick<Settings, "advertise" | "host" | "port">,
  tls: boolean,
): string {
  if (s.advertise !== null) return s.advertise;
  if (s.port === 0) throw new Fatal("--cluster with --port 0 needs --advertise URL", 2);
  if (s.host === "0.0.0.0" || s.host === "::") {
    throw new Fatal(`--cluster with --host ${s.host} needs --advertise URL`, 2);
  }
  const host = s.host.includes(":") ? `[${s.host}]` : s.host;
  return `${tls ? "https" : "http"}://${host}:${s.port}`;
}

/**
 * Joins the cluster of `s.cluster` and opens every declared stream in it;
 * a {@linkcode Fatal} when etcd cannot be reached, the node's name is
 * taken, or a stream's schema or log differs from the cluster's (one line
 * each, exit 1; nothing is left registered or open).
 */
export async function joinCluster(
  s: Settings,
  schemas: Map<string, Record<string, unknown>>,
  logger: Logger,
  tls: boolean,
): Promise<ClusterJoined> {
  const url = advertisedUrl(s, tls);
  const etcd = new EtcdClient(s.cluster!);
  const me = { node: s.node!, url };
  let registration: NodeRegistration;
  try {
    registration = await NodeRegistration.start(etcd, me, s.leaseSeconds, s.clusterPrefix, logger);
  } catch (err) {
    if (err instanceof NodeNameTakenError) throw new Fatal(oneLine(err), 1);
    throw new Fatal(`cannot join the cluster at ${s.cluster}: ${oneLine(err)}`, 1);
  }
  const streams = new Map<string, Stream>();
  const members = new Map<string, StreamMember>();
  const nodes = new Map<string, ClusterNode>();
  // What each stream was opened with, for reopen.
  const opened = new Map<string, StreamOptions & { root: string }>();
  let left = false;
  // The members stop first (a leader resigns), then the streams close.
  const closeAll = async () => {
    await Promise.allSettled([...members.values()].map((m) => m.close()));
    await Promise.allSettled([...streams.values()].map((st) => st.close()));
  };
  const membership = {
    etcd,
    node: me.node,
    url,
    replicas: s.replicas,
    leaseSeconds: s.leaseSeconds,
    replicaLagMs: s.replicaLagMs,
    replicaRingBytes: s.replicaRingBytes,
    prefix: s.clusterPrefix,
    token: s.clusterToken,
    instance: registration.instance,
    logger,
    stopped: (name: string, err: Error) => {
      if (!left) joined.onStopped?.(name, err);
    },
  };
  try {
    for (const [name, decl] of s.streams) {
      try {
        const options = {
          ...streamOptionsOf(s, decl, logger),
          schema: schemas.get(name)!,
          root: s.root,
        };
        const { stream, node, member } = await openClustered(name, options, membership);
        opened.set(name, options);
        streams.set(name, stream);
        members.set(name, member);
        nodes.set(name, node);
      } catch (err) {
        if (err instanceof ClusterRefusedError) throw new Fatal(err.message, 1);
        if (err instanceof LogLockedError || err instanceof LogCorruptError) {
          throw new Fatal(`${show(name)}: ${oneLine(err)}`, 1);
        }
        throw new Fatal(`${show(name)}: cannot join it to the cluster: ${oneLine(err)}`, 1);
      }
    }
  } catch (err) {
    await closeAll();
    await registration.close();
    throw err;
  }
  logger.info("cluster_joined_node", {
    node: me.node,
    url,
    cluster: s.cluster,
    replicas: s.replicas,
    lease_seconds: s.leaseSeconds,
    streams: [...nodes.keys()],
  });
  const joined: ClusterJoined = {
    streams: [...streams].map(([name, stream]) => ({
      stream,
      role: { kind: "member", member: members.get(name)! },
    })),
    nodes,
    etcd,
    prefix: s.clusterPrefix,
    async open(name, options) {
      const { stream, node, member } = await openClustered(name, options, membership);
      opened.set(name, options);
      streams.set(name, stream);
      members.set(name, member);
      nodes.set(name, node);
      return { stream, role: { kind: "member", member } };
    },
    async close(name) {
      const member = members.get(name);
      const stream = streams.get(name);
      members.delete(name);
      streams.delete(name);
      nodes.delete(name);
      opened.delete(name);
      // The stream closes (and lets go of its folder) even when its member
      // fails to (a node whose log stopped on a full disk cannot checkpoint).
      try {
        await member?.close();
      } finally {
        await stream?.close();
      }
    },
    async reopen(name) {
      const options = opened.get(name);
      if (options === undefined) throw new RangeError(`${show(name)} is not open here`);
      // What failed to close (a checkpoint on a full disk) is recovered by the open.
      await joined.close(name).catch(() => {});
      opened.set(name, options); // for the next try, should this one fail
      return await joined.open(name, options);
    },
    onStopped: null,
    async leave() {
      left = true;
      await closeAll();
      await registration.close();
    },
  };
  return joined;
}
