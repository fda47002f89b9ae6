/**
 * The leader's commit index, as Kafka's partition leader keeps its high
 * watermark: a row is committed once every node of the in-sync set holds it
 * fsync'd — the leader's own durable end counts for the leader — and the set
 * has at least R nodes. The index only grows, and the leader moves it only
 * while its lease is valid on its own clock: once that may have lapsed,
 * nothing more is committed here.
 *
 * The set changes through etcd (`in_sync.ts`), always so that every node in
 * etcd's set holds every committed row:
 * - a follower that has not caught up for `lagMs` — its durable end did not
 *   reach what the leader had at its previous report (Kafka's
 *   `replica.lag.time.max.ms` rule) — or is not connected, is dropped by
 *   writing the smaller set to etcd FIRST; only then does the index move on
 *   without it;
 * - a connected follower whose durable end reaches the commit index is added
 *   here first (the index waits for it from then on), then in etcd.
 * A node of the set not heard from in this term counts as holding nothing,
 * so the index waits for it until it reports or is dropped.
 *
 * While a write of the set is in flight, and after one whose answer was lost
 * (it may or may not have applied), the index counts every node of both the
 * old and the new set; the set is then read back from etcd, again until a
 * read answers, and what etcd holds is the set from then on. No other change
 * is made before that read. A refused write also adopts the set etcd holds;
 * one refused because another node holds the leader key commits nothing
 * more.
 *
 * @module
 */

import { Logger } from "../common/logger.ts";
import type { EtcdClient } from "./etcd_client.ts";
import { type InSyncSet, type InSyncWrite, readInSyncAs, writeInSync } from "./in_sync.ts";
import type { StreamKeys } from "./keys.ts";
import type { Leadership } from "./election.ts";

/** Default of `--replica-lag-ms`: how long a follower may lag before it leaves the in-sync set. */
export const DEFAULT_REPLICA_LAG_MS = 2000;

/** Options of a {@linkcode CommitTracker}. */
export interface CommitTrackerOptions {
  /** The leader's node name. */
  node: string;
  /** Nodes that must hold a row before it is committed (R ≥ 1). */
  replicas: number;
  /** The set as the election left it (its term, its revision). */
  set: InSyncSet;
  /** The commit index when this leadership began (rows below it are committed). */
  index: number;
  /** The leader's durable end when this leadership began. */
  durable: number;
  /** How long a follower may lag before it is dropped, ms. @default 2000 */
  lagMs?: number;
  /** The monotonic clock, ms. @default performance.now */
  now?: () => number;
  /** Where set changes are reported. @default a text Logger on stderr */
  logger?: Logger;
  /** The stream's name, for log lines. @default "" */
  stream?: string;
}

/**
 * What a tracker writes the in-sync set through (the leader's etcd,
 * {@linkcode etcdInSyncStore}).
 */
export interface InSyncStore {
  /**
   * Writes `nodes` over `expected`: written (the new set), or refused (the
   * set etcd holds; `deposed` when another node holds the leader key).
   * Throws when etcd's answer is lost or etcd cannot be reached.
   */
  write(expected: InSyncSet, nodes: readonly string[]): Promise<InSyncWrite>;
  /** The set as etcd holds it now, and whether this leader was deposed. */
  read(): Promise<{ deposed: boolean; set: InSyncSet | null }>;
}

/**
 * The etcd store of a leader's in-sync writes (compare-and-swap on the
 * set's revision and on the leader key's lease).
 *
 * @example
 * ```ts ignore
 * const store = etcdInSyncStore(etcd, streamKeys("trades"), leadership);
 * const tracker = new CommitTracker(store, leadership, { node: "n1", replicas: 2, set, index, durable });
 * ```
 */
export function etcdInSyncStore(
  client: EtcdClient,
  keys: StreamKeys,
  leadership: Leadership,
  replicas?: number,
): InSyncStore {
  return {
    write: (expected, nodes) => writeInSync(client, keys, leadership, expected, nodes, replicas),
    read: () => readInSyncAs(client, keys, leadership),
  };
}

interface Follower {
  durable: number;
  connected: boolean;
  // The leader's durable end at the follower's previous report: reaching it
  // at the next report counts as caught up.
  target: number;
  caughtUpAt: number;
}

/**
 * The commit index of one leadership.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { CommitTracker } from "./commit_tracker.ts";
 * import { Logger } from "../common/logger.ts";
 * const leadership = { valid: () => true };
 * const set = { term: 2, nodes: ["n1", "n2"], modRevision: 7 };
 * const store = {
 *   write: (_e: unknown, nodes: readonly string[]) =>
 *     Promise.resolve({ written: true as const, set: { term: 2, nodes: [...nodes], modRevision: 8 } }),
 *   read: () => Promise.resolve({ deposed: false, set }),
 * };
 * const t = new CommitTracker(store, leadership, {
 *   node: "n1", replicas: 2, set, index: 1, durable: 1, logger: new Logger({ level: "error" }),
 * });
 * t.leaderDurable(11);
 * equal(t.index, 1); // n2 holds nothing yet
 * t.connected("n2");
 * t.followerDurable("n2", 6);
 * equal(t.index, 6);
 * t.followerDurable("n2", 11);
 * equal(t.index, 11);
 * t.close();
 * ```
 */
