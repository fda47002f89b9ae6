/**
 * Electing a stream's leader through etcd, as Patroni elects a Postgres
 * primary: the leader is whoever holds the leader key, attached to its lease.
 *
 * A campaign is one transaction. It reads (in one snapshot) the leader key,
 * the term counter and the in-sync set; a candidate that is not in the set
 * waits (only an in-sync node may lead: it holds every committed row); one
 * that may lead sends
 *
 * ```text
 * if   leader.create_revision == 0            (no leader)
 *  and term.mod_revision     == seen          (no election since the read)
 *  and in_sync.mod_revision  == seen          (the set it was found in is current)
 * then put leader  = {"node","url","term":T+1} with its lease
 *      put term    = T+1
 *      put in_sync = {"term":T+1,"nodes":same, or [itself] when there was none}
 * ```
 *
 * so every election begins a new term, the term only grows, and two
 * candidates can never both win. When the answer to that transaction is
 * lost (it may have applied), the leader key is read back: held with the
 * campaign's lease, the campaign won. A campaign that fails in any other way
 * revokes the lease it was given (or, etcd unreachable, stops renewing it so
 * it lapses): no lease is kept alive that nobody holds. A leader is leader while its lease is
 * valid on its own clock (`lease_keeper.ts`); it asks `valid()` before
 * every act of a leader. Once the lease is lost, that leadership is over for
 * good: the {@linkcode Election} loop revokes the old lease when etcd answers
 * and campaigns again with a new one — a new term even when it wins again.
 *
 * @module
 */

import { backoffDelay, sleep } from "../common/backoff.ts";
import { Logger } from "../common/logger.ts";
import { type EtcdClient, EtcdIndeterminateError } from "./etcd_client.ts";
import { watchKeys } from "./etcd_watch.ts";
import { encodeInSync, mayLead, parseInSync } from "./in_sync.ts";
import { DEFAULT_PREFIX, type StreamKeys, streamKeys } from "./keys.ts";
import { LeaseKeeper } from "./lease_keeper.ts";
import { type LeaderInfo, parseLeader } from "./leader_info.ts";

/** A node taking part in elections: its name and the URL others reach it at. */
export interface Candidate {
  /** The node's name, unique in the cluster. */
  node: string;
  /** Its advertised URL. */
  url: string;
  /** R: the copies a row needs to be committed. @default 1 */
  replicas?: number;
}

/**
 * What one campaign found: won (the new term), or not (the leader there
 * is, whether this node may lead, and the revision to wait for changes after).
 */
export type CampaignResult =
  | { won: true; term: number; revision: number }
  | { won: false; leader: LeaderInfo | null; inSync: boolean; revision: number };

/**
 * One campaign of `me` for the stream at `keys`, with lease `leaseId`.
 *
 * @example
 * ```ts ignore
 * const lease = await LeaseKeeper.grant(etcd, { ttlSeconds: 5 });
 * const r = await campaign(etcd, streamKeys("trades"), { node: "n1", url: "http://h1:8801" }, lease.id);
 * if (r.won) console.log("leader of term", r.term);
 * ```
 */
export async function campaign(
  client: EtcdClient,
  keys: StreamKeys,
  me: Candidate,
  leaseId: string,
): Promise<CampaignResult> {
  const read = await client.txn([], [
    { range: { key: keys.leader } },
    { range: { key: keys.term } },
    { range: { key: keys.inSync } },
  ]);
  const [leaderKv] = read.ranges[0];
  const [termKv] = read.ranges[1];
  const [inSyncKv] = read.ranges[2];
  if (leaderKv) {
    const leader = parseLeader(leaderKv);
    // Our own transaction went through, but its answer was lost.
    if (leaderKv.lease === leaseId) {
      return { won: true, term: leader.term, revision: read.revision };
    }
    return { won: false, leader, inSync: true, revision: read.revision };
  }
  const set = parseInSync(inSyncKv);
  if (!mayLead(set, me.node)) {
    return { won: false, leader: null, inSync: false, revision: read.revision };
  }
  const last = termKv ? Number(termKv.value) : 0;
  if (!Number.isSafeInteger(last) || last < 0) {
    throw new TypeError(`${keys.term} in etcd is not a term number: ${termKv!.value.slice(0, 40)}`);
  }
  const term = last + 1;
  let r;
  try {
    r = await client.txn(
      [
        { key: keys.leader, target: "create", op: "==", value: 0 },
        { key: keys.term, target: "mod", op: "==", value: termKv?.modRevision ?? 0 },
        { key: keys.inSync, target: "mod", op: "==", value: set?.modRevision ?? 0 },
      ],
      [
        {
          put: {
            key: keys.leader,
            value: JSON.stringify({ node: me.node, url: me.url, term }),
            lease: leaseId,
          },
        },
        { put: { key: keys.term, value: String(term) } },
        {
          put: {
            key: keys.inSync,
            // A stream no row can have been committed to starts again from this node alone.
            value: set !== null && set.fresh !== true
              ? encodeInSync(term, set.nodes)
              : encodeInSync(term, [me.node], (me.replicas ?? 1) > 1),
          },
        },
      ],
    );
  } catch (err) {
    if (!(err instanceof EtcdIndeterminateError)) throw err;
    // It may have applied: the leader key says. A failed read leaves it
    // undecided, and the caller gives the lease up.
    const again = await client.txn([], [{ range: { key: keys.leader } }]).catch(() => {
      throw err;
    });
    const [kv] = again.ranges[0];
    if (kv && kv.lease === leaseId) {
      return { won: true, term: parseLeader(kv).term, revision: again.revision };
    }
    return {
      won: false,
      leader: kv ? parseLeader(kv) : null,
      inSync: true,
      revision: again.revision,
    };
  }
  if (r.succeeded) return { won: true, term, revision: r.revision };
  return { won: false, leader: null, inSync: true, revision: read.revision };
}

