/**
 * One stream on one node of a cluster: the election loop, the role it gives
 * (leader or follower), and the switch between them.
 *
 * - **Leader** (this node won a term): it records the term in its log before
 *   any row of it, keeps its whole log (rows past the old commit index were
 *   never acknowledged nor shown, and are committed once the in-sync set holds
 *   them), ships every commit to its followers (`replication_source.ts`) and
 *   moves the commit index (`commit_tracker.ts`). Its log takes local appends
 *   (`Replication.writable`).
 * - The instant its lease may have lapsed on its own clock, it stops: the
 *   index no longer moves (the tracker asks the lease first), local appends are
 *   refused, and every caller still waiting for a commit is refused with
 *   {@linkcode NotLeaderError}. Nothing it wrote after that is ever shown.
 * - **Follower** (another node leads): it replicates from the leader
 *   (`replica_sink.ts`), cutting the uncommitted tail it wrote, and shows rows
 *   as the leader's commit index says; it moves to a new leader by itself.
 *
 * What the server plugs in: `publishable()` before taking a publish (307 to
 * `leader.url`, 503 `no_leader` or `not_enough_replicas`), the log's own
 * promises for acknowledgements (they resolve once committed, see
 * `log/replica/commit_gate.ts`), the log's `onCommit` for the fan-out (committed
 * rows only, on every node), `accept` for the replicate route, and `view` for
 * `/head`.
 *
 * @module
 */

import { backoffDelay, sleep } from "../common/backoff.ts";
import { Logger } from "../common/logger.ts";
import type { Log } from "../log/log.ts";
import { NotLeaderError } from "../log/errors.ts";
import type { ReplicaCommit, Replication } from "../log/replica/replication.ts";
import type { EtcdClient } from "./etcd_client.ts";
import { Election, type Leadership } from "./election.ts";
import { readInSync } from "./in_sync.ts";
import { DEFAULT_PREFIX } from "./keys.ts";
import type { LeaderInfo } from "./leader_info.ts";
import { LeaderWatch } from "./leader_watch.ts";
import { CommitTracker, DEFAULT_REPLICA_LAG_MS, etcdInSyncStore } from "./commit_tracker.ts";
import { ReplicationSource } from "./replication_source.ts";
import { OtherStreamError, ReplicaSink } from "./replica_sink.ts";

export { NotLeaderError };

/** Options of a {@linkcode ClusterNode}. */
export interface ClusterNodeOptions {
  /** The stream's name. */
  stream: string;
  /** This node's name, unique in the cluster. */
  node: string;
  /** The URL other nodes and clients reach this node at. */
  url: string;
  /** Nodes that must hold a row before it is committed. @default 1 */
  replicas?: number;
  /** The leader's lease, s. @default 5 */
  leaseSeconds?: number;
  /** Taken off each renewal for clock drift, ms. @default defaultMarginMs(lease) */
  marginMs?: number;
  /** How long a follower may lag before it leaves the in-sync set, ms. @default 2000 */
  replicaLagMs?: number;
  /** Bytes of recent commits the leader keeps for followers. @default DEFAULT_RING_BYTES */
  replicaRingBytes?: number;
  /** The prefix of the cluster's keys in etcd. @default "/streamcast" */
  prefix?: string;
  /** How often a follower reads the leader key besides its watch, ms. @default 2000 */
  pollMs?: number;
  /**
   * Appends a commit received from the leader (the server wraps it to queue
   * the rows for its fan-out). @default `log.replication.appendCommit`
   */
  append?: (commit: ReplicaCommit) => Promise<number>;
  /**
   * This node's log may lack committed rows (made now for a stream the
   * cluster already had — a new node, or one whose disk was wiped — or not
   * the copy it recorded, `stream_identity.ts`): it campaigns only once it
   * holds every row a leader says is committed — a node named in the
   * in-sync set with an empty disk must not lead — and until then refuses
   * publishes with `no_leader` while no other node leads. @default false
   */
  joining?: boolean;
  /**
   * Run once a joining node has caught up, before it campaigns (the server
   * records its copy of the log as one that holds the committed rows);
   * tried again, with backoff, until it succeeds. @default nothing
   */
  joined?: () => Promise<void>;
  /** A bearer token for the leader's replicate route. @default none */
  token?: string;
  /** This node's registration instance id, shown to the leader (`nodes.ts`). @default none */
  instance?: string;
  /** Where transitions are reported. @default a text Logger on stderr */
  logger?: Logger;
  /**
   * Told once, after the node has closed because its log stopped for good
   * (a write or sync that failed after its commit was shipped): the owner
   * opens the log again, which recovers it to what is on disk, and makes a
   * new node for it.
   */
  onStopped?: (err: Error) => void;
}

