/**
 * The series of a stream run by a cluster node, in the stream's registry
 * (so `/_/metrics` serves them with the stream's own): the node's role and
 * term, the in-sync set's size and the commit index (read at each render),
 * its transitions as counters (leader changes, commits refused because the
 * leadership ended, rows cut from its tail on rejoining), and the commit
 * wait of each of its commits (`Replication.onCommitWait`: from the fsync
 * here to the commit in the cluster).
 *
 * @module
 */

import type { ClusterCounters, ClusterView } from "../../cluster/cluster_node.ts";
import type { Replication } from "../../log/replica/replication.ts";
import type { Registry } from "../metrics.ts";

// Commit wait buckets, in seconds: 0.5 ms to 10 s (a follower's fsync and a
// round trip at best; the lag bound and a lease at worst).
const WAIT_BUCKETS_S: number[] = [0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10_000]
  .map((ms) => ms / 1000);

/** What the series read of a node. */
export interface MeasuredNode {
  /** Its transition counters. */
  readonly counters: ClusterCounters;
  /** Its view (role, term, in-sync set). */
  readonly view: ClusterView;
}

/**
 * A clustered stream's series.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert/strict";
 * import { Registry } from "../metrics.ts";
 * import { ClusterMetrics } from "./cluster_metrics.ts";
 * const registry = new Registry();
 * const node = {
 *   counters: { elected: 1, deposed: 0, rowsCut: 3, refused: 0 },
 *   view: { node: "n1", role: "leader" as const, leader: "http://h1", term: 4, replicas: 2, in_sync: ["n1", "n2"], joining: false },
 * };
 * const rep: { onCommitWait: ((ms: number) => void) | null; commitIndex: number } = {
 *   onCommitWait: null,
 *   commitIndex: 11,
 * };
 * const m = new ClusterMetrics("trades", registry, node, rep);
 * rep.onCommitWait!(2); // a commit waited 2 ms for the cluster
 * const text = registry.render();
 * ok(text.includes('streamcast_cluster_leader{stream="trades"} 1'));
 * ok(text.includes('streamcast_cluster_rows_cut_total{stream="trades"} 3'));
 * ok(text.includes('streamcast_cluster_commit_wait_seconds_count{stream="trades"} 1'));
 * m.close();
 * ```
 */
export class ClusterMetrics {
  readonly #stop: () => void;
  readonly #rep: Pick<Replication, "onCommitWait">;

  /** Declares the series of stream `name` run by `node` in `registry`. */
  constructor(
    name: string,
    registry: Registry,
    node: MeasuredNode,
    rep: Pick<Replication, "onCommitWait" | "commitIndex">,
  ) {
    const labels = { stream: name };
    const leader = registry.gauge(
      "streamcast_cluster_leader",
      "1 while this node leads the stream (its lease valid on its own clock), else 0.",
    ).labels(labels);
    const term = registry.gauge("streamcast_cluster_term", "The stream's term, as last known.")
      .labels(labels);
    const inSync = registry.gauge(
      "streamcast_cluster_in_sync",
      "Nodes in the stream's in-sync set (the leader's own included).",
    ).labels(labels);
    const commit = registry.gauge(
      "streamcast_cluster_commit_index",
      "The commit index known here: every row below it is committed in the cluster.",
    ).labels(labels);
    const changes = registry.counter(
      "streamcast_cluster_leader_changes_total",
      "Times this node became leader of the stream (change=elected) or stopped leading it " +
        "(change=deposed).",
    );
    const elected = changes.labels({ ...labels, change: "elected" });
    const deposed = changes.labels({ ...labels, change: "deposed" });
    const refused = registry.counter(
      "streamcast_cluster_refused_commits_total",
      "Publishes and appends waiting for a commit when this node stopped leading: refused, " +
        "never acknowledged by it.",
    ).labels(labels);
    const cut = registry.counter(
      "streamcast_cluster_rows_cut_total",
      "Rows cut from this node's uncommitted tail on rejoining a new leader.",
    ).labels(labels);
    const wait = registry.histogram(
      "streamcast_cluster_commit_wait_seconds",
      "From a commit's fsync here to its commit in the cluster (R nodes hold it).",
      WAIT_BUCKETS_S,
    ).labels(labels);
    const seen: ClusterCounters = { elected: 0, deposed: 0, rowsCut: 0, refused: 0 };
    this.#stop = registry.collect(() => {
      const v = node.view;
      leader.set(v.role === "leader" ? 1 : 0);
      term.set(v.term);
      inSync.set(v.in_sync.length);
      commit.set(rep.commitIndex);
      const c = node.counters;
      elected.inc(c.elected - seen.elected);
      deposed.inc(c.deposed - seen.deposed);
      cut.inc(c.rowsCut - seen.rowsCut);
      refused.inc(c.refused - seen.refused);
      Object.assign(seen, c);
    });
    this.#rep = rep;
    rep.onCommitWait = (ms) => wait.observe(ms / 1000);
  }

  /** Stops timing commits and reading the node. */
  close(): void {
    this.#stop();
    this.#rep.onCommitWait = null;
  }
}
