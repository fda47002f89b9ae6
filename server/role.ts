/**
 * The role a stream plays where it is served: a primary (it takes its own
 * rows), a mirror's replica (`mirror/`, a `--follow` read replica: it takes
 * the primary's rows only), or a cluster member's copy (`member/`: it takes
 * rows while this node leads). `serve` builds one per served stream from
 * what it is given and hands them to the routes through their context
 * (`http/context.ts`); the stream itself knows nothing of it.
 *
 * @module
 */

/**
 * What a mirror (`mirror/`, a `--follow` read replica) adds to the stream it
 * replicates where it is served: the `/head` fields, and the primary's end
 * asked afresh (the lag rule of a subscribe past the mirror's end).
 */
export interface StreamMirror {
  /** `follows` (the primary's URL, no token), `lag_rows`, `state`. */
  head(): Record<string, unknown>;
  /** The primary's end offset now, or null when it cannot be asked. */
  primaryEnd(): Promise<number | null>;
  /** Resolves true once the replica's end passes `offset`, false if `signal` aborts first. */
  reached(offset: number, signal: AbortSignal): Promise<boolean>;
}

/**
 * Why a cluster node does not take a publish now: another node leads (send
 * the publisher to `leader`), none is known (`detail` says why this node
 * does not lead, when it may not), or fewer than R nodes are in sync.
 */
export type ClusterRefusal =
  | { error: "not_leader"; leader: string }
  | { error: "no_leader"; leader: null; detail?: string }
  | { error: "not_enough_replicas"; leader: null };

/**
 * What a cluster member (`member/`) adds to the stream it runs where it is
 * served: the `/head` fields, whether it takes a publish now, the followers'
 * replication sockets, and its stop (before the stream closes).
 */
export interface StreamMember {
  /** `cluster`: the node's view (role, leader, term, in-sync set, commit index). */
  head(): Record<string, unknown>;
  /** Null when this node may take a publish now, else why not. */
  publishable(): ClusterRefusal | null;
  /** Takes a follower's replication socket (the follower's node name). */
  accept(socket: WebSocket, node: string): void;
  /**
   * Why a follower claiming to be cluster member `node`, showing its
   * registration's `instance`, may not replicate; null when it may.
   */
  admit(node: string, instance: string | null): Promise<string | null>;
  /** The cluster's token a follower must show to replicate (null: none). */
  readonly token: string | null;
  /** How long a replication link may be silent before the leader closes it, ms. */
  readonly replicaLagMs: number;
  /** Stops the node: resigns a leadership, stops following. Once; later calls wait for the first. */
  close(): Promise<void>;
}

/** The role of a served stream. */
export type StreamRole =
  | { readonly kind: "primary" }
  | { readonly kind: "mirror"; readonly mirror: StreamMirror }
  | { readonly kind: "member"; readonly member: StreamMember };

/** The role of a stream served on its own: it takes its own rows. */
export const PRIMARY: StreamRole = Object.freeze({ kind: "primary" });

/**
 * The `/head` fields a stream's role adds (none for a primary).
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { PRIMARY, roleHead } from "./role.ts";
 * deepStrictEqual(roleHead(PRIMARY), {});
 * const mirror = {
 *   head: () => ({ state: "live" }),
 *   primaryEnd: () => Promise.resolve(null),
 *   reached: () => Promise.resolve(true),
 * };
 * deepStrictEqual(roleHead({ kind: "mirror", mirror }), { state: "live" });
 * ```
 */
export function roleHead(role: StreamRole): Record<string, unknown> {
  switch (role.kind) {
    case "primary":
      return {};
    case "mirror":
      return role.mirror.head();
    case "member":
      return role.member.head();
  }
}
