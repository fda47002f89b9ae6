/**
 * The follower's side of replication: one WebSocket to the stream's leader
 * (`replication_wire.ts`).
 *
 * 1. The leader's hello carries its `stream_id`, term, term history and end.
 *    A different `stream_id` is never mixed in: the sink stops for good
 *    ({@linkcode OtherStreamError}). A leader of a term older than this log's
 *    latest is stale: the sink closes and the caller tries again later.
 * 2. The follower cuts its tail where its history and the leader's part
 *    (`truncationPoint`, every term of both compared): what it holds under
 *    a term the leader never had, or past where a term ended in the
 *    leader's log, was never committed. The cut
 *    is counted and logged. Then it asks for the rows from its end.
 * 3. Each commit is appended as the leader made it — its rows' bytes, its
 *    append times, its producer records (`Replication.appendCommit`) — with
 *    the next commit taken while the previous one is still being synced, and
 *    the durable end is reported back after each fsync (in a microtask, not
 *    a later turn of the event loop). Rows may come before the leader's own
 *    fsync of them: they are committed only once the leader's fsync covers
 *    them too, and a leader that restarts without them makes this node cut
 *    them at its next hello (step 2). A commit of a term
 *    this log has not recorded records that term first.
 * 4. The commit index the leader sends tells the log which rows it may show
 *    (`Replication.commitThrough`).
 *
 * @module
 */

import { Logger } from "../common/logger.ts";
import type { ReplicaCommit, Replication } from "../log/replica/replication.ts";
import { truncationPoint } from "../log/replica/term_history.ts";
import {
  type ControlMessage,
  decodeCommit,
  openReplicationSocket,
  parseControl,
  ReplicationWireError,
  type WireCommit,
} from "./replication_wire.ts";

/**
 * The leader serves another stream (its `stream_id` differs): never mixed in.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { OtherStreamError } from "./replica_sink.ts";
 * const err = new OtherStreamError("trades", "a".repeat(32), "b".repeat(32));
 * equal(err.name, "OtherStreamError");
 * ```
 */
export class OtherStreamError extends Error {
  /** The ids of this node's log and of the leader's. */
  constructor(stream: string, mine: string, theirs: string) {
    super(
      `stream "${stream}": the leader's stream_id ${theirs} is not this log's ${mine}; ` +
        `not following it`,
    );
    this.name = "OtherStreamError";
  }
}

/**
 * The `ws://` URL of a stream's replication route on the node at `baseUrl`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { replicateUrl } from "./replica_sink.ts";
 * equal(replicateUrl("http://127.0.0.1:8801", "trades", "n2"), "ws://127.0.0.1:8801/trades/replicate?node=n2");
 * equal(replicateUrl("https://h:1/", "", "n2"), "wss://h:1/_/replicate?node=n2");
 * ```
 */
export function replicateUrl(baseUrl: string, stream: string, node: string): string {
  const u = new URL(baseUrl);
  u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
  u.pathname = `/${stream === "" ? "_" : encodeURIComponent(stream)}/replicate`;
  u.search = `?node=${encodeURIComponent(node)}`;
  return u.href;
}

/** Options of a {@linkcode ReplicaSink}. */
export interface ReplicaSinkOptions {
  /** This node's name. */
  node: string;
  /** The stream's name. */
  stream: string;
  /** The leader's advertised URL. */
  leaderUrl: string;
  /**
   * Appends a commit (what the server wraps to queue the rows for its own
   * fan-out). @default `rep.appendCommit`
   */
  append?: (commit: ReplicaCommit) => Promise<number>;
  /** Told the leader's in-sync set, at the handshake and on each change. */
  onInSync?: (nodes: string[]) => void;
  /**
   * Told once, when this log holds every row the leader said was committed
   * and every row the leader held when it greeted this node (a leader's
   * commit index may lag after its restart; its log holds every committed
   * row): a node that joined with a new log may campaign from then on.
   */
  onCaughtUp?: () => void;
  /** Told each cut of this log's tail: where, and how many rows went. */
  onCut?: (at: number, rows: number) => void;
  /** How long to wait for the socket and the hello, ms. @default 10000 */
  connectMs?: number;
  /**
   * The cluster's token, for a leader that guards its replicate route, sent
   * as the `bearer.TOKEN` subprotocol (beside `streamcast`). @default none
   */
  token?: string;
  /**
   * This node's registration instance id (`nodes.ts`), sent in the
   * `streamcast-instance` header: the leader admits only the process
   * that holds the node's live registration. @default none
   */
  instance?: string;
  /** Where events are reported. @default a text Logger on stderr */
  logger?: Logger;
}

