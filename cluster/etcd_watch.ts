/**
 * Watching keys in etcd: `POST /v3/watch` on the JSON gateway answers with a
 * stream of JSON objects, one per line — first `{"result":{"created":true}}`,
 * then one per batch of changes. {@linkcode watchKeys} yields the batches and
 * reopens the stream (on the next endpoint that answers, with backoff) from
 * the revision after the last change seen, so that no change is missed
 * across a dropped connection; a stream silent for `idleMs` is reopened too
 * (a paused or partitioned member keeps the connection open and says
 * nothing). When etcd has compacted the revision a reopen asks for, it
 * throws {@linkcode WatchCompactedError}: the caller reads the keys afresh.
 *
 * @module
 */

import { backoffDelay, sleep } from "../common/backoff.ts";
import { b64, fromWireKv, type KeyValue, prefixEnd, type WireKv } from "./_etcd_wire.ts";
import type { EtcdClient } from "./etcd_client.ts";

/**
 * One change of a watched key.
 */
export interface WatchEvent {
  /** A put (create or update) or a delete (also by an expired lease). */
  type: "put" | "delete";
  /** The key after the change (for a delete: the key and its revision only). */
  kv: KeyValue;
}

/** Options of {@linkcode watchKeys}. */
export interface WatchOptions {
  /** Every key under `key`, not only `key`. @default false */
  prefix?: boolean;
  /** The first revision to report (older changes are replayed). @default the next one */
  fromRevision?: number;
  /** A silent stream is reopened after this long, ms. @default 10000 */
  idleMs?: number;
  /** Cap of the backoff between reopen attempts, ms. @default 2000 */
  retryMaxMs?: number;
  /** Ends the watch (the generator returns). */
  signal?: AbortSignal;
}

/**
 * The revision a watch asked for was compacted away.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { WatchCompactedError } from "./etcd_watch.ts";
 * equal(new WatchCompactedError("/a", 12).compactRevision, 12);
 * ```
 */
export class WatchCompactedError extends Error {
  /** The oldest revision etcd still has. */
  readonly compactRevision: number;

  /** The watch of `key` cannot resume: etcd kept revisions from `compactRevision` on. */
  constructor(key: string, compactRevision: number) {
    super(`watch of ${key}: etcd compacted its history up to revision ${compactRevision}`);
    this.name = "WatchCompactedError";
    this.compactRevision = compactRevision;
  }
}

interface WatchLine {
  result?: {
    created?: boolean;
    canceled?: boolean;
    compact_revision?: string;
    cancel_reason?: string;
    header?: { revision?: string };
    events?: { type?: "PUT" | "DELETE"; kv?: WireKv }[];
  };
  error?: { message?: string };
}

// The lines of a streamed body, each read within `idleMs` (else null: silent).
async function* lines(
  body: ReadableStream<Uint8Array>,
  idleMs: number,
): AsyncGenerator<string | null> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  try {
    while (true) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const idle = new Promise<null>((r) => (timer = setTimeout(() => r(null), idleMs)));
      const next = await Promise.race([reader.read(), idle]);
      clearTimeout(timer);
      if (next === null) {
        yield null;
        return;
      }
      if (next.done) return;
      buf += decoder.decode(next.value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line !== "") yield line;
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/**
 * Yields each batch of changes to `key` (or the keys under it) until
 * `signal` aborts; see the module doc.
 *
 * @example
 * ```ts ignore
 * for await (const events of watchKeys(etcd, "/streamcast/streams/trades/", { prefix: true, signal })) {
 *   for (const e of events) console.log(e.type, e.kv.key);
 * }
 * ```
 */
export async function* watchKeys(
  client: EtcdClient,
  key: string,
  options: WatchOptions = {},
): AsyncGenerator<WatchEvent[]> {
  const idleMs = options.idleMs ?? 10_000;
  const retryMaxMs = options.retryMaxMs ?? 2000;
  const signal = options.signal;
  let next = options.fromRevision ?? 0; // 0: from now
  let attempt = 0;
  while (!signal?.aborted) {
    const stop = new AbortController();
    const both = signal ? AbortSignal.any([signal, stop.signal]) : stop.signal;
    const create: Record<string, unknown> = { key: b64(key) };
    if (options.prefix) create.range_end = prefixEnd(key);
    if (next > 0) create.start_revision = String(next);
    try {
      const res = await client.open("/v3/watch", { create_request: create }, { signal: both });
      for await (const line of lines(res.body!, idleMs)) {
        if (line === null) break; // silent: reopen
        const msg = JSON.parse(line) as WatchLine;
        if (msg.error) throw new Error(msg.error.message ?? "watch error");
        const r = msg.result;
        if (!r) continue;
        if (r.compact_revision && Number(r.compact_revision) > 0) {
          throw new WatchCompactedError(key, Number(r.compact_revision));
        }
        if (r.canceled) throw new Error(`watch canceled: ${r.cancel_reason ?? "no reason"}`);
        if (r.created) {
          attempt = 0;
          if (next === 0) next = Number(r.header?.revision ?? 0) + 1;
          continue;
        }
        const events = (r.events ?? []).map((e): WatchEvent => ({
          type: e.type === "DELETE" ? "delete" : "put",
          kv: fromWireKv(e.kv ?? {}),
        }));
        for (const e of events) next = Math.max(next, e.kv.modRevision + 1);
        if (events.length > 0) yield events;
      }
    } catch (err) {
      if (err instanceof WatchCompactedError) throw err;
      if (signal?.aborted) return;
      // Unreachable or dropped: try again below.
    } finally {
      stop.abort();
    }
    if (signal?.aborted) return;
    await sleep(backoffDelay(++attempt, 50, retryMaxMs), signal);
  }
}
