/**
 * The replication protocol between a stream's leader and its followers, on
 * one WebSocket per follower (`/{name}/replicate?node=N`, opened by the
 * follower, showing its registration's instance id in the
 * {@linkcode INSTANCE_HEADER} header and the cluster's token, if any, as a
 * `bearer.TOKEN` subprotocol). Control messages are text (one JSON object);
 * rows travel in binary commit messages, encoded once and sent to every
 * follower alike. The leader pings the socket (WebSocket pings, answered by
 * the follower's runtime) and closes it when no pong comes within the
 * replica lag.
 *
 * ```text
 * leader → follower
 *   text    {"type":"hello","stream_id":ID,"term":T,"terms":[{"term","start"}…],"end":E,"commit":C}
 *   binary  commit (below), in offset order, each after the leader's fsync
 *   text    {"type":"commit","index":C}        rows below C are committed
 *   text    {"type":"in_sync","nodes":[…]}      the in-sync set, when it changes
 * follower → leader
 *   text    {"type":"from","from":F}            after cutting its tail: ship from F
 *                                               (F ≤ the hello's end, else close 4416)
 *   text    {"type":"durable","end":E}          its fsync covers every row below E
 *                                               (E ≤ the end of what was sent on this
 *                                               socket, else close 4416)
 *
 * commit (integers big-endian; u64 holds a safe integer)
 *   0   1  kind = 1
 *   1   1  version = 1
 *   2   2  m: producer records
 *   4   4  r: runs of rows sharing an append time
 *   8   8  term the rows were written in
 *  16   8  first offset (the rows' offsets are consecutive from it)
 *  24      m × record: u16 producer length, producer UTF-8, u64 seq, u64 first, u64 last
 *          r × run:    u64 append time µs, u32 rows k, k × (u32 length, payload)
 * ```
 *
 * A commit carries its producer records with its rows, so producer state is
 * replicated as the rows are (a follower writes them to its journal before
 * the rows, as the leader did), and the leader's append times, so a
 * follower's rows are the leader's byte for byte.
 *
 * @module
 */

/**
 * The request header a follower shows its registration's instance id in,
 * when it opens a leader's replicate route (`nodes.ts`, `checkMember`).
 */
export const INSTANCE_HEADER = "streamcast-instance";

// Deno's WebSocket takes request headers in an options object; type
// libraries that model the browser's constructor (url, protocols) do not
// know that form, so it is typed here once.
const DenoWebSocket = WebSocket as unknown as new (
  url: string,
  options: { protocols?: string[]; headers?: Record<string, string> },
) => WebSocket;

/**
 * Opens a replication socket to `url` (a leader's replicate route), showing
 * the cluster's `token` (as the `bearer.TOKEN` subprotocol beside
 * `streamcast`) and the node's registration `instance` id (in
 * {@linkcode INSTANCE_HEADER}), each when given.
 *
 * @example
 * ```ts ignore
 * const socket = openReplicationSocket("ws://h1:8801/trades/replicate?node=n2", {
 *   token: "s3cret",
 *   instance: "0123456789abcdef0123456789abcdef",
 * });
 * ```
 */
export function openReplicationSocket(
  url: string,
  show: { token?: string | null; instance?: string | null },
): WebSocket {
  return new DenoWebSocket(url, {
    ...(show.token ? { protocols: ["streamcast", `bearer.${show.token}`] } : {}),
    ...(show.instance ? { headers: { [INSTANCE_HEADER]: show.instance } } : {}),
  });
}

/** Kind byte of a commit message. */
const COMMIT_KIND = 1;
/** Version byte of a commit message. */
const COMMIT_VERSION = 1;
const HEAD_BYTES = 24;
/** Longest producer name a record may carry, bytes. */
const MAX_PRODUCER_BYTES = 1024;

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });

/**
 * A producer record as a commit carries it: producer `producer`'s commit
 * `seq` holds rows `[first, last]` (seq 0: the producer was forgotten).
 */
