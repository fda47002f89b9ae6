/**
 * Following who leads a stream: the leader key read once, then watched, and
 * read again every `pollMs` (a watch on a paused or cut-off etcd member can
 * stay silent; the read then fails or answers, either way the view is
 * refreshed). Followers learn from it where to replicate from and which
 * term leads; publishers to a follower are sent to `current.url`.
 *
 * @module
 */

import { sleep } from "../common/backoff.ts";
import type { EtcdClient } from "./etcd_client.ts";
import { watchKeys } from "./etcd_watch.ts";
import { DEFAULT_PREFIX, type StreamKeys, streamKeys } from "./keys.ts";
import { type LeaderInfo, parseLeader } from "./leader_info.ts";

/** Options of a {@linkcode LeaderWatch}. */
export interface LeaderWatchOptions {
  /** The prefix of the cluster's keys. @default "/streamcast" */
  prefix?: string;
  /** How often the leader key is read besides the watch, ms. @default 2000 */
  pollMs?: number;
}

function same(a: LeaderInfo | null, b: LeaderInfo | null): boolean {
  return a === b ||
    (a !== null && b !== null && a.node === b.node && a.url === b.url && a.term === b.term &&
      a.lease === b.lease);
}

/**
 * Who leads `stream`, kept current; `onChange` is told each change (null:
 * no leader now).
 *
 * @example
 * ```ts ignore
 * const watch = new LeaderWatch(etcd, "trades");
 * watch.onChange = (l) => console.log(l ? `leader ${l.node} term ${l.term}` : "no leader");
 * watch.start();
 * await watch.close();
 * ```
 */
export class LeaderWatch {
  /** The stream's keys. */
  readonly keys: StreamKeys;
  /** Told each change of leader (or of its term). */
  onChange: ((leader: LeaderInfo | null) => void) | null = null;
  readonly #client: EtcdClient;
  readonly #pollMs: number;
  readonly #stop = new AbortController();
  #current: LeaderInfo | null = null;
  #known = false;
  #running: Promise<void> | null = null;
  readonly #waiters = new Set<() => void>();

  /** A watch (not started) of who leads `stream`. */
  constructor(client: EtcdClient, stream: string, options: LeaderWatchOptions = {}) {
    this.#client = client;
    this.keys = streamKeys(stream, options.prefix ?? DEFAULT_PREFIX);
    this.#pollMs = options.pollMs ?? 2000;
  }

  /** The leader last seen (null: none, or not read yet). */
  get current(): LeaderInfo | null {
    return this.#current;
  }

  /** Whether the leader key was read at least once. */
  get known(): boolean {
    return this.#known;
  }

  /** Starts watching (once). */
  start(): void {
    this.#running ??= this.#run();
  }

  /** Resolves once `check(current)` holds (false: closed first). */
  async until(check: (leader: LeaderInfo | null) => boolean): Promise<boolean> {
    while (!this.#stop.signal.aborted) {
      if (this.#known && check(this.#current)) return true;
      await new Promise<void>((resolve) => this.#waiters.add(resolve));
    }
    return false;
  }

  /** Stops watching. */
  async close(): Promise<void> {
    this.#stop.abort();
    this.#wake();
    await this.#running;
  }

  #wake(): void {
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const w of waiters) w();
  }

  #set(leader: LeaderInfo | null): void {
    const first = !this.#known;
    this.#known = true;
    if (!first && same(leader, this.#current)) return;
    this.#current = leader;
    this.onChange?.(leader);
    this.#wake();
  }

  async #run(): Promise<void> {
    const stop = this.#stop.signal;
    while (!stop.aborted) {
      let revision: number;
      try {
        const r = await this.#client.range(this.keys.leader, { signal: stop });
        revision = r.revision;
        this.#set(r.kvs[0] ? parseLeader(r.kvs[0]) : null);
      } catch {
        if (stop.aborted) return;
        await sleep(this.#pollMs / 4, stop);
        continue;
      }
      // Watch until the next read is due.
      const round = AbortSignal.any([stop, AbortSignal.timeout(this.#pollMs)]);
      try {
        for await (
          const events of watchKeys(this.#client, this.keys.leader, {
            fromRevision: revision + 1,
            signal: round,
            idleMs: this.#pollMs,
          })
        ) {
          const e = events[events.length - 1];
          this.#set(e.type === "delete" ? null : parseLeader(e.kv));
        }
      } catch {
        // compacted, or a damaged record: read afresh
      }
    }
  }
}
