/**
 * HTTP GETs bounded by progress, not by a total deadline: the answer's
 * headers must come within `idleMs`, and then each piece of its body within
 * `idleMs` of being asked for. A large chunk at a modest bandwidth takes as
 * long as it needs; a primary that stops sending fails the request after
 * `idleMs` of silence. Time the reader spends on what it got (writing it to
 * disk) is not counted: the clock runs only while a piece is awaited.
 *
 * @module
 */

/** Options of {@linkcode progressGet}. */
export interface ProgressGetOptions {
  /** Headers to send (the bearer token). */
  headers: HeadersInit;
  /** The fetch to use. */
  fetch: typeof fetch;
  /** Aborts the request whatever its progress (the mirror closing). */
  signal: AbortSignal;
  /** Longest wait for the headers, then for each piece of the body, ms. */
  idleMs: number;
}

/**
 * GETs `url`; the response's body errors once a piece of it has been awaited
 * for `idleMs` (see the module doc). The headers are awaited the same way.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { progressGet } from "./_progress_get.ts";
 * const ac = new AbortController();
 * const server = Deno.serve({ port: 0, signal: ac.signal, onListen() {} }, () => new Response("hi"));
 * const res = await progressGet(`http://127.0.0.1:${server.addr.port}/`, {
 *   headers: {}, fetch, signal: ac.signal, idleMs: 5000,
 * });
 * equal(await res.text(), "hi");
 * ac.abort();
 * await server.finished;
 * ```
 */
export async function progressGet(url: string, options: ProgressGetOptions): Promise<Response> {
  const { idleMs } = options;
  const stalled = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const wait = (what: string) => {
    timer = setTimeout(() => {
      stalled.abort(new Error(`GET ${url}: no ${what} for ${idleMs} ms`));
    }, idleMs);
  };
  const stop = () => clearTimeout(timer);
  const signal = AbortSignal.any([options.signal, stalled.signal]);
  wait("answer");
  let res: Response;
  try {
    res = await options.fetch(url, { headers: options.headers, signal });
  } catch (err) {
    throw signal.reason ?? err;
  } finally {
    stop();
  }
  if (res.body === null) return res;
  const reader = res.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      wait("bytes");
      try {
        // The request's signal errors its body when it aborts (fetch's rule),
        // though a piece fetch already holds may still come first: checked here.
        if (signal.aborted) throw signal.reason;
        const { done, value } = await reader.read();
        if (signal.aborted) throw signal.reason;
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (err) {
        reader.cancel().catch(() => {});
        controller.error(signal.aborted ? signal.reason : err);
      } finally {
        stop();
      }
    },
    cancel(reason) {
      stop();
      return reader.cancel(reason);
    },
    // No read ahead: a piece is asked for only when the reader wants one, so
    // the clock never runs while the reader is busy with the last.
  }, { highWaterMark: 0 });
  return new Response(body, {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
  });
}

/**
 * Reads a body whole, refusing one of more than `maxBytes` once that many have
 * come (the rest is not read): `RangeError` naming `what` and the bound.
 *
 * @example
 * ```ts
 * import { equal, rejects } from "node:assert/strict";
 * import { readBounded } from "./_progress_get.ts";
 * equal((await readBounded(new Response("abc").body, 3, "x")).length, 3);
 * await rejects(readBounded(new Response("abcd").body, 3, "x"), RangeError);
 * ```
 */
export async function readBounded(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
  what: string,
): Promise<Uint8Array> {
  if (body === null) return new Uint8Array(0);
  const pieces: Uint8Array[] = [];
  let size = 0;
  for await (const piece of body) {
    size += piece.length;
    if (size > maxBytes) {
      // Leaving the loop cancels the body: nothing more is read.
      throw new RangeError(`${what} is over ${maxBytes} bytes`);
    }
    pieces.push(piece);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