/**
 * A won election: the term, and the lease it lasts as long as.
 *
 * @example
 * ```ts ignore
 * const leadership = await election.elected();
 * if (leadership.valid()) ack(row); // never after the lease may have lapsed
 * ```
 */
export interface Leadership {
  /** The stream. */
  readonly stream: string;
  /** The term this leadership began. */
  readonly term: number;
  /** The lease the leader key is attached to. */
  readonly leaseId: string;
  /** Whether this node is still leader, on its own clock: ask before every act of a leader. */
  valid(): boolean;
  /** How long it still is, ms (0 once it is not). */
  remainingMs(): number;
  /** Aborts when the leadership ends (lease lost, resigned, closed). */
  readonly ended: AbortSignal;
}

/** Options of an {@linkcode Election}. */
export interface ElectionOptions extends Candidate {
  /** The stream. */
  stream: string;
  /** The lease's TTL, s. @default 5 */
  ttlSeconds?: number;
  /** Taken off each renewal for clock drift, ms. @default defaultMarginMs(TTL) */
  marginMs?: number;
  /** The prefix of the cluster's keys. @default "/streamcast" */
  prefix?: string;
  /** The monotonic clock, ms. @default performance.now */
  now?: () => number;
  /** Cap of the backoff while etcd is unreachable, ms. @default 1000 */
  retryMaxMs?: number;
  /** Where transitions are reported. @default a text Logger on stderr */
  logger?: Logger;
}

/**
 * The election loop of one stream on one node: campaigns whenever there is
 * no leader and this node may lead, holds the leadership while its lease
 * lasts, and campaigns again (new lease, new term) after losing it.
 *
 * @example
 * ```ts ignore
 * const election = new Election(etcd, { stream: "trades", node: "n1", url: "http://h1:8801" });
 * election.onElected = (l) => console.log("leader of term", l.term);
 * election.onEnded = (l, why) => console.log("no longer leader of term", l.term, why);
 * election.start();
 * await election.close(); // resigns
 * ```
 */
