/**
 * `connect()`: checks the URL and every option at the call — a wrong type is
 * a `TypeError`, a value out of range a `RangeError`, an unknown key a
 * `TypeError`, each naming the option and what was seen — resolves a cursor
 * path to a `FileCursor` (Deno), then opens the {@linkcode Subscription}.
 *
 * Web APIs only at module load: the file cursor is loaded only when a path is
 * given, and only where `Deno` exists.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert/strict";
 * import { connect } from "./connect.ts";
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("ticks", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * await stream.sendMany([{ v: 1 }, { v: 2 }]);
 * const sub = await connect(`${server.url}/ticks`, { offset: "earliest" });
 * const seen: [number | null, unknown][] = [];
 * for await (const [offset, msg] of sub) {
 *   seen.push([offset, msg]);
 *   if (offset === 2) break;
 * }
 * deepStrictEqual(seen, [[1, { v: 1 }], [2, { v: 2 }]]);
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 *
 * @module
 */

import { describe } from "./_describe.ts";
import { checkCatchUpOptions } from "./catch_up.ts";
import type { ConnectOptions, SubscriptionOptions } from "./connect_options.ts";
import type { CursorStore } from "./cursor.ts";
import { Subscription } from "./subscription.ts";
import { checkToken } from "./_token.ts";
import { sinceMicros } from "../wire/since.ts";
import { loadZstd } from "./_zstd.ts";
import { loadDictZstd } from "./_zstd_dict.ts";
import { type NodeUrls, nodeUrls } from "./node_urls.ts";

export { Subscription } from "./subscription.ts";
export type { Line, Row } from "./subscription.ts";
export * from "./connect_options.ts";
export { backoffDelay } from "../common/backoff.ts";

// Every key of ConnectOptions (the Record type makes a new option fail to compile until listed).
const OPTION_KEYS: Record<keyof ConnectOptions, true> = {
  offset: true,
  since: true,
  cursor: true,
  saveEveryRows: true,
  saveEveryMs: true,
  beforeSave: true,
  reconnect: true,
  backoff: true,
  onReconnect: true,
  signal: true,
  connectTimeoutMs: true,
  WebSocket: true,
  token: true,
  catchUp: true,
  where: true,
  compress: true,
  snapshot: true,
};
const BACKOFF_KEYS: ReadonlySet<string> = new Set(["minMs", "maxMs"]);

function checkUrl(url: string | URL): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`connect: not a URL: ${JSON.stringify(String(url))}`);
  }
  if (!["ws:", "wss:", "http:", "https:"].includes(u.protocol)) {
    throw new TypeError(`connect: the URL must be ws://, wss://, http:// or https://, got ${u}`);
  }
  if (u.searchParams.has("where")) {
    throw new TypeError(
      `connect: the URL carries where=${u.searchParams.get("where")}; pass the filter as the ` +
        `where option`,
    );
  }
  for (const key of ["offset", "stream_id", "frames"]) {
    if (u.searchParams.has(key)) {
      throw new TypeError(
        `connect: the URL carries ${key}=${u.searchParams.get(key)}; pass the offset as the ` +
          `offset option (the client sets offset, stream_id and frames itself)`,
      );
    }
  }
  // Messages name the stream by its WebSocket URL.
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  return u;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** A number option: a `TypeError` if it is not a number, a `RangeError` below `min`. */
function checkNumber(name: string, v: unknown, min: number): void {
  if (v === undefined) return;
  if (typeof v !== "number") {
    throw new TypeError(`connect: ${name} must be a number, got ${describe(v)}`);
  }
  if (!(Number.isFinite(v) && v >= min)) {
    throw new RangeError(`connect: ${name} must be a number >= ${min}, got ${v}`);
  }
}

function checkType(name: string, v: unknown, type: "function" | "boolean"): void {
  if (v !== undefined && typeof v !== type) {
    throw new TypeError(`connect: ${name} must be a ${type}, got ${describe(v)}`);
  }
}

/**
 * Checks the options of {@linkcode connect} (see the module doc) and returns
 * them with `cursor` still as given.
 */
