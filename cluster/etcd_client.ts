/**
 * An etcd v3 client over etcd's JSON gateway (etcd 3.4: `POST /v3/...`),
 * with `fetch` alone: leases, ranges, puts, transactions, deletes, and the
 * watch stream (`etcd_watch.ts`).
 *
 * Why not the npm `etcd3` package: it does run under Deno (over grpc-js and
 * node:http2), but it would add a gRPC stack to what `cli.ts serve`
 * downloads, and it renews leases on its own schedule, hiding the moment
 * each keepalive was sent — the one number a leader's own clock must be
 * counted from (`lease_clock.ts`). The gateway is part of every etcd 3.4
 * server (`--listen-client-urls` serves both).
 *
 * Several endpoints (members of one etcd cluster) may be given; a request
 * goes to the one that answered last, and moves on to the next when that
 * one cannot be reached, does not answer within the timeout, or says it is
 * unavailable (no etcd leader, its own timeout). A read (and a lease renewal
 * or revocation, which are idempotent) may be sent to every endpoint in turn.
 * A write is moved on only while it surely was not applied (the connection
 * was refused); once it may have reached etcd and its answer is lost — no
 * answer within the timeout, the connection reset, a timeout or an
 * unavailable reported by etcd — it is not resent: it is thrown as
 * {@linkcode EtcdIndeterminateError} ("may have applied"), and the caller
 * reads the key back before acting on it. Any other refusal is thrown at
 * once as {@linkcode EtcdError}, naming the endpoint.
 *
 * @module
 */

import {
  type Compare,
  fromWireKv,
  int,
  type KeyValue,
  rangeBody,
  toWireCompare,
  toWireOp,
  type TxnOp,
  type WireKv,
} from "./_etcd_wire.ts";

export type { Compare, KeyValue, TxnOp };

/** Default bound of one request to etcd, ms. */
export const DEFAULT_ETCD_TIMEOUT_MS = 2000;

// gRPC codes after which the next endpoint is tried: DEADLINE_EXCEEDED and
// UNAVAILABLE (no etcd leader, the member's own request timeout).
const TRY_NEXT_CODES = new Set([4, 14]);

/**
 * etcd refused a request (or answered something that is not its JSON).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { EtcdError } from "./etcd_client.ts";
 * const err = new EtcdError("http://127.0.0.1:2379", "/v3/lease/revoke", 5, "requested lease not found");
 * equal(err.message, "etcd http://127.0.0.1:2379 /v3/lease/revoke: requested lease not found (code 5)");
 * ```
 */
export class EtcdError extends Error {
  /** The endpoint that answered. */
  readonly endpoint: string;
  /** The gRPC status code (5 not found, 3 invalid argument, …; 0 when not etcd's). */
  readonly code: number;

  /** An error of `endpoint` for `path`. */
  constructor(endpoint: string, path: string, code: number, detail: string) {
    super(`etcd ${endpoint} ${path}: ${detail}${code ? ` (code ${code})` : ""}`);
    this.name = "EtcdError";
    this.endpoint = endpoint;
    this.code = code;
  }
}

/**
 * No endpoint answered: each one's failure, in the order tried.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { EtcdUnavailableError } from "./etcd_client.ts";
 * const err = new EtcdUnavailableError("/v3/kv/range", [
 *   { endpoint: "http://a:2379", error: "connection refused" },
 * ]);
 * equal(err.message, "etcd unreachable for /v3/kv/range: http://a:2379: connection refused");
 * ```
 */
export class EtcdUnavailableError extends Error {
  /** What each endpoint did. */
  readonly failures: readonly { endpoint: string; error: string }[];

  /** The failures of every endpoint for `path`. */
  constructor(path: string, failures: { endpoint: string; error: string }[]) {
    super(
      `etcd unreachable for ${path}: ` +
        failures.map((f) => `${f.endpoint}: ${f.error}`).join("; "),
    );
    this.name = "EtcdUnavailableError";
    this.failures = failures;
  }
}

/**
 * A write whose answer was lost after it may have reached etcd: it may or
 * may not have applied. The caller reads the keys it wrote before it acts
 * on them again; it is not resent for it.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { EtcdIndeterminateError } from "./etcd_client.ts";
 * const err = new EtcdIndeterminateError("/v3/kv/txn", "http://a:2379", "no answer within 2000 ms");
 * equal(err.message, "etcd http://a:2379 /v3/kv/txn: indeterminate: may have applied (no answer within 2000 ms)");
 * ```
 */
