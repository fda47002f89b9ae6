/**
 * A standalone server's admin of streams created and deleted while serving
 * ({@linkcode LocalStreamAdmin}, answering the admin routes: `../stream_admin.ts`):
 * definitions kept in `ROOT/streams.json`, streams opened and closed on the
 * server's live set ({@linkcode StreamHost}).
 *
 * @module
 */

import { join } from "node:path";
import type { Logger } from "../../common/logger.ts";
import { isNoSpace } from "../../common/free_space.ts";
import { DiskFullError } from "../stream/disk_gate.ts";
import { CloseCode } from "../../wire/close_reason.ts";
import type { Stream } from "../stream/stream.ts";
import { compareDefinitions, type StreamDefinition } from "../stream_definition.ts";
import {
  type AdminAnswer,
  declaredAnswer,
  describeStream,
  type StreamAdmin,
  type StreamDescription,
} from "../stream_admin.ts";
import { STREAMS_FILE, writeStreamsFile } from "./streams_file.ts";

/** The server's live set of streams, as the admin changes it. */
export interface StreamHost {
  /** Streams served now. */
  readonly size: number;
  /** Stream `name`, when it is served. */
  get(name: string): Stream | undefined;
  /** Serves `stream` from the next request on (`publish`: it takes network publishes). */
  add(stream: Stream, publish: boolean): void;
  /**
   * Stops serving `name`: the next request does not find it; its
   * subscribers and publishers are closed with `code` and `reason`. Returns
   * the stream (for its owner to close), or null when it was not served.
   */
  remove(name: string, code: number, reason: string): Stream | null;
}

/** The close reason of a deleted stream's sockets. */
export const STREAM_DELETED_REASON = JSON.stringify({ error: "stream_deleted" });

/** What a {@linkcode LocalStreamAdmin} is made with. */
export interface LocalStreamAdminOptions {
  /** The server's root: `ROOT/streams.json`, and `ROOT/NAME` for each stream's log. */
  readonly root: string;
  /** Streams declared by flags or the config file (null: followed, defined by its primary). */
  readonly declared: ReadonlyMap<string, StreamDefinition | null>;
  /** Streams created earlier (from `streams.json`), already opened and served. */
  readonly recorded: ReadonlyMap<string, StreamDefinition>;
  /** Most streams served at once. */
  readonly maxStreams: number;
  /** Opens stream `name` as `definition` says (its log under the root unless ephemeral). */
  open(name: string, definition: StreamDefinition): Promise<Stream>;
  /** Where events go. */
  readonly logger: Logger;
}

