/**
 * `serve --cluster`'s streams created while serving: their definitions live
 * in etcd (`PREFIX/definitions/NAME`), and every node opens a stream when
 * its definition appears and closes it when it is removed, as it watches
 * them ({@linkcode ClusterStreamAdmin}). A `PUT` or `DELETE` is answered
 * once etcd holds the change; a write whose answer was lost is read back
 * before it is answered. A stream this node fails to open (its disk is full,
 * say) is tried again every second until it opens or its definition goes.
 * A stream whose node stopped (its log stopped for good: a write failed
 * after the commit was shipped, on a full disk say) is closed — its
 * subscribers get 1001 and resume — and opened again the same way, declared
 * or created: its log recovers to what is on disk and the node rejoins as a
 * follower.
 *
 * @module
 */

import { join } from "node:path";
import type { Logger } from "../../common/logger.ts";
import { sleep } from "../../common/backoff.ts";
import { EtcdIndeterminateError } from "../../cluster/etcd_client.ts";
import { watchKeys } from "../../cluster/etcd_watch.ts";
import { definitionsDir, streamKeys } from "../../cluster/keys.ts";
import { CloseCode } from "../../wire/close_reason.ts";
import {
  compareDefinitions,
  DefinitionError,
  definitionJson,
  parseDefinition,
  type StreamDefinition,
} from "../../server/stream_definition.ts";
import {
  type AdminAnswer,
  declaredAnswer,
  describeStream,
  type StreamAdmin,
  type StreamDescription,
} from "../../server/stream_admin.ts";
import { STREAM_DELETED_REASON } from "../../server/admin/local_admin.ts";
import type { ServedStream, Server } from "../../server/serve.ts";
import type { ClusterJoined } from "./cluster.ts";
import { definedOptions } from "./created_streams.ts";
import { Fatal, oneLine, show } from "./fatal.ts";
import type { Settings } from "./run_settings.ts";
import { DEFAULT_MAX_STREAMS } from "../../server/limits.ts";
import { removeDeletedStreamFolders, writeCreatedStreamMark } from "./created_stream_mark.ts";

/** How long an answer waits for this node to open or close the stream, ms. */
const APPLY_WAIT_MS = 10_000;
/** Attempts of a write that lost a race with another node's. */
const WRITE_ATTEMPTS = 5;
/** How often a stream this node failed to open is tried again, ms. */
export const OPEN_RETRY_MS = 1000;
/**
 * How long one change of the streams served (an open, a close, a reopen)
 * may run before the node says that it still waits, and again each time as
 * long again: every later change waits behind it.
 */
const SLOW_CHANGE_MS = 30_000;

function unavailable(err: unknown): AdminAnswer {
  return { status: 503, body: { error: "unavailable", detail: `etcd: ${oneLine(err)}` } };
}

/**
 * The admin of a cluster node: definitions in etcd, streams opened and
 * closed on every node as they appear and go.
 */
export class ClusterStreamAdmin implements StreamAdmin {
  readonly #cluster: ClusterJoined;
  readonly #s: Settings;
  readonly #declared: ReadonlyMap<string, StreamDefinition | null>;
  readonly #logger: Logger;
  readonly #dir: string;
  // The definitions this node serves now, as applied from etcd.
  readonly #defs = new Map<string, StreamDefinition>();
  // Those read at start, opened before serving.
  readonly #initial: Map<string, StreamDefinition>;
  #revision: number;
  #server: Server | null = null;
  #queue: Promise<unknown> = Promise.resolve();
  readonly #ac = new AbortController();
  #watching: Promise<void> | null = null;
  // Definitions this node failed to open, tried again every OPEN_RETRY_MS.
  readonly #unopened = new Map<string, StreamDefinition>();
  // Streams whose node stopped and that have not opened again yet, each with
  // the error its last failed try said (said again only when it changes), or
  // null when no try has said one since it was last tried afresh (its
  // definition came back unchanged): the next failure is said whatever it is.
  readonly #stopped = new Map<string, string | null>();
  // Streams (stopped, or failed to open) with a try queued by the retry timer
  // and not begun yet.
  readonly #retrying = new Set<string>();
  #retryTimer: ReturnType<typeof setInterval> | undefined;