export interface WireRecord {
  /** The producer's name. */
  producer: string;
  /** Its sequence number. */
  seq: number;
  /** First offset of the commit's rows. */
  first: number;
  /** Last offset of the commit's rows. */
  last: number;
}

/**
 * Rows written at one append time.
 */
export interface WireRun {
  /** Append time of the rows, µs since the epoch. */
  timeUs: number;
  /** The rows' bytes, in offset order. */
  payloads: (Uint8Array | string)[];
}

/**
 * One commit as it travels: rows at consecutive offsets from `first`, in
 * runs of one append time, with the producer records of their commits.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { commitEnd, type WireCommit } from "./replication_wire.ts";
 * const c: WireCommit = { term: 2, first: 5, runs: [{ timeUs: 1, payloads: ["{}", "{}"] }], records: [] };
 * equal(commitEnd(c), 7);
 * ```
 */
export interface WireCommit {
  /** The term the rows were written in. */
  term: number;
  /** Offset of the first row. */
  first: number;
  /** The rows, in runs of one append time. */
  runs: WireRun[];
  /** Producer records of the rows' commits. */
  records: WireRecord[];
}

/**
 * The offset after a commit's last row.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { commitEnd } from "./replication_wire.ts";
 * equal(commitEnd({ term: 1, first: 10, runs: [{ timeUs: 1, payloads: ["{}"] }, { timeUs: 2, payloads: ["{}"] }], records: [] }), 12);
 * ```
 */
export function commitEnd(commit: WireCommit): number {
  let n = 0;
  for (const r of commit.runs) n += r.payloads.length;
  return commit.first + n;
}

function setU64(v: DataView, at: number, n: number): void {
  v.setUint32(at, Math.floor(n / 0x1_0000_0000));
  v.setUint32(at + 4, n >>> 0);
}

function getU64(v: DataView, at: number, what: string): number {
  const n = v.getUint32(at) * 0x1_0000_0000 + v.getUint32(at + 4);
  if (!Number.isSafeInteger(n)) {
    throw new ReplicationWireError(`${what} ${n} is not a safe integer`);
  }
  return n;
}

/**
 * A replication message that does not parse; the message says what was
 * wrong and where.
 *
 * @example
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { decodeCommit, ReplicationWireError } from "./replication_wire.ts";
 * throws(() => decodeCommit(new Uint8Array(3)), ReplicationWireError);
 * ```
 */
export class ReplicationWireError extends Error {
  /** A message naming what was wrong. */
  constructor(message: string) {
    super(`replication message refused: ${message}`);
    this.name = "ReplicationWireError";
  }
}

/**
 * The bytes of `commit` as a binary commit message.
 *
 * @throws {RangeError} for offsets, times or counts that do not fit the format.
 *
 * @example
 * ```ts
 * import { deepEqual, equal } from "node:assert/strict";
 * import { decodeCommit, encodeCommit } from "./replication_wire.ts";
 * const bytes = encodeCommit({
 *   term: 3,
 *   first: 41,
 *   runs: [{ timeUs: 1_700_000_000_000_000, payloads: ['{"a":1}', '{"a":2}'] }],
 *   records: [{ producer: "p", seq: 9, first: 41, last: 42 }],
 * });
 * const back = decodeCommit(bytes);
 * equal(back.first, 41);
 * deepEqual(back.records, [{ producer: "p", seq: 9, first: 41, last: 42 }]);
 * equal(new TextDecoder().decode(back.runs[0].payloads[1] as Uint8Array), '{"a":2}');
 * ```
 */
