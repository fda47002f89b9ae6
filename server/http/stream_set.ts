/**
 * The streams a server serves now, the one place every route, the metrics,
 * `/_/health`, `/head` and the viewer look them up per request: each with
 * the role it plays here and whether it takes network publishes, and the
 * sockets open on it. A stream added is found by the next request; a stream
 * removed is not, and its subscribers and publishers are closed (other
 * streams' are not touched).
 *
 * @module
 */

import type { Registry } from "../metrics.ts";
import { PRIMARY, type StreamRole } from "../role.ts";
import { type Stream, streamInside } from "../stream/stream.ts";

/**
 * The live set of streams of a server.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Registry } from "../metrics.ts";
 * import { Stream } from "../stream/stream.ts";
 * import { StreamSet } from "./stream_set.ts";
 * const set = new StreamSet(new Registry());
 * const s = Stream.ephemeral("t", { schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] } });
 * set.add(s, { publish: false });
 * equal(set.streams.get("t"), s);
 * equal(set.remove("t", 4410, ""), s);
 * equal(set.streams.size, 0);
 * ```
 */
export class StreamSet {
  readonly #streams = new Map<string, Stream>();
  readonly #roles = new Map<string, StreamRole>();
  readonly #publish = new Set<string>();
  readonly #excludes = new Map<string, () => void>();
  // The sockets open on each stream (subscribers, publishers), with how the server closes each.
  readonly #sockets = new Map<string, Map<WebSocket, (code: number, reason: string) => void>>();
  readonly #reopening = new Map<string, string>();
  readonly #registry: Registry;

  /** An empty set whose streams' series are included in `registry` while served. */
  constructor(registry: Registry) {
    this.#registry = registry;
  }

  /** The streams by name (live: it changes as streams are added and removed). */
  get streams(): ReadonlyMap<string, Stream> {
    return this.#streams;
  }

  /** The role of each stream not a primary, by name (live). */
  get roles(): ReadonlyMap<string, StreamRole> {
    return this.#roles;
  }

  /** The streams taking network publishes, by name (live). */
  get publish(): ReadonlySet<string> {
    return this.#publish;
  }

  /**
   * Streams not served for now because they are being opened again on this
   * node, each with why (live): asked for, they are unavailable, not unknown.
   */
  get reopening(): ReadonlyMap<string, string> {
    return this.#reopening;
  }

  /** Serves `stream` from now on; a `TypeError` when one of its name is served. */
  add(stream: Stream, o: { publish: boolean; role?: StreamRole }): void {
    const name = stream.name;
    if (this.#streams.has(name)) {
      throw new TypeError(`two streams are named ${JSON.stringify(name)}`);
    }
    this.#streams.set(name, stream);
    this.#reopening.delete(name);
    this.#roles.set(name, o.role ?? PRIMARY);
    if (o.publish) this.#publish.add(name);
    this.#excludes.set(name, this.#registry.include(streamInside(stream).metrics));
  }

  /**
   * Stops serving `name`: closes its subscribers and publishers with `code`
   * and `reason`, drops its series. With `reopening` (why), the stream is to
   * be added again: until then it is {@linkcode StreamSet.reopening}.
   * Returns the stream, or null.
   */
  remove(name: string, code: number, reason: string, reopening?: string): Stream | null {
    if (reopening === undefined) this.#reopening.delete(name);
    else this.#reopening.set(name, reopening);
    const stream = this.#streams.get(name);
    if (stream === undefined) return null;
    this.#streams.delete(name);
    this.#roles.delete(name);
    this.#publish.delete(name);
    this.#excludes.get(name)?.();
    this.#excludes.delete(name);
    // Server-wide series labelled with the stream (publishing's) go with it.
    this.#registry.forget("stream", name);
    stream.closeSubscribers(code, reason);
    for (const close of this.#sockets.get(name)?.values() ?? []) {
      try {
        close(code, reason);
      } catch {
        // Already closing.
      }
    }
    this.#sockets.delete(name);
    return stream;
  }

  /** Counts `socket` as open on stream `name` until {@linkcode StreamSet.untrack}. */
  track(name: string, socket: WebSocket, close: (code: number, reason: string) => void): void {
    let m = this.#sockets.get(name);
    if (m === undefined) this.#sockets.set(name, m = new Map());
    m.set(socket, close);
  }

  /** Counts it out. */
  untrack(name: string, socket: WebSocket): void {
    const m = this.#sockets.get(name);
    m?.delete(socket);
    if (m?.size === 0) this.#sockets.delete(name);
  }

  /** Drops every stream's series (the streams stay as they are). */
  release(): void {
    for (const exclude of this.#excludes.values()) exclude();
    this.#excludes.clear();
  }
}
