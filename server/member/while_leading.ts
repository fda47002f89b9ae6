/**
 * A task run on a cluster node only while it leads a stream (the upstream
 * feed: only the leader connects it, a new leader reconnects): started each
 * time the node becomes leader, aborted the instant it stops (its lease may
 * have lapsed, it resigned), started again on the next leadership. What the
 * task fails with after its leadership ended (a refused append) is not a
 * failure of the task; what it fails with while leading is, and ends the
 * loop.
 *
 * @module
 */

import type { ClusterView } from "../../cluster/cluster_node.ts";

/** What {@linkcode whileLeading} watches: a node's role, and its role changes. */
export interface LeadingNode {
  /** The role now. */
  readonly role: "leader" | "follower";
  /** Told each change of role (set once here, chained to what was there). */
  onRole: ((view: ClusterView) => void) | null;
}

/**
 * Runs `task` during each leadership of `node` until `signal` aborts;
 * resolves then, or rejects with the first failure of a task while leading.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { type LeadingNode, whileLeading } from "./while_leading.ts";
 * const node: { -readonly [K in keyof LeadingNode]: LeadingNode[K] } = { role: "follower", onRole: null };
 * let runs = 0;
 * const stop = new AbortController();
 * const done = whileLeading(node, (signal) => {
 *   runs++;
 *   return new Promise<void>((r) => signal.addEventListener("abort", () => r()));
 * }, stop.signal);
 * node.role = "leader";
 * node.onRole!({} as never); // elected
 * node.role = "follower";
 * node.onRole!({} as never); // deposed: the task is aborted
 * stop.abort();
 * await done;
 * equal(runs, 1);
 * ```
 */
export function whileLeading(
  node: LeadingNode,
  task: (signal: AbortSignal) => Promise<unknown>,
  signal: AbortSignal,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let running: { stop: AbortController; done: Promise<void> } | null = null;
    // Every task started, settled or not (each one's `done` never rejects).
    let all: Promise<void> = Promise.resolve();
    let failed = false;
    const settle = () => {
      if (signal.aborted && !failed) void all.then(() => resolve());
    };
    const check = () => {
      if (failed) return;
      const lead = node.role === "leader" && !signal.aborted;
      if (lead && running === null) {
        const stop = new AbortController();
        const r = {
          stop,
          done: task(stop.signal).then(
            () => {},
            (err) => {
              // A task that fails while its leadership lasts ends the loop.
              if (stop.signal.aborted || signal.aborted) return;
              failed = true;
              reject(err);
            },
          ).finally(() => {
            // One that ended by itself is started again at the next change of role.
            if (running === r) running = null;
          }),
        };
        running = r;
        const before = all;
        all = Promise.all([before, r.done]).then(() => {});
      } else if (!lead && running !== null) {
        running.stop.abort();
        running = null;
      }
    };
    const prev = node.onRole;
    node.onRole = (view) => {
      prev?.(view);
      check();
    };
    signal.addEventListener("abort", () => {
      check();
      settle();
    }, { once: true });
    check();
    settle();
  });
}