export class EtcdIndeterminateError extends Error {
  /** The request's path. */
  readonly path: string;
  /** The endpoint it was sent to last. */
  readonly endpoint: string;
  /** What happened to its answer. */
  readonly detail: string;

  /** The lost answer of `path` at `endpoint`. */
  constructor(path: string, endpoint: string, detail: string) {
    super(`etcd ${endpoint} ${path}: indeterminate: may have applied (${detail})`);
    this.name = "EtcdIndeterminateError";
    this.path = path;
    this.endpoint = endpoint;
    this.detail = detail;
  }
}

/**
 * Whether a request to `path` with `body` changes etcd (and so must not be
 * resent once it may have applied): puts, deletes, grants, and transactions
 * with a put or a delete. Reads, renewals and revocations may be resent.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { isWrite } from "./etcd_client.ts";
 * equal(isWrite("/v3/kv/put", {}), true);
 * equal(isWrite("/v3/kv/txn", { compare: [], success: [{ request_range: {} }], failure: [] }), false);
 * equal(isWrite("/v3/lease/keepalive", { ID: "1" }), false);
 * ```
 */
export function isWrite(path: string, body: unknown): boolean {
  switch (path) {
    case "/v3/kv/put":
    case "/v3/kv/deleterange":
    case "/v3/lease/grant":
      return true;
    case "/v3/kv/txn": {
      const t = body as { success?: object[]; failure?: object[] };
      return [...(t.success ?? []), ...(t.failure ?? [])].some((op) => !("request_range" in op));
    }
    default:
      return false;
  }
}

// A fetch failure that shows the request never left: no connection was made
// (refused, no route, no such host) or fetch would not send to that port.
const NOT_SENT = /client error \(Connect\)|connection refused|os error 111|are blocked|dns error/i;

function notSent(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    if (NOT_SENT.test(e.message)) return true;
  }
  return false;
}

/** Options of {@linkcode EtcdClient}. */
export interface EtcdClientOptions {
  /** Bound of one request to one endpoint, ms. @default 2000 */
  timeoutMs?: number;
  /** The fetch to use (tests). @default fetch */
  fetch?: typeof fetch;
}

/** Options of one request. */
export interface EtcdCallOptions {
  /** Bound of the request at each endpoint, ms. @default the client's timeoutMs */
  timeoutMs?: number;
  /** Gives up at once when aborted. */
  signal?: AbortSignal;
}

/** What a transaction answered. */
export interface TxnResult {
  /** Whether every comparison held (the success ops ran). */
  succeeded: boolean;
  /** The store's revision after it. */
  revision: number;
  /** Per op that ran: the keys a range found (`[]` for puts and deletes). */
  ranges: KeyValue[][];
}

/** A lease etcd granted. */
export interface Lease {
  /** Its id (64 bits, as text). */
  id: string;
  /** The TTL etcd granted, s (etcd raises a TTL below its minimum). */
  ttlSeconds: number;
}

/**
 * Reads an endpoint list: URLs separated by commas.
 *
 * @throws {TypeError} naming an entry that is not an http(s) URL, or for none.
 *
 * @example
 * ```ts
 * import { deepEqual } from "node:assert/strict";
 * import { parseEndpoints } from "./etcd_client.ts";
 * deepEqual(parseEndpoints("http://a:2379/, http://b:2379"), ["http://a:2379", "http://b:2379"]);
 * ```
 */
export function parseEndpoints(list: string | readonly string[]): string[] {
  const items = (typeof list === "string" ? list.split(",") : [...list])
    .map((s) => s.trim()).filter((s) => s !== "");
  if (items.length === 0) throw new TypeError("no etcd endpoint given");
  return items.map((s) => {
    let u: URL;
    try {
      u = new URL(s);
    } catch {
      throw new TypeError(
        `an etcd endpoint is an http:// or https:// URL, got ${JSON.stringify(s)}`,
      );
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new TypeError(
        `an etcd endpoint is an http:// or https:// URL, got ${JSON.stringify(s)}`,
      );
    }
    return `${u.protocol}//${u.host}`;
  });
}