export class CommitTracker {
  /** Told each new commit index (rows below it are committed), in order. */
  onIndex: ((index: number) => void) | null = null;
  /** Told each change of the in-sync set (as written to etcd). */
  onSet: ((nodes: string[]) => void) | null = null;
  readonly #store: InSyncStore;
  readonly #leadership: Pick<Leadership, "valid">;
  readonly #node: string;
  readonly #replicas: number;
  readonly #lagMs: number;
  readonly #now: () => number;
  readonly #logger: Logger;
  readonly #stream: string;
  #set: InSyncSet;
  // Nodes counted for the index besides the set (added here, etcd not yet written).
  readonly #adding = new Set<string>();
  readonly #followers = new Map<string, Follower>();
  #durable: number;
  #index: number;
  #writing: Promise<void> | null = null;
  #closed = false;
  // Another node holds the leader key: nothing more is committed here.
  #deposed = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  readonly #startedAt: number;

  /** A tracker (its lag check runs every quarter of `lagMs` until closed). */
  constructor(
    store: InSyncStore,
    leadership: Pick<Leadership, "valid">,
    options: CommitTrackerOptions,
  ) {
    if (!Number.isSafeInteger(options.replicas) || options.replicas < 1) {
      throw new RangeError(`replicas must be an integer ≥ 1, got ${options.replicas}`);
    }
    this.#store = store;
    this.#leadership = leadership;
    this.#node = options.node;
    this.#replicas = options.replicas;
    this.#lagMs = options.lagMs ?? DEFAULT_REPLICA_LAG_MS;
    this.#now = options.now ?? (() => performance.now());
    this.#logger = options.logger ?? new Logger();
    this.#stream = options.stream ?? "";
    this.#set = options.set;
    this.#index = options.index;
    this.#durable = options.durable;
    this.#startedAt = this.#now();
    for (const n of this.#set.nodes) if (n !== this.#node) this.#follower(n);
    this.#timer = setInterval(() => this.tick(), Math.max(10, this.#lagMs / 4));
    Deno.unrefTimer(this.#timer);
  }

  /** The commit index: every row below it is committed. */
  get index(): number {
    return this.#index;
  }

  /** The in-sync set as etcd last answered it (written, refused with it, or read back). */
  get inSync(): string[] {
    return [...this.#set.nodes];
  }

  /** Whether the set has at least R nodes (else publishes answer `not_enough_replicas`). */
  get enough(): boolean {
    return this.#members().length >= this.#replicas;
  }

  /** What the tracker knows of each follower: durable end, connected, in the set. */
  followers(): { node: string; durable: number; connected: boolean; inSync: boolean }[] {
    const members = new Set(this.#members());
    return [...this.#followers].map(([node, f]) => ({
      node,
      durable: f.durable,
      connected: f.connected,
      inSync: members.has(node),
    }));
  }

  #follower(node: string): Follower {
    let f = this.#followers.get(node);
    if (!f) {
      f = { durable: 0, connected: false, target: Infinity, caughtUpAt: this.#startedAt };
      this.#followers.set(node, f);
    }
    return f;
  }

  #members(): string[] {
    const out = [...this.#set.nodes];
    for (const n of this.#adding) if (!out.includes(n)) out.push(n);
    if (!out.includes(this.#node)) out.push(this.#node);
    return out;
  }

  /** The leader's own fsync now covers every row below `end`. */
  leaderDurable(end: number): void {
    if (end <= this.#durable) return;
    this.#durable = end;
    this.#recompute();
  }

  /** A follower's replication socket opened (it reports from now on). */
  connected(node: string): void {
    const f = this.#follower(node);
    f.connected = true;
    f.durable = 0;
    f.target = Infinity;
  }

  /** A follower's replication socket closed. */
  disconnected(node: string): void {
    const f = this.#followers.get(node);
    if (f) f.connected = false;
    this.#recompute();
  }

  /** Follower `node` holds every row below `end` fsync'd (as the leader's log has them). */
  followerDurable(node: string, end: number): void {
    const f = this.#follower(node);
    if (!f.connected) return;
    f.durable = Math.max(f.durable, end);
    const now = this.#now();
    if (f.durable >= f.target || f.durable >= this.#durable) f.caughtUpAt = now;
    f.target = this.#durable;
    this.#recompute();
    this.#maybeAdd(node, f);
  }

  #recompute(): void {
    if (this.#closed || this.#deposed) return;
    const members = this.#members();
    if (members.length < this.#replicas) return;
    // Nothing is committed before etcd's set has R nodes (a fresh set says none was).
    if (this.#set.fresh === true && this.#set.nodes.length < this.#replicas) return;
    let min = this.#durable;
    for (const n of members) {
      if (n === this.#node) continue;
      const f = this.#followers.get(n);
      min = Math.min(min, f && f.connected ? f.durable : 0);
    }
    if (min <= this.#index) return;
    // Never after the lease may have lapsed on this node's clock.
    if (!this.#leadership.valid()) return;
    this.#index = min;
    this.onIndex?.(min);
  }

  #maybeAdd(node: string, f: Follower): void {
    if (this.#writing || this.#closed || this.#deposed || !this.#leadership.valid()) return;
    if (this.#members().includes(node) || !f.connected || f.durable < this.#index) return;
    // Counted here first: from now on the index waits for it; then etcd.
    this.#adding.add(node);
    this.#change([...this.#set.nodes, node], "in_sync_added", node);
  }

  /** Checks who lags (called every quarter of `lagMs`; tests call it with their clock). */
  tick(): void {
    if (this.#closed || this.#deposed || this.#writing) return;
    const now = this.#now();
    for (const f of this.#followers.values()) {
      if (f.connected && f.durable >= this.#durable) f.caughtUpAt = now;
    }
    for (const node of this.#set.nodes) {
      if (node === this.#node) continue;
      const f = this.#follower(node);
      if (now - f.caughtUpAt > this.#lagMs) {
        this.#change(this.#set.nodes.filter((n) => n !== node), "in_sync_dropped", node, {
          lag_ms: Math.round(now - f.caughtUpAt),
          connected: f.connected,
          durable: f.durable,
          leader_end: this.#durable,
        });
        return;
      }
    }
    for (const [node, f] of this.#followers) {
      this.#maybeAdd(node, f);
      if (this.#writing) return;
    }
  }

  // Writes the set `nodes` to etcd; a dropped node stops counting only once
  // etcd has the smaller set, an added one counts from before the write.
  // Until etcd's answer (or, when it is lost, a read of the set) says which
  // set etcd holds, both count.
  #change(
    nodes: string[],
    event: string,
    node: string,
    fields: Record<string, unknown> = {},
  ): void {
    if (!this.#leadership.valid()) return;
    const expected = this.#set;
    this.#writing = (async () => {
      let held: { deposed: boolean; set: InSyncSet | null } | null;
      let written = false;
      try {
        const r = await this.#store.write(expected, nodes);
        written = r.written;
        held = r.written ? { deposed: false, set: r.set } : r;
      } catch (err) {
        this.#logger.warn("in_sync_indeterminate", {
          stream: this.#stream,
          node,
          event,
          nodes,
          error: err instanceof Error ? err.message : String(err),
        });
        held = await this.#reread();
      }
      try {
        if (held === null) return; // closed, or the lease lapsed: nothing more moves
        this.#adopt(held, expected, nodes, written, event, node, fields);
        // In etcd's set: counted through it from now on; not: not waited for.
        this.#adding.delete(node);
      } finally {
        this.#writing = null;
        this.#recompute();
      }
    })();
  }

  // Reads the set until etcd answers; null once closed or the lease lapsed.
  async #reread(): Promise<{ deposed: boolean; set: InSyncSet | null } | null> {
    let delayMs = 50;
    while (!this.#closed && this.#leadership.valid()) {
      try {
        return await this.#store.read();
      } catch (err) {
        this.#logger.warn("in_sync_read_failed", {
          stream: this.#stream,
          error: err instanceof Error ? err.message : String(err),
        });
        await new Promise((r) => setTimeout(r, delayMs));
        delayMs = Math.min(delayMs * 2, 1000);
      }
    }
    return null;
  }

  // Takes the set etcd holds as this tracker's set.
  #adopt(
    held: { deposed: boolean; set: InSyncSet | null },
    expected: InSyncSet,
    nodes: string[],
    written: boolean,
    event: string,
    node: string,
    fields: Record<string, unknown>,
  ): void {
    const log = { stream: this.#stream, node, event };
    if (held.deposed) {
      this.#deposed = true;
      this.#logger.warn("in_sync_refused", { ...log, deposed: true });
      return;
    }
    const set = held.set;
    if (set === null) {
      // The key is gone (not this leader's doing): keep counting every node.
      this.#logger.warn("in_sync_missing", log);
      return;
    }
    const want = [...new Set(nodes)].sort().join(",");
    if (written || (set.term === expected.term && set.nodes.join(",") === want)) {
      this.#set = set;
      this.#logger.info(event, { ...log, nodes: set.nodes, ...fields });
    } else {
      const changed = set.nodes.join(",") !== this.#set.nodes.join(",");
      this.#set = set;
      this.#logger.warn("in_sync_refused", { ...log, held: set.nodes });
      if (!changed) return;
    }
    for (const n of set.nodes) if (n !== this.#node) this.#follower(n);
    this.onSet?.(set.nodes);
  }

  /** Resolves once no set write is in flight. */
  async settled(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  /** Stops: no index moves from now on. */
  close(): void {
    this.#closed = true;
    clearInterval(this.#timer);
  }
}