/**
 * How a sink's connection ended: the socket closed (`code`, `reason`), or an
 * error the sink met (a message it could not take, a failed append).
 */
export interface SinkEnd {
  /** The close code (0 when the socket never opened). */
  code: number;
  /** The close reason. */
  reason: string;
  /** What went wrong on this side, if anything did. */
  error: Error | null;
}

/**
 * One replication connection of a follower to its leader.
 *
 * @example
 * ```ts ignore
 * const sink = new ReplicaSink(log.replication!, { node: "n2", stream: "trades", leaderUrl: leader.url });
 * const end = await sink.run(signal); // until the socket closes
 * ```
 */
export class ReplicaSink {
  readonly #rep: Replication;
  readonly #o: ReplicaSinkOptions;
  readonly #logger: Logger;
  readonly #append: (commit: ReplicaCommit) => Promise<number>;
  #socket: WebSocket | null = null;
  #chain: Promise<void> = Promise.resolve();
  #pending = new Set<Promise<unknown>>();
  #ackQueued = false;
  #error: Error | null = null;
  #handshaken = false;
  #stopped = false;
  #leaderCommit = Infinity;
  // The leader's end at its hello: a joining node holds every committed row once past it.
  #leaderEnd = Infinity;
  #caughtUp = false;
  #ended: ((code: number, reason: string) => void) | null = null;

  /** A sink (not connected) writing into `rep`. */
  constructor(rep: Replication, options: ReplicaSinkOptions) {
    this.#rep = rep;
    this.#o = options;
    this.#logger = options.logger ?? new Logger();
    this.#append = options.append ?? ((c) => rep.appendCommit(c));
  }

  /** Whether the handshake is done (rows are being received). */
  get live(): boolean {
    return this.#handshaken;
  }

