/**
 * Where a cluster keeps its state in etcd. Every key is under one prefix
 * (default `/streamcast`), so that several clusters may share an etcd:
 *
 * ```text
 * PREFIX/nodes/NODE                    {"url":"http://10.0.0.1:8801"}            node's lease
 * PREFIX/streams/NAME/leader           {"node":"n1","url":"…","term":7}          leader's lease
 * PREFIX/streams/NAME/term             7            the last term begun (only grows)
 * PREFIX/streams/NAME/in_sync          {"term":7,"nodes":["n1","n2"]}
 * PREFIX/streams/NAME/schema           {"schema":{…},"by":"n1"}
 * PREFIX/streams/NAME/stream_id        {"stream_id":"…","by":"n1"}   the log's id on every node
 * PREFIX/streams/NAME/copies/NODE      {"created_us":1765…}   the copy of the log NODE vouches for
 * PREFIX/definitions/NAME              {"schema":{…},"publish":true,…}   a stream created while serving
 * ```
 *
 * NAME is the stream's name, `_` for the unnamed stream (as its log folder).
 *
 * @module
 */

/** The prefix of every key, unless told otherwise. */
export const DEFAULT_PREFIX = "/streamcast";

/**
 * The keys of one stream.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { streamKeys } from "./keys.ts";
 * const k = streamKeys("trades");
 * equal(k.leader, "/streamcast/streams/trades/leader");
 * equal(streamKeys("").term, "/streamcast/streams/_/term");
 * ```
 */
export interface StreamKeys {
  /** The folder of the stream's keys (ends with `/`). */
  readonly dir: string;
  /** The leader's record, attached to its lease. */
  readonly leader: string;
  /** The last term begun. */
  readonly term: string;
  /** The in-sync set. */
  readonly inSync: string;
  /** The stream's schema, as the first node wrote it. */
  readonly schema: string;
  /** The stream id every node's log has, as the first node wrote it. */
  readonly streamId: string;
  /** The folder of each node's copy record (`copies/NODE`, ends with `/`). */
  readonly copies: string;
}

function checkPrefix(prefix: string): string {
  if (!prefix.startsWith("/") || prefix.endsWith("/")) {
    throw new TypeError(`a key prefix starts with "/" and does not end with one, got ${prefix}`);
  }
  return prefix;
}

/**
 * The keys of stream `stream` under `prefix`.
 *
 * @throws {TypeError} for a prefix that does not start with `/` or ends with one.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { streamKeys } from "./keys.ts";
 * equal(streamKeys("trades", "/test").inSync, "/test/streams/trades/in_sync");
 * ```
 */
export function streamKeys(stream: string, prefix: string = DEFAULT_PREFIX): StreamKeys {
  const dir = `${checkPrefix(prefix)}/streams/${stream === "" ? "_" : stream}/`;
  return {
    dir,
    leader: `${dir}leader`,
    term: `${dir}term`,
    inSync: `${dir}in_sync`,
    schema: `${dir}schema`,
    streamId: `${dir}stream_id`,
    copies: `${dir}copies/`,
  };
}

/**
 * The folder of the definitions of streams created while serving (ends
 * with `/`; a definition's key is the folder and the stream's name).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { definitionsDir } from "./keys.ts";
 * equal(definitionsDir() + "quotes", "/streamcast/definitions/quotes");
 * ```
 */
export function definitionsDir(prefix: string = DEFAULT_PREFIX): string {
  return `${checkPrefix(prefix)}/definitions/`;
}

/**
 * The key of node `node`'s registration under `prefix`.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { nodeKey } from "./keys.ts";
 * equal(nodeKey("n1"), "/streamcast/nodes/n1");
 * ```
 */
export function nodeKey(node: string, prefix: string = DEFAULT_PREFIX): string {
  return `${checkPrefix(prefix)}/nodes/${node}`;
}

/**
 * Checks a node name: 1–64 of `A-Z a-z 0-9 . _ -`.
 *
 * @throws {TypeError} naming the name otherwise.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { checkNodeName } from "./keys.ts";
 * checkNodeName("n1");
 * throws(() => checkNodeName("a/b"), TypeError);
 * ```
 */
export function checkNodeName(node: string): string {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(node)) {
    throw new TypeError(`a node name is 1-64 of A-Z a-z 0-9 . _ -, got ${JSON.stringify(node)}`);
  }
  return node;
}
