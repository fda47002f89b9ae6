/**
 * This node's record in the cluster (`PREFIX/nodes/NODE`, docs/SPEC.md
 * §11.5), kept on a lease of its own for as long as the node runs: made at
 * start (a live node of the same name at another URL refuses the start),
 * and made again on a new lease whenever the lease is lost (etcd away for
 * longer than it, the process paused past it). Revoked at close, so the
 * name is free at once. The record carries this process's instance id, the
 * same across those renewals: the proof a follower shows a leader's
 * replicate route (`cluster/nodes.ts`).
 *
 * @module
 */

import { backoffDelay, sleep } from "../../common/backoff.ts";
import type { Logger } from "../../common/logger.ts";
import type { EtcdClient } from "../../cluster/etcd_client.ts";
import { LeaseKeeper } from "../../cluster/lease_keeper.ts";
import { newInstanceId, type NodeInfo, registerNode } from "../../cluster/nodes.ts";

/**
 * A node's registration, renewed until closed.
 *
 * @example
 * ```ts ignore
 * const reg = await NodeRegistration.start(etcd, { node: "n1", url: "http://h1:8801" }, 5, "/streamcast", logger);
 * const proof = reg.instance; // what this node shows a leader's replicate route
 * await reg.close();
 * ```
 */
export class NodeRegistration {
  readonly #etcd: EtcdClient;
  readonly #me: NodeInfo;
  readonly #ttl: number;
  readonly #prefix: string;
  readonly #logger: Logger;
  readonly #stop = new AbortController();
  #lease: LeaseKeeper;
  #loop: Promise<void>;

  private constructor(
    etcd: EtcdClient,
    me: NodeInfo,
    ttl: number,
    prefix: string,
    logger: Logger,
    lease: LeaseKeeper,
  ) {
    this.#etcd = etcd;
    this.#me = me;
    this.#ttl = ttl;
    this.#prefix = prefix;
    this.#logger = logger;
    this.#lease = lease;
    this.#loop = this.#keep();
  }

  /** This process's instance id, written in its record (the follower's proof). */
  get instance(): string {
    return this.#me.instance!;
  }

  /**
   * Registers `me` on a new lease of `ttl` s, with a fresh instance id.
   *
   * @throws {NodeNameTakenError} when a live node of that name has another URL.
   */
  static async start(
    etcd: EtcdClient,
    me: NodeInfo,
    ttl: number,
    prefix: string,
    logger: Logger,
  ): Promise<NodeRegistration> {
    const mine = { node: me.node, url: me.url, instance: newInstanceId() };
    const lease = await LeaseKeeper.grant(etcd, { ttlSeconds: ttl });
    try {
      await registerNode(etcd, mine, lease.id, ttl, prefix);
    } catch (err) {
      await lease.revoke().catch(() => {});
      throw err;
    }
    return new NodeRegistration(etcd, mine, ttl, prefix, logger, lease);
  }

  // Each time the lease is lost, registers again on a new one (retried with backoff).
  async #keep(): Promise<void> {
    const stop = this.#stop.signal;
    while (!stop.aborted) {
      const lost = this.#lease.lost;
      if (!lost.aborted) {
        await new Promise<void>((resolve) => {
          lost.addEventListener("abort", () => resolve(), { once: true });
          stop.addEventListener("abort", () => resolve(), { once: true });
        });
      }
      if (stop.aborted) return;
      this.#logger.warn("cluster_node_lease_lost", {
        node: this.#me.node,
        why: this.#lease.lostWhy,
      });
      for (let attempt = 1; !stop.aborted; attempt++) {
        let lease: LeaseKeeper | null = null;
        try {
          lease = await LeaseKeeper.grant(this.#etcd, { ttlSeconds: this.#ttl });
          await registerNode(this.#etcd, this.#me, lease.id, this.#ttl, this.#prefix);
          this.#lease = lease;
          this.#logger.info("cluster_node_registered", { node: this.#me.node, url: this.#me.url });
          break;
        } catch (err) {
          await lease?.revoke();
          this.#logger.debug("cluster_node_register_retry", {
            node: this.#me.node,
            error: err instanceof Error ? err.message : String(err),
          });
          await sleep(backoffDelay(attempt, 250, 5000), stop);
        }
      }
    }
  }

  /** Stops renewing and revokes the lease (the record goes at once). */
  async close(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    await this.#lease.revoke().catch(() => {});
  }
}