/**
 * What {@linkcode ClusterNode.publishable} answers: null (this node leads and
 * may take it), or why not and where the leader is.
 */
export type PublishRefusal =
  | { error: "not_leader"; leader: string }
  | { error: "no_leader"; leader: null; detail?: string }
  | { error: "not_enough_replicas"; leader: null };

/**
 * What `/head` shows of the cluster.
 */
export interface ClusterView {
  /** This node. */
  node: string;
  /** Its role for the stream. */
  role: "leader" | "follower";
  /** The leader's URL, or null while none is known. */
  leader: string | null;
  /** The term led now (the last known). */
  term: number;
  /** R. */
  replicas: number;
  /** The in-sync set, as the leader keeps it (on a follower: as the leader last sent it). */
  in_sync: string[];
  /**
   * This node's log may lack committed rows: it does not campaign before it
   * has caught up from a leader.
   */
  joining: boolean;
}

/**
 * Counters of a node's transitions (for metrics).
 */
export interface ClusterCounters {
  /** Times this node became leader. */
  elected: number;
  /** Times a leadership of this node ended. */
  deposed: number;
  /** Rows cut from this node's tail on rejoining. */
  rowsCut: number;
  /** Commits refused because the leadership ended first. */
  refused: number;
}

/**
 * A stream's cluster role on this node.
 *
 * @example
 * ```ts ignore
 * const log = await Log.open(dir, { replicated: true });
 * const node = new ClusterNode(etcd, log, { stream: "trades", node: "n1", url: "http://h1:8801", replicas: 2 });
 * node.start();
 * const refusal = node.publishable(); // null when this node may take a publish
 * await node.close();
 * ```
 */
