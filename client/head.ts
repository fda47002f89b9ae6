/**
 * A stream's head over HTTP (`GET /{name}/head`, `/_/head` for the unnamed
 * stream): its end offset, earliest offset, stream id, subscribers and schema.
 * Web APIs only (`fetch`).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { headUrl } from "./head.ts";
 * equal(headUrl("ws://127.0.0.1:8765/trades"), "http://127.0.0.1:8765/trades/head");
 * equal(headUrl("ws://127.0.0.1:8765/"), "http://127.0.0.1:8765/_/head");
 * ```
 *
 * @module
 */

import { StreamNotFound } from "./errors.ts";
import type { StreamHead } from "../wire/subscribe.ts";

/**
 * The head URL of a stream URL: `ws://` becomes `http://` (`wss://`,
 * `https://`), the path gets `/head` (`/_/head` for the unnamed stream), and
 * the query is dropped.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { headUrl } from "./head.ts";
 * equal(headUrl("wss://example.com/trades?offset=5"), "https://example.com/trades/head");
 * ```
 */
export function headUrl(url: string | URL): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`not a URL: ${JSON.stringify(String(url))}`);
  }
  if (u.protocol === "ws:") u.protocol = "http:";
  else if (u.protocol === "wss:") u.protocol = "https:";
  else if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new TypeError(`a stream URL is ws://, wss://, http:// or https://, got ${u}`);
  }
  const name = u.pathname.replace(/^\/+|\/+$/g, "");
  if (name.includes("/")) {
    throw new TypeError(
      `a stream URL's path is /NAME (or / for the unnamed stream), got ${u.pathname}`,
    );
  }
  u.pathname = name === "" || name === "_" ? "/_/head" : `/${name}/head`;
  u.search = "";
  u.hash = "";
  return u.toString();
}

/**
 * Fetches a stream's head. Rejects with {@linkcode StreamNotFound} on a 404,
 * and with an `Error` naming the status for any other failure.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { fetchHead } from "./head.ts";
 * import { serve, Stream } from "../mod.ts";
 * const stream = Stream.ephemeral("ticks", {
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * const head = await fetchHead(`ws://127.0.0.1:${server.addr.port}/ticks`);
 * equal(head.durable, false);
 * equal(head.end_offset, null);
 * await server.shutdown();
 * ```
 */
export async function fetchHead(
  url: string | URL,
  init: { signal?: AbortSignal; headers?: HeadersInit } = {},
): Promise<StreamHead> {
  const at = headUrl(url);
  const res = await fetch(at, { signal: init.signal, headers: init.headers });
  const text = await res.text();
  if (res.status === 404) {
    const name = new URL(at).pathname.split("/")[1];
    throw new StreamNotFound(
      name === "_" ? "" : decodeURIComponent(name),
      String(url),
      text.trim(),
      null,
    );
  }
  if (!res.ok) {
    throw new Error(
      `GET ${at} answered ${res.status} ${res.statusText}: ${text.trim().slice(0, 200)}`,
    );
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`GET ${at} did not answer JSON: ${JSON.stringify(text.slice(0, 80))}`);
  }
}