function describe(err: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `no answer within ${timeoutMs} ms`;
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message}: ${cause.message}` : err.message;
  }
  return String(err);
}

/**
 * A client of one etcd cluster, reached at one or more endpoints.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { EtcdClient } from "./etcd_client.ts";
 * const etcd = new EtcdClient("http://127.0.0.1:2379,http://127.0.0.1:22379");
 * equal(etcd.endpoint, "http://127.0.0.1:2379");
 * ```
 */
export class EtcdClient {
  /** The endpoints, in the order given. */
  readonly endpoints: readonly string[];
  /** Bound of one request to one endpoint, ms. */
  readonly timeoutMs: number;
  readonly #fetch: typeof fetch;
  #current = 0;

  /** A client of the endpoints in `endpoints` (a comma-separated list, or an array). */
  constructor(endpoints: string | readonly string[], options: EtcdClientOptions = {}) {
    this.endpoints = parseEndpoints(endpoints);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_ETCD_TIMEOUT_MS;
    if (!(this.timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${this.timeoutMs}`);
    this.#fetch = options.fetch ?? fetch;
  }

  /** The endpoint the next request goes to first (the one that answered last). */
  get endpoint(): string {
    return this.#current < this.endpoints.length ? this.endpoints[this.#current] : "";
  }

  /**
   * Opens a request whose answer is read by the caller (the watch stream):
   * tries each endpoint from the current one until one answers 200. The
   * timeout bounds the wait for the answer's head only.
   */
  async open(path: string, body: unknown, options: EtcdCallOptions = {}): Promise<Response> {
    const { response } = await this.#send(path, body, options, false);
    return response;
  }

  /** Sends `body` to `path` and returns the JSON answer; see the module doc for failover. */
  async call<T>(path: string, body: unknown, options: EtcdCallOptions = {}): Promise<T> {
    return (await this.#send(path, body, options, true)).json as T;
  }

  async #send(
    path: string,
    body: unknown,
    options: EtcdCallOptions,
    readJson: boolean,
  ): Promise<{ response: Response; json: unknown }> {
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const failures: { endpoint: string; error: string }[] = [];
    const n = this.endpoints.length;
    const payload = JSON.stringify(body);
    const write = isWrite(path, body);
    for (let k = 0; k < n; k++) {
      options.signal?.throwIfAborted();
      const i = (this.#current + k) % n;
      const endpoint = this.endpoints[i];
      const timer = new AbortController();
      const t = setTimeout(() => timer.abort(), timeoutMs);
      const signal = options.signal
        ? AbortSignal.any([options.signal, timer.signal])
        : timer.signal;
      let response: Response;
      let json: unknown = null;
      try {
        response = await this.#fetch(`${endpoint}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: payload,
          signal,
        });
        if (readJson || !response.ok) {
          const text = await response.text();
          try {
            json = JSON.parse(text);
          } catch {
            if (response.ok) {
              throw new EtcdError(endpoint, path, 0, `answered non-JSON: ${text.slice(0, 100)}`);
            }
            json = { error: text.trim().slice(0, 200) };
          }
        }
      } catch (err) {
        clearTimeout(t);
        options.signal?.throwIfAborted();
        if (err instanceof EtcdError) throw err;
        const error = describe(err, timer.signal.aborted, timeoutMs);
        if (write && !notSent(err)) {
          this.#current = (i + 1) % n; // the next request tries another endpoint first
          throw new EtcdIndeterminateError(path, endpoint, error);
        }
        failures.push({ endpoint, error });
        continue;
      }
      clearTimeout(t);
      if (!response.ok) {
        const e = json as { error?: string; message?: string; code?: number };
        const code = typeof e.code === "number" ? e.code : 0;
        const detail = `${e.message ?? e.error ?? "error"} (HTTP ${response.status})`;
        if (TRY_NEXT_CODES.has(code) || response.status >= 502) {
          if (write) {
            this.#current = (i + 1) % n;
            throw new EtcdIndeterminateError(path, endpoint, detail);
          }
          failures.push({ endpoint, error: detail });
          continue;
        }
        throw new EtcdError(
          endpoint,
          path,
          code,
          e.message ?? e.error ?? `HTTP ${response.status}`,
        );
      }
      this.#current = i;
      return { response, json };
    }
    throw new EtcdUnavailableError(path, failures);
  }

  /**
   * Grants a lease of `ttlSeconds` (etcd may raise it to its minimum: see
   * the answer).
   */
  async grant(ttlSeconds: number, options?: EtcdCallOptions): Promise<Lease> {
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1) {
      throw new RangeError(`a lease TTL is an integer ≥ 1 s, got ${ttlSeconds}`);
    }
    const r = await this.call<{ ID?: string; TTL?: string; error?: string }>(
      "/v3/lease/grant",
      { TTL: ttlSeconds },
      options,
    );
    if (!r.ID || r.error) {
      throw new EtcdError(this.endpoint, "/v3/lease/grant", 0, r.error || "no lease granted");
    }
    return { id: r.ID, ttlSeconds: int(r.TTL) };
  }

  /**
   * Renews lease `id` once: its TTL in seconds from now, or 0 when etcd no
   * longer has it (it expired or was revoked).
   */
  async keepAlive(id: string, options?: EtcdCallOptions): Promise<number> {
    const r = await this.call<{ result?: { TTL?: string }; error?: { message?: string } }>(
      "/v3/lease/keepalive",
      { ID: id },
      options,
    );
    if (!r.result) {
      throw new EtcdError(
        this.endpoint,
        "/v3/lease/keepalive",
        0,
        r.error?.message ?? "no answer in the stream",
      );
    }
    return int(r.result.TTL);
  }

  /** Revokes lease `id`, deleting the keys attached to it; false when etcd had no such lease. */
  async revoke(id: string, options?: EtcdCallOptions): Promise<boolean> {
    try {
      await this.call("/v3/lease/revoke", { ID: id }, options);
      return true;
    } catch (err) {
      if (err instanceof EtcdError && err.code === 5) return false; // not found: gone already
      throw err;
    }
  }

  /** The keys at `key` (or under it, with `prefix`), and the store's revision. */
  async range(
    key: string,
    opts: { prefix?: boolean } & EtcdCallOptions = {},
  ): Promise<{ kvs: KeyValue[]; revision: number }> {
    const r = await this.call<{ kvs?: WireKv[]; header?: { revision?: string } }>(
      "/v3/kv/range",
      rangeBody(key, opts.prefix),
      opts,
    );
    return { kvs: (r.kvs ?? []).map(fromWireKv), revision: int(r.header?.revision) };
  }

  /** The key `key`, or null. */
  async get(key: string, options?: EtcdCallOptions): Promise<KeyValue | null> {
    return (await this.range(key, options)).kvs[0] ?? null;
  }

  /** Puts `value` at `key` (attached to `lease`, when given); the revision it made. */
  async put(
    key: string,
    value: string,
    opts: { lease?: string } & EtcdCallOptions = {},
  ): Promise<number> {
    const op = toWireOp({ put: { key, value, lease: opts.lease } }).request_put;
    const r = await this.call<{ header?: { revision?: string } }>("/v3/kv/put", op, opts);
    return int(r.header?.revision);
  }

  /** Deletes `key` (or every key under it, with `prefix`); how many were deleted. */
  async delete(key: string, opts: { prefix?: boolean } & EtcdCallOptions = {}): Promise<number> {
    const r = await this.call<{ deleted?: string }>(
      "/v3/kv/deleterange",
      rangeBody(key, opts.prefix),
      opts,
    );
    return int(r.deleted);
  }

  /** Runs `success` if every comparison holds, else `failure`, atomically. */
  async txn(
    compare: readonly Compare[],
    success: readonly TxnOp[],
    failure: readonly TxnOp[] = [],
    options?: EtcdCallOptions,
  ): Promise<TxnResult> {
    const r = await this.call<{
      succeeded?: boolean;
      header?: { revision?: string };
      responses?: { response_range?: { kvs?: WireKv[] } }[];
    }>("/v3/kv/txn", {
      compare: compare.map(toWireCompare),
      success: success.map(toWireOp),
      failure: failure.map(toWireOp),
    }, options);
    return {
      succeeded: r.succeeded === true,
      revision: int(r.header?.revision),
      ranges: (r.responses ?? []).map((x) => (x.response_range?.kvs ?? []).map(fromWireKv)),
    };
  }
}