  private constructor(
    cluster: ClusterJoined,
    s: Settings,
    declared: ReadonlyMap<string, StreamDefinition | null>,
    initial: Map<string, StreamDefinition>,
    revision: number,
    logger: Logger,
  ) {
    this.#cluster = cluster;
    this.#s = s;
    this.#declared = declared;
    this.#initial = initial;
    this.#revision = revision;
    this.#logger = logger;
    this.#dir = definitionsDir(cluster.prefix);
  }

  /**
   * Reads the cluster's definitions; a {@linkcode Fatal} for one that does
   * not parse or names a declared stream with another definition.
   */
  static async load(
    cluster: ClusterJoined,
    s: Settings,
    declared: ReadonlyMap<string, StreamDefinition | null>,
    logger: Logger,
  ): Promise<ClusterStreamAdmin> {
    const dir = definitionsDir(cluster.prefix);
    let listed;
    try {
      listed = await cluster.etcd.range(dir, { prefix: true });
    } catch (err) {
      throw new Fatal(`cannot read the cluster's stream definitions: ${oneLine(err)}`, 1);
    }
    const initial = new Map<string, StreamDefinition>();
    for (const kv of listed.kvs) {
      const name = kv.key.slice(dir.length);
      let def: StreamDefinition;
      try {
        def = parseDefinition(JSON.parse(kv.value));
      } catch (err) {
        throw new Fatal(`${show(name)}: its definition in etcd (${kv.key}): ${oneLine(err)}`, 1);
      }
      if (declared.has(name)) {
        const d = declared.get(name)!;
        const change = d === null ? null : compareDefinitions(def, d);
        if (change === null || change.kind !== "same") {
          throw new Fatal(
            `${show(name)} is declared and also defined in the cluster (${kv.key}) with another ` +
              `definition${change?.kind === "conflict" ? ` (${change.detail})` : ""}: ` +
              "remove one of them",
            2,
          );
        }
        continue;
      }
      initial.set(name, def);
    }
    return new ClusterStreamAdmin(cluster, s, declared, initial, listed.revision, logger);
  }

  /**
   * Removes the folders of created streams deleted (or deleted and created
   * again) while this node was down (see `created_stream_mark.ts`), then
   * opens the streams defined at start (their nodes not started); on a
   * failure a {@linkcode Fatal}.
   */
  async openInitial(): Promise<{ served: ServedStream[]; publish: string[] }> {
    const etcd = this.#cluster.etcd;
    const prefix = this.#cluster.prefix;
    try {
      await removeDeletedStreamFolders(this.#s.root, {
        prefix,
        declared: (name) => this.#declared.has(name),
        defined: (name) => this.#initial.has(name),
        clusterStreamId: async (name) => {
          const kv = await etcd.get(streamKeys(name, prefix).streamId);
          if (kv === null) return null;
          const v = JSON.parse(kv.value) as { stream_id?: unknown };
          return typeof v.stream_id === "string" ? v.stream_id : null;
        },
      }, this.#logger);
    } catch (err) {
      throw new Fatal(`cannot clear the folders of deleted streams: ${oneLine(err)}`, 1);
    }
    const served: ServedStream[] = [];
    const publish: string[] = [];
    for (const [name, def] of this.#initial) {
      try {
        const opened = await this.#cluster.open(name, this.#options(def));
        served.push(opened);
        await this.#mark(name, opened);
      } catch (err) {
        throw new Fatal(`${show(name)} (defined in the cluster): ${oneLine(err)}`, 1);
      }
      this.#defs.set(name, def);
      if (def.publish) publish.push(name);
    }
    return { served, publish };
  }