export class ClusterNode {
  /** Transition counters. */
  readonly counters: ClusterCounters = { elected: 0, deposed: 0, rowsCut: 0, refused: 0 };
  /** Told each change of role (and of the leader followed). */
  onRole: ((view: ClusterView) => void) | null = null;
  readonly #etcd: EtcdClient;
  readonly #log: Log;
  readonly #rep: Replication;
  readonly #o: ClusterNodeOptions;
  readonly #replicas: number;
  readonly #logger: Logger;
  readonly #election: Election;
  readonly #watch: LeaderWatch;
  readonly #stop = new AbortController();
  // Role changes run one at a time, in order.
  #chain: Promise<void> = Promise.resolve();
  #leading: {
    leadership: Leadership;
    tracker: CommitTracker;
    source: ReplicationSource;
  } | null = null;
  #following: { url: string; stop: AbortController; done: Promise<void> } | null = null;
  #term = 0;
  #inSync: string[] = [];
  #stopped: Error | null = null;
  #joining: boolean;
  // The joining node caught up and is recording so (once).
  #joinedRunning = false;

  /** A node (not started) for `log`, which must be opened with `replicated: true`. */
  constructor(etcd: EtcdClient, log: Log, options: ClusterNodeOptions) {
    const rep = log.replication;
    if (!rep) {
      throw new TypeError(`log ${log.dir} is not replicated (open it with replicated: true)`);
    }
    this.#etcd = etcd;
    this.#log = log;
    this.#rep = rep;
    this.#o = options;
    this.#replicas = options.replicas ?? 1;
    if (!Number.isSafeInteger(this.#replicas) || this.#replicas < 1) {
      throw new RangeError(`replicas must be an integer ≥ 1, got ${options.replicas}`);
    }
    this.#logger = options.logger ?? new Logger();
    this.#joining = options.joining ?? false;
    this.#term = rep.terms.at(-1)?.term ?? 0;
    rep.writable = false;
    this.#election = new Election(etcd, {
      stream: options.stream,
      node: options.node,
      url: options.url,
      replicas: options.replicas ?? 1,
      ttlSeconds: options.leaseSeconds ?? 5,
      marginMs: options.marginMs,
      prefix: options.prefix ?? DEFAULT_PREFIX,
      logger: this.#logger,
    });
    this.#watch = new LeaderWatch(etcd, options.stream, {
      prefix: options.prefix ?? DEFAULT_PREFIX,
      pollMs: options.pollMs,
    });
    // A log that stops for good (a write or sync failed after its commit
    // was shipped) can neither lead nor follow: the node resigns, so that
    // another one leads at once, stops as close() does, and tells its owner.
    rep.onStopped = (err) => {
      rep.onStopped = null;
      this.#stopped ??= err;
      this.#logger.error("cluster_log_stopped", {
        stream: options.stream,
        node: options.node,
        error: err.message,
      });
      queueMicrotask(() => {
        this.close().catch((e) => {
          this.#logger.warn("cluster_close_failed", {
            stream: options.stream,
            node: options.node,
            error: e instanceof Error ? e.message : String(e),
          });
        }).finally(() => options.onStopped?.(err));
      });
    };
  }

  /** The log this node replicates. */
  get log(): Log {
    return this.#log;
  }

  /** This node's role now: leader only while its lease is valid on its own clock. */
  get role(): "leader" | "follower" {
    return this.#leading?.leadership.valid() ? "leader" : "follower";
  }

  /** The leader as last seen in etcd (null: none known). */
  get leader(): LeaderInfo | null {
    if (this.#leading?.leadership.valid()) {
      return {
        node: this.#o.node,
        url: this.#o.url,
        term: this.#leading.leadership.term,
        lease: this.#leading.leadership.leaseId,
      };
    }
    const l = this.#watch.current;
    // This node's own key from a lease it no longer holds is no leader to send anyone to.
    return l && l.node !== this.#o.node ? l : null;
  }

  /** Whether this node's log may still lack committed rows (it does not campaign yet). */
  get joining(): boolean {
    return this.#joining;
  }

  /** Why this node stopped for good (a leader of another stream, its log stopped), or null. */
  get stopped(): Error | null {
    return this.#stopped;
  }

  /** What `/head` shows. */
  get view(): ClusterView {
    const leader = this.leader;
    return {
      node: this.#o.node,
      role: this.role,
      leader: leader?.url ?? null,
      term: Math.max(this.#term, leader?.term ?? 0),
      replicas: this.#replicas,
      in_sync: [...this.#inSync],
      joining: this.#joining,
    };
  }

  /**
   * Whether this node may take a publish now: null, or the refusal — another
   * node leads (send the publisher there), none does (with why, when this
   * node may not lead because its log may lack committed rows), or fewer
   * than R nodes are in sync.
   */
  publishable(): PublishRefusal | null {
    const l = this.#leading;
    if (l && l.leadership.valid()) {
      return l.tracker.enough ? null : { error: "not_enough_replicas", leader: null };
    }
    const leader = this.leader;
    if (leader) return { error: "not_leader", leader: leader.url };
    if (!this.#joining) return { error: "no_leader", leader: null };
    return {
      error: "no_leader",
      leader: null,
      detail: `node ${this.#o.node} may lack committed rows (its log was made anew or is ` +
        "catching up) and does not lead before a node holding them does; start one",
    };
  }

  /** Takes a follower's replication socket (refused with 4409 unless this node leads). */
  accept(socket: WebSocket, node: string): void {
    const l = this.#leading;
    if (!l || !l.leadership.valid()) {
      socket.addEventListener("open", () => socket.close(4409, "not_leader"), { once: true });
      if (socket.readyState === WebSocket.OPEN) socket.close(4409, "not_leader");
      return;
    }
    l.source.accept(socket, node);
  }

  /** Starts the election loop and follows whoever leads. */
  start(): void {
    this.#election.onElected = (l) => this.#queue(() => this.#lead(l));
    this.#election.onEnded = (l, why) => {
      // At once, not queued: nothing more is committed, local appends are refused.
      this.#stepDown(l, why);
      this.#queue(() => this.#follow(this.#watch.current));
    };
    this.#watch.onChange = (leader) => this.#queue(() => this.#follow(leader));
    this.#watch.start();
    if (!this.#joining) this.#election.start();
  }

  // A joining node caught up from the leader: once `joined` is done, it campaigns.
  #caughtUp(): void {
    if (!this.#joining || this.#joinedRunning || this.#stop.signal.aborted) return;
    this.#joinedRunning = true;
    void (async () => {
      for (let attempt = 1; !this.#stop.signal.aborted; attempt++) {
        try {
          await this.#o.joined?.();
          break;
        } catch (err) {
          this.#logger.warn("cluster_join_record_failed", {
            stream: this.#o.stream,
            node: this.#o.node,
            error: err instanceof Error ? err.message : String(err),
          });
          await sleep(backoffDelay(attempt, 100, 2000), this.#stop.signal);
        }
      }
      if (this.#stop.signal.aborted) return;
      this.#joining = false;
      this.#logger.info("cluster_joined", { stream: this.#o.stream, node: this.#o.node });
      this.#election.start();
      this.onRole?.(this.view);
    })();
  }

  #queue(step: () => Promise<void>): void {
    this.#chain = this.#chain.then(step).catch(async (err) => {
      this.#logger.error("cluster_transition_failed", {
        stream: this.#o.stream,
        node: this.#o.node,
        error: err instanceof Error ? err.message : String(err),
      });
      // A leadership this node could not take up must not hold the stream:
      // another node (or this one, afresh) takes it.
      if (!this.#leading && this.#election.leadership) await this.#election.resign();
    });
  }

  async #lead(leadership: Leadership): Promise<void> {
    if (this.#stop.signal.aborted || !leadership.valid()) return;
    await this.#unfollow();
    const rep = this.#rep;
    await this.#log.flush();
    if (!leadership.valid()) return;
    // Recorded before any row of the term is appended.
    await rep.beginTerm(leadership.term);
    const keys = this.#election.keys;
    const set = await readInSync(this.#etcd, keys);
    if (!leadership.valid()) return;
    if (!set) {
      throw new Error(`${keys.inSync} is missing after this node won term ${leadership.term}`);
    }
    this.#term = leadership.term;
    const store = etcdInSyncStore(this.#etcd, keys, leadership, this.#replicas);
    const tracker = new CommitTracker(store, leadership, {
      node: this.#o.node,
      replicas: this.#replicas,
      set,
      index: rep.commitIndex,
      durable: rep.durableEnd,
      lagMs: this.#o.replicaLagMs ?? DEFAULT_REPLICA_LAG_MS,
      logger: this.#logger,
      stream: this.#o.stream,
    });
    const source = new ReplicationSource(rep, {
      connected: (n) => tracker.connected(n),
      disconnected: (n) => tracker.disconnected(n),
      durable: (n, end) => tracker.followerDurable(n, end),
    }, {
      term: leadership.term,
      stream: this.#o.stream,
      logger: this.#logger,
      ringBytes: this.#o.replicaRingBytes,
    });
    // Shipped as taken, before this node writes its producer journal or its
    // rows: the followers' writes and syncs run beside its own. The commit
    // index still waits for this node's sync (leaderDurable) and the
    // followers' reports.
    rep.onTaken = (c) => source.ship(c);
    rep.onDurable = (c) => tracker.leaderDurable(c.end);
    tracker.onIndex = (index) => {
      rep.commitThrough(index);
      source.commitIndex(index);
    };
    tracker.onSet = (nodes) => {
      this.#inSync = nodes;
      source.inSync(nodes);
      this.onRole?.(this.view);
    };
    source.inSync(set.nodes);
    this.#inSync = set.nodes;
    this.#leading = { leadership, tracker, source };
    this.counters.elected++;
    rep.writable = true;
    this.#archiveAs(leadership.term);
    // Rows this node held past the commit index count once the set holds them.
    tracker.leaderDurable(rep.durableEnd);
    this.#logger.info("cluster_leader", {
      stream: this.#o.stream,
      node: this.#o.node,
      term: leadership.term,
      end: rep.durableEnd,
      commit: rep.commitIndex,
      in_sync: set.nodes,
    });
    this.onRole?.(this.view);
    if (!leadership.valid()) this.#stepDown(leadership, "the lease lapsed while taking over");
  }

  #stepDown(leadership: Leadership, why: string): void {
    const l = this.#leading;
    if (!l || l.leadership !== leadership) return;
    this.#leading = null;
    const rep = this.#rep;
    rep.writable = false;
    this.#archiveAs(null);
    rep.onTaken = null;
    rep.onDurable = null;
    l.tracker.close();
    l.source.close();
    const waiting = rep.waiting;
    rep.failWaiters(new NotLeaderError(this.#o.stream, this.#watch.current?.url ?? null));
    this.counters.deposed++;
    this.counters.refused += waiting;
    this.#logger.warn("cluster_step_down", {
      stream: this.#o.stream,
      node: this.#o.node,
      term: leadership.term,
      why,
      refused: waiting,
      commit: rep.commitIndex,
      end: rep.durableEnd,
    });
    this.onRole?.(this.view);
  }

  // Only the leader uploads to the archive, each manifest carrying its term
  // (none over a later term's); null: this node uploads nothing.
  #archiveAs(term: number | null): void {
    if (this.#log.archive.uri !== null) this.#log.chunks.setRetention({ archiveTerm: term });
  }

  // Follows `leader` (replicating from it), unless this node leads.
  async #follow(leader: LeaderInfo | null): Promise<void> {
    if (this.#stop.signal.aborted || this.#stopped) return;
    if (leader) this.#term = Math.max(this.#term, leader.term);
    if (this.#leading?.leadership.valid()) return;
    const url = leader && leader.node !== this.#o.node ? leader.url : null;
    if (this.#following?.url === url) return;
    await this.#unfollow();
    this.onRole?.(this.view);
    if (url === null) return;
    const stop = new AbortController();
    const done = this.#replicate(url, stop.signal);
    this.#following = { url, stop, done };
  }

  async #unfollow(): Promise<void> {
    const f = this.#following;
    if (!f) return;
    this.#following = null;
    f.stop.abort();
    await f.done;
  }

  // Replicates from the leader at `url` until told to stop; reconnects with backoff.
  async #replicate(url: string, signal: AbortSignal): Promise<void> {
    let attempt = 0;
    while (!signal.aborted) {
      const sink = new ReplicaSink(this.#rep, {
        node: this.#o.node,
        stream: this.#o.stream,
        leaderUrl: url,
        append: this.#o.append,
        token: this.#o.token,
        instance: this.#o.instance,
        logger: this.#logger,
        onCut: (_at, rows) => (this.counters.rowsCut += rows),
        onInSync: (nodes) => (this.#inSync = nodes),
        onCaughtUp: () => this.#caughtUp(),
      });
      try {
        const end = await sink.run(signal);
        if (signal.aborted) return;
        // A link that ended on its own error (a failed append: a full disk)
        // keeps backing off, so that a follower that cannot write does not
        // reconnect, and make the leader resend, many times a second.
        if (sink.live && end.error === null) attempt = 0;
        this.#logger.info("replica_disconnected", {
          stream: this.#o.stream,
          node: this.#o.node,
          leader: url,
          code: end.code,
          reason: end.reason,
          error: end.error?.message,
        });
      } catch (err) {
        if (err instanceof OtherStreamError) {
          this.#stopped = err;
          this.#logger.error("replica_stopped", {
            stream: this.#o.stream,
            node: this.#o.node,
            error: err.message,
          });
          return;
        }
        this.#logger.warn("replica_failed", {
          stream: this.#o.stream,
          node: this.#o.node,
          leader: url,
          error: err instanceof Error ? err.message : String(err),
        });
      }
      await sleep(backoffDelay(++attempt, 100, 2000), signal);
    }
  }

  /** Resolves once the role changes asked for so far are done (tests). */
  async settled(): Promise<void> {
    let c: Promise<void>;
    do {
      c = this.#chain;
      await c;
    } while (c !== this.#chain);
  }

  /** Stops: resigns a leadership (so another node takes over at once), stops following. */
  async close(): Promise<void> {
    this.#stop.abort();
    const l = this.#leading;
    if (l) this.#stepDown(l.leadership, "closed");
    await this.#election.close();
    await this.#watch.close();
    await this.settled();
    await this.#unfollow();
    await this.#rep.checkpoint();
  }
}