/**
 * The admin of a standalone server: one change at a time, each recorded in
 * `ROOT/streams.json` before it is answered.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Logger } from "../../common/logger.ts";
 * import { Stream } from "../stream/stream.ts";
 * import { parseDefinition } from "../stream_definition.ts";
 * import { LocalStreamAdmin } from "./local_admin.ts";
 * const served = new Map<string, Stream>();
 * const root = await Deno.makeTempDir();
 * const admin = new LocalStreamAdmin({
 *   root, declared: new Map(), recorded: new Map(), maxStreams: 10,
 *   open: (name, d) => Promise.resolve(Stream.ephemeral(name, { schema: d.schema })),
 *   logger: Logger.silent(),
 * });
 * admin.attach({
 *   get size() { return served.size; },
 *   get: (n) => served.get(n),
 *   add: (s) => void served.set(s.name, s),
 *   remove: (n) => { const s = served.get(n) ?? null; served.delete(n); return s; },
 * });
 * const schema = { type: "object", properties: { v: { type: "number" } }, required: ["v"] };
 * equal((await admin.put("q", parseDefinition({ schema, ephemeral: true }))).status, 201);
 * equal((await admin.put("q", parseDefinition({ schema, ephemeral: true }))).status, 200);
 * equal((await admin.delete("q")).status, 204);
 * equal(served.size, 0);
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export class LocalStreamAdmin implements StreamAdmin {
  readonly #o: LocalStreamAdminOptions;
  readonly #recorded: Map<string, StreamDefinition>;
  #host: StreamHost | null = null;
  // One change at a time: each waits for the one before.
  #queue: Promise<unknown> = Promise.resolve();

  /** Made before the server; {@linkcode LocalStreamAdmin.attach} gives it the server's set. */
  constructor(options: LocalStreamAdminOptions) {
    this.#o = options;
    this.#recorded = new Map(options.recorded);
  }

  /** The server's live set, once it is serving. */
  attach(host: StreamHost): void {
    this.#host = host;
  }

  #serial<T>(f: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(f, f);
    this.#queue = next.catch(() => {});
    return next;
  }

  #hostOrThrow(): StreamHost {
    if (this.#host === null) throw new Error("LocalStreamAdmin: not attached to a server");
    return this.#host;
  }

  describe(name: string): StreamDescription | null {
    return describeStream(this.#o.declared, this.#recorded, name);
  }

  put(name: string, definition: StreamDefinition): Promise<AdminAnswer> {
    return this.#serial(() => this.#put(name, definition));
  }

  delete(name: string): Promise<AdminAnswer> {
    return this.#serial(() => this.#delete(name));
  }

  async #put(name: string, definition: StreamDefinition): Promise<AdminAnswer> {
    const host = this.#hostOrThrow();
    const { logger } = this.#o;
    if (name === STREAMS_FILE || name.startsWith(`${STREAMS_FILE}.`)) {
      // Its log's folder would be the file that records the created streams.
      const detail = `the name ${JSON.stringify(name)} is taken by ROOT/${STREAMS_FILE}`;
      return { status: 400, body: { error: "bad_request", detail } };
    }
    if (this.#o.declared.has(name)) {
      const d = this.#o.declared.get(name)!;
      if (d !== null && compareDefinitions(d, definition).kind === "same") {
        return { status: 200, body: { stream: name, stream_id: streamIdOf(host, name) } };
      }
      return declaredAnswer(name);
    }
    const before = this.#recorded.get(name);
    if (before !== undefined) {
      const change = compareDefinitions(before, definition);
      if (change.kind === "conflict") {
        return { status: 409, body: { error: "conflict", detail: change.detail } };
      }
      if (change.kind === "grows") {
        // The stream is opened again with the grown schema (it applies from the
        // log's end); its subscribers are closed with 1001 and resume where they were.
        const old = host.remove(name, CloseCode.GoingAway, "");
        await old?.close();
        let stream: Stream;
        try {
          stream = await this.#o.open(name, definition);
        } catch (err) {
          host.add(await this.#o.open(name, before), before.publish);
          return openRefused(name, err, logger);
        }
        host.add(stream, definition.publish);
        this.#recorded.set(name, definition);
        await writeStreamsFile(this.#o.root, this.#recorded);
        logger.info("stream_schema_grown", { stream: name });
      }
      return { status: 200, body: { stream: name, stream_id: streamIdOf(host, name) } };
    }
    if (host.size >= this.#o.maxStreams) {
      return {
        status: 409,
        body: {
          error: "too_many_streams",
          detail:
            `this server serves ${host.size} streams, its most (--max-streams ${this.#o.maxStreams})`,
        },
      };
    }
    let stream: Stream;
    try {
      stream = await this.#o.open(name, definition);
    } catch (err) {
      return openRefused(name, err, logger);
    }
    this.#recorded.set(name, definition);
    try {
      await writeStreamsFile(this.#o.root, this.#recorded);
    } catch (err) {
      this.#recorded.delete(name);
      await stream.close();
      // A full disk refuses the streams file as it may refuse the log: the same answer.
      if (isNoSpace(err)) return openRefused(name, err, logger);
      throw err;
    }
    host.add(stream, definition.publish);
    logger.info("stream_created", { stream: name, stream_id: stream.streamId });
    return { status: 201, body: { stream: name, stream_id: stream.streamId } };
  }

  async #delete(name: string): Promise<AdminAnswer> {
    const host = this.#hostOrThrow();
    if (this.#o.declared.has(name)) return declaredAnswer(name);
    const def = this.#recorded.get(name);
    if (def === undefined) {
      return {
        status: 404,
        body: { error: "not_found", detail: `no stream ${JSON.stringify(name)}` },
      };
    }
    const stream = host.remove(name, CloseCode.StreamDeleted, STREAM_DELETED_REASON);
    await stream?.close();
    this.#recorded.delete(name);
    await writeStreamsFile(this.#o.root, this.#recorded);
    // The local folder goes; an archive is left alone.
    if (!def.ephemeral) {
      await Deno.remove(join(this.#o.root, name), { recursive: true }).catch(() => {});
    }
    this.#o.logger.info("stream_deleted", { stream: name });
    return { status: 204, body: null };
  }
}

function streamIdOf(host: StreamHost, name: string): string | null {
  return host.get(name)?.streamId ?? null;
}

// The answer when a stream cannot be opened as defined: its folder holds a
// log the definition does not fit (a refused schema, options: 409), the disk
// is full (507 disk_full, as a publish to a full disk answers), or the disk
// or the system says no otherwise (503: the request was fine, the server
// cannot serve it now). The last two are logged once, here.
function openRefused(name: string, err: unknown, logger: Logger): AdminAnswer {
  const detail = err instanceof Error ? err.message : String(err);
  if (err instanceof TypeError || err instanceof RangeError) {
    return { status: 409, body: { error: "conflict", detail } };
  }
  const stream = JSON.stringify(name);
  if (err instanceof DiskFullError || isNoSpace(err)) {
    logger.warn("stream_open_failed", { stream: name, why: "disk_full", error: detail });
    return {
      status: 507,
      body: {
        error: "disk_full",
        detail: `stream ${stream} cannot be opened: the disk of its folder is full (${detail})`,
      },
    };
  }
  logger.error("stream_open_failed", { stream: name, error: detail });
  return {
    status: 503,
    body: { error: "unavailable", detail: `stream ${stream} cannot be opened: ${detail}` },
  };
}