  // Marks the folder as this node's copy of a created stream, so that it is
  // removed at a later start if the stream was deleted meanwhile. A mark
  // that cannot be written (a full disk, say) is said and the stream served:
  // it is written again the next time the stream is opened here.
  async #mark(name: string, served: ServedStream): Promise<void> {
    const streamId = served.stream.streamId;
    if (streamId === null) return;
    try {
      await writeCreatedStreamMark(join(this.#s.root, name), {
        stream: name,
        stream_id: streamId,
        prefix: this.#cluster.prefix,
      });
    } catch (err) {
      this.#logger.warn("stream_mark_failed", { stream: name, error: oneLine(err) });
    }
  }

  #options(def: StreamDefinition) {
    return { ...definedOptions(this.#s, def, this.#logger), root: this.#s.root };
  }

  /** Starts watching the definitions, opening and closing streams on `server`. */
  attach(server: Server): void {
    this.#server = server;
    this.#cluster.onStopped = (name, err) => {
      this.#logger.warn("stream_reopening", {
        stream: name,
        error: oneLine(err),
        detail: "its log stopped; closing it and opening it again",
      });
      void this.#serial({ change: "reopen", stream: name }, () => this.#reopen(name));
    };
    this.#watching = this.#watch();
  }

  // Opens again stream `name`, whose node stopped; on a failure, tried again
  // every OPEN_RETRY_MS while it is still served here.
  async #reopen(name: string): Promise<void> {
    const server = this.#server!;
    if (this.#ac.signal.aborted) return;
    const def = this.#defs.get(name);
    const declared = this.#s.streams.get(name);
    if (def === undefined && declared === undefined) {
      this.#stopped.delete(name);
      return;
    }
    // Tried before: its stream was removed from the server by the first try.
    const retried = this.#stopped.has(name);
    const last = this.#stopped.get(name) ?? null;
    this.#stopped.delete(name);
    if (!retried) server.removeStream(name, CloseCode.GoingAway, "", "its log stopped");
    try {
      const served = await this.#cluster.reopen(name);
      if (def !== undefined) await this.#mark(name, served);
      server.addStream(served, { publish: (def ?? declared)!.publish === true });
      this.#cluster.nodes.get(name)?.start();
      this.#logger.info("stream_reopened", { stream: name, stream_id: served.stream.streamId });
    } catch (err) {
      if (this.#ac.signal.aborted) return;
      const why = oneLine(err);
      if (why !== last) {
        this.#logger.error("stream_reopen_failed", {
          stream: name,
          error: why,
          detail: `trying again every ${OPEN_RETRY_MS / 1000} s`,
        });
      }
      this.#stopped.set(name, why);
      this.#retryTimer ??= setInterval(() => this.#retryOpens(), OPEN_RETRY_MS);
    }
  }

  /** Stops watching (before the server shuts down). */
  async stop(): Promise<void> {
    this.#ac.abort();
    clearInterval(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#unopened.clear();
    this.#stopped.clear();
    this.#retrying.clear();
    this.#cluster.onStopped = null;
    await this.#watching;
    await this.#queue;
  }

  async #watch(): Promise<void> {
    const signal = this.#ac.signal;
    while (!signal.aborted) {
      try {
        for await (
          const events of watchKeys(this.#cluster.etcd, this.#dir, {
            prefix: true,
            fromRevision: this.#revision + 1,
            signal,
          })
        ) {
          for (const e of events) {
            const name = e.kv.key.slice(this.#dir.length);
            this.#revision = Math.max(this.#revision, e.kv.modRevision);
            let def: StreamDefinition | null = null;
            if (e.type === "put") {
              try {
                def = parseDefinition(JSON.parse(e.kv.value));
              } catch (err) {
                this.#logger.error("stream_definition_refused", {
                  stream: name,
                  error: oneLine(err),
                });
                continue;
              }
            }
            await this.#serial({ change: "apply", stream: name }, () => this.#apply(name, def));
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        // A watch that cannot resume (compacted, say): read them all again.
        this.#logger.warn("stream_definitions_resync", { error: oneLine(err) });
        await this.#resync().catch(() => sleep(1000));
      }
    }
  }

  async #resync(): Promise<void> {
    const listed = await this.#cluster.etcd.range(this.#dir, { prefix: true });
    const now = new Map<string, StreamDefinition>();
    for (const kv of listed.kvs) {
      try {
        now.set(kv.key.slice(this.#dir.length), parseDefinition(JSON.parse(kv.value)));
      } catch {
        // Refused when it came; refused again.
      }
    }
    for (const name of [...this.#defs.keys()]) {
      if (!now.has(name)) {
        await this.#serial({ change: "apply", stream: name }, () => this.#apply(name, null));
      }
    }
    for (const [name, def] of now) {
      await this.#serial({ change: "apply", stream: name }, () => this.#apply(name, def));
    }
    this.#revision = listed.revision;
  }

  // Runs `f` once the changes queued before it are done; `what` (its kind
  // and stream) names it in the warning of one that takes long.
  #serial<T>(what: { change: string; stream: string }, f: () => Promise<T>): Promise<T> {
    const run = async () => {
      const since = Date.now();
      const timer = setInterval(() => {
        this.#logger.warn("stream_change_waiting", {
          ...what,
          waited_ms: Date.now() - since,
          detail: "later changes of the streams served wait behind it",
        });
      }, SLOW_CHANGE_MS);
      try {
        return await f();
      } finally {
        clearInterval(timer);
      }
    };
    const next = this.#queue.then(run, run);
    this.#queue = next.catch(() => {});
    return next;
  }

  // Serves `name` as `def` says on this node, or stops serving it (`def` null).
  async #apply(name: string, def: StreamDefinition | null): Promise<void> {
    const server = this.#server!;
    if (this.#declared.has(name)) return;
    const before = this.#defs.get(name);
    const retried = this.#unopened.get(name);
    this.#unopened.delete(name);
    // A stream whose node stopped is opened again below, or goes.
    const stopped = this.#stopped.delete(name);
    if (def === null) {
      if (before === undefined) {
        // Never opened here: what a failed open left goes with it.
        if (retried !== undefined) {
          await Deno.remove(join(this.#s.root, name), { recursive: true }).catch(() => {});
        }
        return;
      }
      this.#defs.delete(name);
      server.removeStream(name, CloseCode.StreamDeleted, STREAM_DELETED_REASON);
      await this.#cluster.close(name);
      // The local folder goes; an archive is left alone.
      await Deno.remove(join(this.#s.root, name), { recursive: true }).catch(() => {});
      this.#logger.info("stream_deleted", { stream: name });
      return;
    }
    if (before !== undefined) {
      if (compareDefinitions(before, def).kind === "same") {
        if (stopped) {
          this.#stopped.set(name, null);
          await this.#reopen(name);
        }
        return;
      }
      // A grown schema: opened again (its subscribers get 1001 and resume).
      this.#defs.delete(name);
      server.removeStream(name, CloseCode.GoingAway, "");
      await this.#cluster.close(name);
    }
    const dir = join(this.#s.root, name);
    const existed = await Deno.stat(dir).then(() => true, () => false);
    try {
      const served = await this.#cluster.open(name, this.#options(def));
      await this.#mark(name, served);
      server.addStream(served, { publish: def.publish });
      this.#cluster.nodes.get(name)?.start();
      this.#defs.set(name, def);
      this.#logger.info(before === undefined ? "stream_created" : "stream_schema_grown", {
        stream: name,
        stream_id: served.stream.streamId,
      });
    } catch (err) {
      // A folder this attempt made holds nothing: the next starts clean.
      if (!existed) await Deno.remove(dir, { recursive: true }).catch(() => {});
      if (this.#ac.signal.aborted) return;
      // Said once; the tries after it are quiet until one works.
      if (retried === undefined) {
        this.#logger.error("stream_open_failed", {
          stream: name,
          error: oneLine(err),
          detail: `trying again every ${OPEN_RETRY_MS / 1000} s`,
        });
      }
      this.#unopened.set(name, def);
      this.#retryTimer ??= setInterval(() => this.#retryOpens(), OPEN_RETRY_MS);
    }
  }

  // Tries again to open each stream that failed to open; stops once none is left.
  #retryOpens(): void {
    for (const name of this.#stopped.keys()) {
      // One try queued at a time: a try that waits out etcd's timeouts takes
      // longer than the retry period, and tries must not pile up behind it.
      if (this.#retrying.has(name)) continue;
      this.#retrying.add(name);
      void this.#serial({ change: "reopen", stream: name }, () => {
        this.#retrying.delete(name);
        return this.#stopped.has(name) ? this.#reopen(name) : Promise.resolve();
      });
    }
    if (this.#unopened.size === 0 && this.#stopped.size === 0) {
      clearInterval(this.#retryTimer);
      this.#retryTimer = undefined;
      return;
    }
    for (const [name, def] of this.#unopened) {
      if (this.#retrying.has(name)) continue;
      this.#retrying.add(name);
      void this.#serial({ change: "apply", stream: name }, () => {
        this.#retrying.delete(name);
        // Only while it is still the definition wanted and not opened meanwhile.
        return this.#unopened.get(name) === def ? this.#apply(name, def) : Promise.resolve();
      });
    }
  }

  describe(name: string): StreamDescription | null {
    return describeStream(this.#declared, this.#defs, name);
  }

  // Waits (bounded) until this node serves `name` as `def` says (null: not at all).
  async #applied(name: string, def: StreamDefinition | null): Promise<void> {
    const deadline = Date.now() + APPLY_WAIT_MS;
    while (Date.now() < deadline) {
      const now = this.#defs.get(name) ?? null;
      if (
        def === null ? now === null : now !== null && compareDefinitions(now, def).kind === "same"
      ) {
        return;
      }
      await sleep(20);
    }
  }

  #answer(status: number, name: string): AdminAnswer {
    return {
      status,
      body: { stream: name, stream_id: this.#server?.streams.get(name)?.streamId ?? null },
    };
  }

  async put(name: string, def: StreamDefinition): Promise<AdminAnswer> {
    if (this.#declared.has(name)) {
      const d = this.#declared.get(name)!;
      if (d !== null && compareDefinitions(d, def).kind === "same") return this.#answer(200, name);
      return declaredAnswer(name);
    }
    if (def.ephemeral) {
      return {
        status: 400,
        body: {
          error: "bad_request",
          detail: "a cluster's streams are durable: ephemeral is refused",
        },
      };
    }
    const etcd = this.#cluster.etcd;
    const key = this.#dir + name;
    const value = JSON.stringify(definitionJson(def));
    try {
      for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
        const kv = await etcd.get(key);
        if (kv !== null) {
          let before: StreamDefinition;
          try {
            before = parseDefinition(JSON.parse(kv.value));
          } catch (err) {
            if (!(err instanceof DefinitionError) && !(err instanceof SyntaxError)) throw err;
            return {
              status: 409,
              body: { error: "conflict", detail: `its definition in etcd: ${oneLine(err)}` },
            };
          }
          const change = compareDefinitions(before, def);
          if (change.kind === "conflict") {
            return { status: 409, body: { error: "conflict", detail: change.detail } };
          }
          if (change.kind === "grows") {
            const wrote = await this.#write(key, value, [
              { key, target: "mod", op: "==", value: kv.modRevision },
            ], [{ put: { key, value } }]);
            if (!wrote) continue;
          }
          await this.#applied(name, def);
          return this.#answer(200, name);
        }
        const listed = await etcd.range(this.#dir, { prefix: true });
        const served = listed.kvs.length + this.#declared.size;
        if (served >= (this.#s.maxStreams ?? DEFAULT_MAX_STREAMS)) {
          return {
            status: 409,
            body: {
              error: "too_many_streams",
              detail: `the cluster serves ${served} streams, its most (--max-streams ${
                this.#s.maxStreams ?? DEFAULT_MAX_STREAMS
              })`,
            },
          };
        }
        // Created only if absent, and what an earlier stream of that name left is cleared.
        const wrote = await this.#write(key, value, [
          { key, target: "create", op: "==", value: 0 },
        ], [
          { delete: { key: streamKeys(name, this.#cluster.prefix).dir, prefix: true } },
          { put: { key, value } },
        ]);
        if (!wrote) continue;
        await this.#applied(name, def);
        return this.#answer(201, name);
      }
      return {
        status: 503,
        body: { error: "unavailable", detail: "other writes kept winning; try again" },
      };
    } catch (err) {
      return unavailable(err);
    }
  }

  // Runs the transaction; true when it applied. An answer lost is read back:
  // applied when the key holds `value` (null: is absent).
  async #write(
    key: string,
    value: string | null,
    compare: Parameters<ClusterJoined["etcd"]["txn"]>[0],
    success: Parameters<ClusterJoined["etcd"]["txn"]>[1],
  ): Promise<boolean> {
    try {
      return (await this.#cluster.etcd.txn(compare, success)).succeeded;
    } catch (err) {
      if (!(err instanceof EtcdIndeterminateError)) throw err;
      const kv = await this.#cluster.etcd.get(key);
      return value === null ? kv === null : kv?.value === value;
    }
  }

  async delete(name: string): Promise<AdminAnswer> {
    if (this.#declared.has(name)) return declaredAnswer(name);
    const etcd = this.#cluster.etcd;
    const key = this.#dir + name;
    try {
      for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
        const kv = await etcd.get(key);
        if (kv === null) {
          return {
            status: 404,
            body: { error: "not_found", detail: `no stream ${JSON.stringify(name)}` },
          };
        }
        const wrote = await this.#write(key, null, [
          { key, target: "mod", op: "==", value: kv.modRevision },
        ], [
          { delete: { key } },
          { delete: { key: streamKeys(name, this.#cluster.prefix).dir, prefix: true } },
        ]);
        if (!wrote) continue;
        await this.#applied(name, null);
        return { status: 204, body: null };
      }
      return {
        status: 503,
        body: { error: "unavailable", detail: "other writes kept winning; try again" },
      };
    } catch (err) {
      return unavailable(err);
    }
  }
}