export function encodeCommit(commit: WireCommit): Uint8Array {
  const { term, first, runs, records } = commit;
  if (!Number.isSafeInteger(term) || term < 0) throw new RangeError(`term ${term} is not ≥ 0`);
  if (!Number.isSafeInteger(first) || first < 1) {
    throw new RangeError(`first offset ${first} is not an integer ≥ 1`);
  }
  if (records.length > 0xffff) throw new RangeError(`${records.length} records in one commit`);
  const names = records.map((r) => enc.encode(r.producer));
  const bodies = runs.map((r) =>
    r.payloads.map((p) => (typeof p === "string" ? enc.encode(p) : p))
  );
  let size = HEAD_BYTES;
  for (const n of names) size += 2 + n.length + 24;
  for (const b of bodies) {
    size += 12;
    for (const p of b) size += 4 + p.length;
  }
  const out = new Uint8Array(size);
  const v = new DataView(out.buffer);
  v.setUint8(0, COMMIT_KIND);
  v.setUint8(1, COMMIT_VERSION);
  v.setUint16(2, records.length);
  v.setUint32(4, runs.length);
  setU64(v, 8, term);
  setU64(v, 16, first);
  let at = HEAD_BYTES;
  for (let i = 0; i < records.length; i++) {
    const r = records[i];
    const name = names[i];
    if (name.length > MAX_PRODUCER_BYTES) {
      throw new RangeError(`producer name of ${name.length} bytes`);
    }
    v.setUint16(at, name.length);
    out.set(name, at + 2);
    at += 2 + name.length;
    setU64(v, at, r.seq);
    setU64(v, at + 8, r.first);
    setU64(v, at + 16, r.last);
    at += 24;
  }
  for (let i = 0; i < runs.length; i++) {
    const body = bodies[i];
    setU64(v, at, runs[i].timeUs);
    v.setUint32(at + 8, body.length);
    at += 12;
    for (const p of body) {
      v.setUint32(at, p.length);
      out.set(p, at + 4);
      at += 4 + p.length;
    }
  }
  return out;
}

/**
 * The commit in a binary message; payloads are views of `bytes` (no copy).
 * Checks every length against the message and the records against the
 * rows they name.
 *
 * @throws {ReplicationWireError} naming what does not parse.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { decodeCommit, encodeCommit, ReplicationWireError } from "./replication_wire.ts";
 * const bytes = encodeCommit({ term: 1, first: 1, runs: [{ timeUs: 5, payloads: ["{}"] }], records: [] });
 * equal(decodeCommit(bytes).runs[0].timeUs, 5);
 * throws(() => decodeCommit(bytes.subarray(0, bytes.length - 1)), ReplicationWireError);
 * ```
 */