export class Election {
  /** The stream's keys. */
  readonly keys: StreamKeys;
  /** Told when this node becomes leader. */
  onElected: ((leadership: Leadership) => void) | null = null;
  /** Told when a leadership of this node ends, and why. */
  onEnded: ((leadership: Leadership, why: string) => void) | null = null;
  readonly #client: EtcdClient;
  readonly #o: Required<Omit<ElectionOptions, "marginMs" | "now" | "logger">> & {
    marginMs?: number;
    now?: () => number;
  };
  readonly #logger: Logger;
  readonly #stop = new AbortController();
  #running: Promise<void> | null = null;
  #leadership: Leadership | null = null;
  #lease: LeaseKeeper | null = null;

  /** An election (not started) of `options.node` for `options.stream`. */
  constructor(client: EtcdClient, options: ElectionOptions) {
    this.#client = client;
    this.#o = {
      stream: options.stream,
      node: options.node,
      url: options.url,
      replicas: options.replicas ?? 1,
      ttlSeconds: options.ttlSeconds ?? 5,
      prefix: options.prefix ?? DEFAULT_PREFIX,
      retryMaxMs: options.retryMaxMs ?? 1000,
      marginMs: options.marginMs,
      now: options.now,
    };
    this.keys = streamKeys(options.stream, this.#o.prefix);
    this.#logger = options.logger ?? new Logger();
  }

  /** This node's leadership while it is valid on its clock, else null. */
  get leadership(): Leadership | null {
    const l = this.#leadership;
    return l && l.valid() ? l : null;
  }

  /** Starts campaigning (once). */
  start(): void {
    this.#running ??= this.#run();
  }

  /** Whether {@linkcode Election.start} was called. */
  get started(): boolean {
    return this.#running !== null;
  }

  /** Resolves with the next leadership this node wins (null once closed). */
  elected(): Promise<Leadership | null> {
    const now = this.leadership;
    if (now) return Promise.resolve(now);
    return new Promise((resolve) => {
      const prev = this.onElected;
      const stop = () => resolve(null);
      this.#stop.signal.addEventListener("abort", stop, { once: true });
      this.onElected = (l) => {
        this.onElected = prev;
        this.#stop.signal.removeEventListener("abort", stop);
        prev?.(l);
        resolve(l);
      };
    });
  }

  /**
   * Gives up a leadership this node holds (its lease is revoked, so another
   * node may take over at once) and campaigns again with a new lease.
   */
  async resign(): Promise<void> {
    const lease = this.#lease;
    if (lease && this.#leadership) await lease.revoke();
  }

  /** Stops campaigning and resigns (the lease is revoked, so another node takes over at once). */
  async close(): Promise<void> {
    this.#stop.abort();
    await this.#lease?.revoke();
    await this.#running;
  }

  async #run(): Promise<void> {
    const signal = this.#stop.signal;
    let attempt = 0;
    let stale: LeaseKeeper | null = null; // lost, and maybe still held by etcd
    while (!signal.aborted) {
      try {
        if (stale) {
          await this.#client.revoke(stale.id);
          stale = null;
        }
        const lease = await LeaseKeeper.grant(this.#client, {
          ttlSeconds: this.#o.ttlSeconds,
          marginMs: this.#o.marginMs,
          now: this.#o.now,
        });
        this.#lease = lease;
        if (signal.aborted) {
          // Granted after close() revoked the lease it knew of: nobody holds
          // this one, and it would be renewed for as long as etcd answers.
          await lease.revoke();
          break;
        }
        attempt = 0;
        try {
          await this.#campaignWith(lease);
        } catch (err) {
          // Whatever the campaign left in etcd with this lease (maybe the
          // leader key, if its answer was lost) goes with it; unreachable,
          // it is no longer renewed and lapses by its TTL.
          await lease.revoke();
          throw err;
        }
        if (!signal.aborted) stale = lease;
      } catch (err) {
        if (signal.aborted) break;
        this.#logger.warn("election_retry", {
          stream: this.#o.stream,
          node: this.#o.node,
          error: err instanceof Error ? err.message : String(err),
        });
        await sleep(backoffDelay(++attempt, 100, this.#o.retryMaxMs), signal);
      }
    }
  }

  // Campaigns with `lease` until it is lost (also after winning and holding it).
  async #campaignWith(lease: LeaseKeeper): Promise<void> {
    const signal = AbortSignal.any([this.#stop.signal, lease.lost]);
    while (!signal.aborted) {
      const r = await campaign(this.#client, this.keys, this.#o, lease.id);
      if (r.won) {
        if (!lease.valid()) return;
        await this.#hold(lease, r.term);
        return;
      }
      if (!r.inSync) {
        this.#logger.info("election_not_in_sync", { stream: this.#o.stream, node: this.#o.node });
      }
      await this.#changeAfter(r.revision, signal);
    }
  }

  async #hold(lease: LeaseKeeper, term: number): Promise<void> {
    const l: Leadership = {
      stream: this.#o.stream,
      term,
      leaseId: lease.id,
      valid: () => lease.valid(),
      remainingMs: () => lease.remainingMs(),
      ended: lease.lost,
    };
    this.#leadership = l;
    this.#logger.info("leader_elected", { stream: this.#o.stream, node: this.#o.node, term });
    this.onElected?.(l);
    if (!lease.lost.aborted) {
      await new Promise((r) => lease.lost.addEventListener("abort", r, { once: true }));
    }
    this.#leadership = null;
    const why = lease.lostWhy ?? "ended";
    this.#logger.warn("leader_ended", { stream: this.#o.stream, node: this.#o.node, term, why });
    this.onEnded?.(l, why);
  }

  // Waits for a change to the stream's keys after `revision`, at most a lease TTL.
  async #changeAfter(revision: number, signal: AbortSignal): Promise<void> {
    const bound = AbortSignal.any([signal, AbortSignal.timeout(this.#o.ttlSeconds * 1000)]);
    const watch = watchKeys(this.#client, this.keys.dir, {
      prefix: true,
      fromRevision: revision + 1,
      signal: bound,
    });
    try {
      for await (const _ of watch) return;
    } catch {
      // compacted or unreachable: read again
    }
  }
}