function checkOptions(options: unknown): ConnectOptions {
  if (options === undefined) return {};
  if (!isObject(options)) {
    throw new TypeError(`connect: options must be an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!Object.hasOwn(OPTION_KEYS, key)) throw new TypeError(`connect: unknown option ${key}`);
  }
  const o = options as ConnectOptions;
  const off: unknown = o.offset;
  if (off !== undefined && off !== "earliest") {
    if (typeof off !== "number") {
      throw new TypeError(
        `connect: offset must be an integer >= 0 or "earliest", got ${describe(off)}`,
      );
    }
    if (!(Number.isSafeInteger(off) && off >= 0)) {
      throw new RangeError(`connect: offset must be an integer >= 0 or "earliest", got ${off}`);
    }
  }
  checkSinceOption(o);
  if (
    o.compress !== undefined && o.compress !== "zstd-stream" && o.compress !== "zstd-dict" &&
    o.compress !== "zstd" && o.compress !== false
  ) {
    throw new TypeError(
      `connect: compress must be "zstd-stream", "zstd-dict", "zstd" or false, got ${
        describe(o.compress)
      }`,
    );
  }
  checkNumber("saveEveryRows", o.saveEveryRows, 1);
  checkNumber("saveEveryMs", o.saveEveryMs, 0);
  checkNumber("connectTimeoutMs", o.connectTimeoutMs, 1);
  checkType("beforeSave", o.beforeSave, "function");
  checkType("reconnect", o.reconnect, "boolean");
  checkType("onReconnect", o.onReconnect, "function");
  checkType("WebSocket", o.WebSocket, "function");
  const backoff: unknown = o.backoff;
  if (backoff !== undefined) {
    if (!isObject(backoff)) {
      throw new TypeError(
        `connect: backoff must be an object {minMs, maxMs}, got ${describe(backoff)}`,
      );
    }
    for (const key of Object.keys(backoff)) {
      if (!BACKOFF_KEYS.has(key)) throw new TypeError(`connect: unknown option backoff.${key}`);
    }
    checkNumber("backoff.minMs", backoff.minMs, 0);
    checkNumber("backoff.maxMs", backoff.maxMs, (backoff.minMs as number | undefined) ?? 0);
  }
  const signal: unknown = o.signal;
  if (signal !== undefined) {
    const s = signal as Partial<AbortSignal> | null;
    if (
      s === null || typeof s !== "object" || typeof s.aborted !== "boolean" ||
      typeof s.addEventListener !== "function" || typeof s.removeEventListener !== "function" ||
      typeof s.throwIfAborted !== "function"
    ) {
      throw new TypeError(`connect: signal must be an AbortSignal, got ${describe(signal)}`);
    }
  }
  const token: unknown = o.token;
  if (token !== undefined) {
    // Neither message quotes the value: it is a secret, typo or not.
    if (typeof token !== "string" && typeof token !== "function") {
      throw new TypeError(`connect: token must be a string or a function, got ${typeof token}`);
    }
    if (typeof token === "string") checkToken(token, "connect");
  }
  const catchUp: unknown = o.catchUp;
  if (catchUp !== undefined && typeof catchUp !== "boolean") {
    if (!isObject(catchUp)) {
      throw new TypeError(
        `connect: catchUp must be a boolean or CatchUpOptions, got ${describe(catchUp)}`,
      );
    }
    checkCatchUpOptions(catchUp, "connect: catchUp");
  }
  checkCursorOption(o.cursor);
  const snapshot: unknown = o.snapshot;
  if (snapshot !== undefined && typeof snapshot !== "boolean") {
    throw new TypeError(`connect: snapshot must be a boolean, got ${describe(snapshot)}`);
  }
  if (snapshot === true && (o.offset !== undefined || o.since !== undefined)) {
    throw new TypeError("connect: snapshot starts at the snapshot: give no offset or since");
  }
  const where: unknown = o.where;
  if (where !== undefined && typeof where !== "string" && !isObject(where)) {
    throw new TypeError(
      `connect: where must be a filter object or its JSON text, got ${describe(where)}`,
    );
  }
  return o;
}

// since: a Date, µs or RFC 3339 text (wire/since.ts), and not with offset.
function checkSinceOption(o: ConnectOptions): void {
  const since: unknown = o.since;
  if (since === undefined) return;
  if (!(since instanceof Date) && typeof since !== "number" && typeof since !== "string") {
    throw new TypeError(
      `connect: since must be a Date, µs since the epoch or RFC 3339 text, got ${describe(since)}`,
    );
  }
  if (o.offset !== undefined) {
    throw new TypeError(`connect: give offset or since, not both (offset ${o.offset})`);
  }
  try {
    sinceMicros(since);
  } catch (err) {
    throw new RangeError(`connect: ${(err as Error).message}`);
  }
}

function hasDeno(): boolean {
  const d = (globalThis as { Deno?: { readTextFile?: unknown } }).Deno;
  return typeof d?.readTextFile === "function";
}

function checkCursorOption(cursor: unknown): void {
  if (cursor === undefined) return;
  if (typeof cursor === "string") {
    if (cursor === "") throw new RangeError(`connect: cursor must be a file path, got ""`);
    if (!hasDeno()) {
      throw new TypeError(
        `connect: cursor ${JSON.stringify(cursor)} is a file path, and files are for Deno ` +
          `(FileCursor); here pass a CursorStore such as LocalStorageCursor or MemoryCursor`,
      );
    }
    return;
  }
  const c = cursor as Partial<CursorStore> | null;
  if (
    c === null || typeof c !== "object" || typeof c.load !== "function" ||
    typeof c.save !== "function"
  ) {
    throw new TypeError(
      `connect: cursor must be a file path (a string) or a CursorStore (an object with load ` +
        `and save methods, such as FileCursor or MemoryCursor), got ${describe(cursor)}`,
    );
  }
}

/** The cursor store for a checked `cursor` option: a path becomes a `FileCursor`. */
async function cursorStore(
  cursor: CursorStore | string | undefined,
): Promise<CursorStore | undefined> {
  if (typeof cursor !== "string") return cursor;
  // A computed specifier, so that a browser bundle leaves the Deno-only
  // module out (it is reached only where Deno exists; see checkCursorOption).
  const spec = "./file_cursor.ts";
  // Typed by hand: a type query on the module would put it in the module graph.
  let mod: { FileCursor: new (path: string) => CursorStore };
  try {
    mod = await import(spec);
  } catch (err) {
    // A program built without the module (`deno compile` embeds only what it can see).
    throw new TypeError(
      `connect: cursor ${JSON.stringify(cursor)} is a file path, but client/file_cursor.ts ` +
        `cannot be loaded here (${err}); pass new FileCursor(path) instead`,
    );
  }
  return new mod.FileCursor(cursor);
}

/**
 * Subscribes to the stream at `url` (`ws://HOST:PORT/NAME`; `http://` works
 * too) and resolves once the server's greeting arrived, so a refusal rejects
 * here with its typed error (`StreamNotFound`, `NotReplayable`, …). Always
 * negotiates batched frames; the subscription splits them. By default it
 * also negotiates `compress=zstd-stream` (see the `compress` option).
 *
 * `options` are checked here, before any socket opens: a wrong type is a
 * `TypeError`, a value out of range a `RangeError`, an unknown key a
 * `TypeError`, each naming the option. `cursor` is a `CursorStore`, or in
 * Deno a file path (a `FileCursor` on it).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { connect, NotReplayable } from "./mod.ts";
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("ticks", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * await stream.send({ v: 1 });
 * try {
 *   await connect(`${server.url}/ticks`, { offset: 99 });
 * } catch (err) {
 *   if (!(err instanceof NotReplayable)) throw err;
 *   equal(err.why, "ahead");
 *   equal(err.endOffset, 2);
 * }
 * const sub = await connect<{ v: number }>(`${server.url}/ticks`, { offset: 1 });
 * for await (const [offset, msg] of sub) {
 *   equal(offset, 1);
 *   equal(msg.v, 1);
 *   break;
 * }
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export function connect<T = unknown>(
  urls: NodeUrls,
  options: ConnectOptions = {},
): Promise<Subscription<T>> {
  return open<T>(urls, options);
}

async function open<T>(urls: NodeUrls, options: ConnectOptions): Promise<Subscription<T>> {
  const u = Array.isArray(urls) || (typeof urls === "string" && urls.includes(","))
    ? nodeUrls(urls).map(checkUrl)
    : [checkUrl(urls as string | URL)];
  const o = checkOptions(options);
  const resolved: SubscriptionOptions = {
    ...o,
    cursor: await cursorStore(o.cursor),
    ...await zstdOptions(o.compress),
  };
  return await Subscription._open<T>(u, resolved);
}

// compress= (§16, §20): the decoders, loaded before any socket opens.
async function zstdOptions(
  compress: ConnectOptions["compress"],
): Promise<
  Pick<SubscriptionOptions, "_zstd" | "_zstdDefault" | "_zstdDict" | "_zstdStream">
> {
  if (compress === false) return { _zstd: null };
  const zstd = await loadZstd();
  if (zstd === null && (compress === "zstd" || compress === "zstd-dict")) {
    throw new TypeError(
      `connect: compress "${compress}" needs a zstd decoder and this runtime has none (no ` +
        `node:zlib zstd); leave compress out or pass "zstd-stream" or false`,
    );
  }
  // By default (after zstd-stream), the dictionary too where its decoder loads.
  const dict = zstd !== null && (compress === undefined || compress === "zstd-dict")
    ? await loadDictZstd()
    : null;
  if (dict === null && compress === "zstd-dict") {
    throw new TypeError(
      `connect: compress "zstd-dict" needs @bokuweb/zstd-wasm, which did not load here`,
    );
  }
  return {
    _zstd: zstd,
    _zstdDefault: compress === undefined,
    _zstdDict: dict,
    _zstdStream: compress === undefined || compress === "zstd-stream",
  };
}