export function decodeCommit(bytes: Uint8Array): WireCommit {
  if (bytes.length < HEAD_BYTES) {
    throw new ReplicationWireError(`a commit of ${bytes.length} bytes is shorter than its head`);
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  if (v.getUint8(0) !== COMMIT_KIND || v.getUint8(1) !== COMMIT_VERSION) {
    throw new ReplicationWireError(
      `kind ${v.getUint8(0)} version ${v.getUint8(1)} is not a commit`,
    );
  }
  const m = v.getUint16(2);
  const r = v.getUint32(4);
  const term = getU64(v, 8, "term");
  const first = getU64(v, 16, "first offset");
  if (first < 1) throw new ReplicationWireError("first offset 0");
  const need = (at: number, n: number, what: string) => {
    if (at + n > bytes.length) {
      throw new ReplicationWireError(
        `${what} at byte ${at} runs past the message (${bytes.length})`,
      );
    }
  };
  let at = HEAD_BYTES;
  const records: WireRecord[] = [];
  for (let i = 0; i < m; i++) {
    need(at, 2, "a record");
    const n = v.getUint16(at);
    need(at + 2, n + 24, "a record");
    let producer: string;
    try {
      producer = dec.decode(bytes.subarray(at + 2, at + 2 + n));
    } catch {
      throw new ReplicationWireError(`the producer name at byte ${at + 2} is not UTF-8`);
    }
    at += 2 + n;
    records.push({
      producer,
      seq: getU64(v, at, "seq"),
      first: getU64(v, at + 8, "record first"),
      last: getU64(v, at + 16, "record last"),
    });
    at += 24;
  }
  const runs: WireRun[] = [];
  let rows = 0;
  for (let i = 0; i < r; i++) {
    need(at, 12, "a run");
    const timeUs = getU64(v, at, "append time");
    const k = v.getUint32(at + 8);
    at += 12;
    const payloads: Uint8Array[] = [];
    for (let j = 0; j < k; j++) {
      need(at, 4, "a row");
      const n = v.getUint32(at);
      need(at + 4, n, "a row");
      payloads.push(bytes.subarray(at + 4, at + 4 + n));
      at += 4 + n;
    }
    rows += k;
    runs.push({ timeUs, payloads });
  }
  if (at !== bytes.length) {
    throw new ReplicationWireError(`${bytes.length - at} bytes after the last row`);
  }
  const end = first + rows;
  for (const rec of records) {
    if (rec.seq > 0 && (rec.first < first || rec.last >= end || rec.last < rec.first)) {
      throw new ReplicationWireError(
        `producer ${JSON.stringify(rec.producer)} seq ${rec.seq} names rows ` +
          `${rec.first}..${rec.last}, outside the commit's ${first}..${end - 1}`,
      );
    }
  }
  return { term, first, runs, records };
}

/**
 * A control message (a text frame), either way.
 */
export type ControlMessage =
  | {
    type: "hello";
    stream_id: string;
    term: number;
    terms: { term: number; start: number }[];
    end: number;
    commit: number;
  }
  | { type: "commit"; index: number }
  | { type: "in_sync"; nodes: string[] }
  | { type: "from"; from: number }
  | { type: "durable"; end: number };

function isOffset(n: unknown): n is number {
  return Number.isSafeInteger(n) && (n as number) >= 0;
}

/**
 * The control message in a text frame.
 *
 * @throws {ReplicationWireError} naming what does not parse.
 *
 * @example
 * ```ts
 * import { deepEqual, throws } from "node:assert/strict";
 * import { parseControl, ReplicationWireError } from "./replication_wire.ts";
 * deepEqual(parseControl('{"type":"from","from":7}'), { type: "from", from: 7 });
 * throws(() => parseControl('{"type":"from","from":-1}'), ReplicationWireError);
 * ```
 */
export function parseControl(text: string): ControlMessage {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(text);
  } catch {
    throw new ReplicationWireError(`not JSON: ${text.slice(0, 80)}`);
  }
  if (typeof v !== "object" || v === null) throw new ReplicationWireError("not an object");
  switch (v.type) {
    case "hello": {
      const terms = v.terms;
      if (
        typeof v.stream_id !== "string" || !isOffset(v.term) || !isOffset(v.end) ||
        !isOffset(v.commit) || !Array.isArray(terms) ||
        !terms.every((t) => t && isOffset(t.term) && isOffset(t.start))
      ) {
        throw new ReplicationWireError(`a hello that is not one: ${text.slice(0, 120)}`);
      }
      return {
        type: "hello",
        stream_id: v.stream_id,
        term: v.term,
        terms: terms.map((t) => ({ term: t.term, start: t.start })),
        end: v.end,
        commit: v.commit,
      };
    }
    case "commit":
      if (!isOffset(v.index)) throw new ReplicationWireError(`bad commit index: ${text}`);
      return { type: "commit", index: v.index };
    case "in_sync":
      if (!Array.isArray(v.nodes) || !v.nodes.every((n) => typeof n === "string")) {
        throw new ReplicationWireError(`bad in-sync set: ${text.slice(0, 120)}`);
      }
      return { type: "in_sync", nodes: v.nodes };
    case "from":
      if (!isOffset(v.from)) throw new ReplicationWireError(`bad from: ${text}`);
      return { type: "from", from: v.from };
    case "durable":
      if (!isOffset(v.end)) throw new ReplicationWireError(`bad durable end: ${text}`);
      return { type: "durable", end: v.end };
    default:
      throw new ReplicationWireError(`unknown type ${JSON.stringify(v.type)}`);
  }
}