  /**
   * Connects, cuts this log's tail where it parts from the leader's, and
   * takes commits until the socket closes, `signal` aborts, or an error.
   * Resolves once every commit taken is durable or failed.
   *
   * @throws {OtherStreamError} when the leader serves another stream.
   */
  async run(signal?: AbortSignal): Promise<SinkEnd> {
    const url = replicateUrl(this.#o.leaderUrl, this.#o.stream, this.#o.node);
    const token = this.#o.token;
    const instance = this.#o.instance;
    const socket = openReplicationSocket(url, { token, instance });
    socket.binaryType = "arraybuffer";
    this.#socket = socket;
    const connectMs = this.#o.connectMs ?? 10_000;
    let stop!: () => void;
    // Ended when the socket closes, or at once when told to stop or when this
    // side gives up: a peer that is paused never finishes the close handshake.
    const ended = new Promise<SinkEnd>((resolve) => {
      socket.addEventListener("close", (e) => {
        resolve({ code: e.code, reason: e.reason, error: null });
      }, { once: true });
      this.#ended = (code, reason) => resolve({ code, reason, error: null });
      stop = () => this.#close(1000, "follower stopped");
    });
    signal?.addEventListener("abort", stop, { once: true });
    const timer = setTimeout(() => {
      if (!this.#handshaken) this.#fail(new Error(`no hello from ${url} within ${connectMs} ms`));
    }, connectMs);
    socket.addEventListener("message", (e) => {
      if (this.#stopped) return; // closed on this side: nothing more is taken
      this.#chain = this.#chain.then(() => this.#onMessage(e.data)).catch((err) => this.#fail(err));
    });
    try {
      const end = await ended;
      await this.#chain;
      await Promise.allSettled([...this.#pending]);
      if (this.#error instanceof OtherStreamError) throw this.#error;
      return { ...end, error: this.#error };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", stop);
      this.#socket = null;
    }
  }

  #fail(err: unknown): void {
    this.#error ??= err instanceof Error ? err : new Error(String(err));
    this.#close(4400, this.#error.message.slice(0, 120));
  }

  #close(code: number, reason: string): void {
    this.#stopped = true;
    try {
      this.#socket?.close(code, reason);
    } catch {
      // already closing
    }
    this.#ended?.(code, reason);
  }

  async #onMessage(data: unknown): Promise<void> {
    if (this.#error || this.#stopped) return;
    if (typeof data === "string") {
      const m = parseControl(data);
      if (m.type === "hello" && !this.#handshaken) return await this.#hello(m);
      if (m.type === "commit" && this.#handshaken) {
        this.#leaderCommit = m.index;
        this.#checkCaughtUp();
        return this.#rep.commitThrough(m.index);
      }
      if (m.type === "in_sync" && this.#handshaken) return this.#o.onInSync?.(m.nodes);
      throw new ReplicationWireError(`unexpected ${m.type} from the leader`);
    }
    if (!this.#handshaken) throw new ReplicationWireError("rows before the hello");
    const commit = decodeCommit(new Uint8Array(data as ArrayBuffer));
    await this.#take(commit);
  }

  async #hello(m: Extract<ControlMessage, { type: "hello" }>): Promise<void> {
    const rep = this.#rep;
    if (m.stream_id !== rep.streamId) {
      throw new OtherStreamError(this.#o.stream, rep.streamId, m.stream_id);
    }
    // Rows this node wrote while it led, still in flight, land before the
    // comparison: the cut must cover them.
    await rep.settled();
    const mine = rep.terms;
    const latest = mine.at(-1)?.term ?? 0;
    if (m.term < latest) {
      throw new Error(`the leader's term ${m.term} is older than this log's ${latest}`);
    }
    const end = rep.durableEnd;
    // Rows this node knows committed are the leader's too: the comparison
    // starts at their end.
    const at = truncationPoint(mine, end, m.terms, m.end, rep.gate.end);
    if (at < end) {
      const cut = await rep.cutTail(at);
      this.#logger.warn("replica_tail_cut", {
        stream: this.#o.stream,
        node: this.#o.node,
        from: at,
        to: end - 1,
        rows: cut.rows,
        leader_term: m.term,
      });
      this.#o.onCut?.(at, cut.rows);
    }
    this.#handshaken = true;
    this.#socket?.send(JSON.stringify({ type: "from", from: rep.durableEnd }));
    rep.commitThrough(m.commit);
    this.#leaderCommit = m.commit;
    this.#leaderEnd = m.end;
    this.#checkCaughtUp();
  }

  async #take(commit: WireCommit): Promise<void> {
    const rep = this.#rep;
    const latest = rep.terms.at(-1)?.term ?? 0;
    if (commit.term > latest) await rep.beginTerm(commit.term, commit.first);
    const c: ReplicaCommit = { first: commit.first, runs: commit.runs, records: commit.records };
    // At the next offset the rows are placed at once; past a fenced gap (or
    // over rows held already) only later, so the next commit waits for it.
    const inPlace = commit.first === rep.nextOffset;
    const done = this.#append(c).then(() => this.#ack());
    if (!inPlace) {
      await done;
      return;
    }
    this.#pending.add(done);
    done.catch((err) => this.#fail(err)).finally(() => this.#pending.delete(done));
  }

  #checkCaughtUp(): void {
    const end = this.#rep.durableEnd;
    if (this.#caughtUp || end < this.#leaderCommit || end < this.#leaderEnd) return;
    this.#caughtUp = true;
    this.#o.onCaughtUp?.();
  }

  // Reported in a microtask after the sync: commits whose syncs end
  // together share one report, and none waits for a turn of the event loop
  // (the leader's ack waits for it).
  #ack(): void {
    this.#checkCaughtUp();
    if (this.#ackQueued) return;
    this.#ackQueued = true;
    queueMicrotask(() => {
      this.#ackQueued = false;
      const s = this.#socket;
      if (s && s.readyState === WebSocket.OPEN) {
        s.send(JSON.stringify({ type: "durable", end: this.#rep.durableEnd }));
      }
    });
  }
}
