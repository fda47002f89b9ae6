/**
 * The listening side of `serve()`: `Deno.serve`, listening again on the same
 * address when its accept loop ends because the process ran out of
 * descriptors.
 *
 * Deno's accept loop (`op_http_serve` in ext/http) ends at the first accept
 * that fails: with EMFILE or ENFILE it drops the listening socket, the
 * server's `finished` rejects with `Deno.errors.Http` ("Too many open files
 * (os error 24)"), and nothing accepts again — unhandled, that rejection
 * ends the process. The connections it had accepted, and the WebSockets
 * upgraded from them, are left alone and keep working. So, as Go's
 * `http.Server` retries a failed `Accept` after a pause, this serves again
 * on the same address at once (closing the old socket freed a descriptor);
 * a listen that fails for lack of descriptors is tried again after 10 ms,
 * doubling up to 1 s. The failures are logged (`accept_failed`) at most
 * once a second, with how many there were since the last line. Connections
 * waiting in the old socket's backlog are reset; clients reconnect. Any
 * other failure of the loop ends the server as before.
 *
 * Every generation shares the caller's abort signal, so aborting it stops
 * the one listening and closes what the earlier ones still serve.
 *
 * @module
 */

import type { Logger } from "../common/logger.ts";

/** The first pause before listening again after a listen failed for lack of descriptors, ms. */
const RELISTEN_FIRST_MS = 10;
/** The longest pause between two tries to listen again, ms. */
const RELISTEN_MAX_MS = 1000;
/** The shortest time between two `accept_failed` lines, ms. */
const LOG_EVERY_MS = 1000;

/** Deno.serve's options as `serve()` uses them (TCP, with or without TLS). */
export type ListenOptions =
  & Deno.ServeTcpOptions
  & Partial<Deno.TlsCertifiedKeyPem>
  & { signal: AbortSignal };

/** A server listening through {@linkcode serveListening}. */
export interface Listening {
  /** The address it listens on (the same for every generation). */
  readonly addr: Deno.NetAddr;
  /**
   * Resolves once the server has stopped (after the signal is aborted);
   * rejects when its accept loop fails for another reason than descriptors.
   */
  readonly finished: Promise<void>;
}

/**
 * Whether `err` (a `Deno.serve` server's `finished` rejection) is an accept
 * that failed for lack of descriptors: EMFILE (os error 24, the process's
 * limit) or ENFILE (os error 23, the system's).
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { outOfDescriptors } from "./listener.ts";
 * equal(outOfDescriptors(new Deno.errors.Http("Error: Too many open files (os error 24)")), true);
 * equal(outOfDescriptors(new Deno.errors.Http("Error: Connection reset (os error 104)")), false);
 * ```
 */
export function outOfDescriptors(err: unknown): boolean {
  return err instanceof Error && /\(os error 2[34]\)/.test(err.message);
}

/**
 * Runs `Deno.serve(options, handler)` and serves again on the same address
 * whenever its accept loop ends for lack of descriptors (see the module
 * doc). `options.onListen` is called once, for the first listen; a later
 * listen logs `relistening` at debug level.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { Logger } from "../common/logger.ts";
 * import { serveListening } from "./listener.ts";
 * const ac = new AbortController();
 * const server = serveListening(
 *   { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen: () => {} },
 *   () => new Response("ok"),
 *   new Logger({ level: "error" }),
 * );
 * equal(await (await fetch(`http://127.0.0.1:${server.addr.port}/`)).text(), "ok");
 * ac.abort();
 * await server.finished;
 * ```
 */
export function serveListening(
  options: ListenOptions,
  handler: Deno.ServeHandler<Deno.NetAddr>,
  logger: Logger,
): Listening {
  const first = Deno.serve(options, handler);
  const addr = first.addr;
  // Later generations listen on the port the first was given (it may have been 0).
  const again: ListenOptions = { ...options, port: addr.port, onListen: () => {} };
  let failures = 0;
  let lastLogMs = -Infinity;
  let lastError = "";
  const report = (err: unknown) => {
    failures++;
    // Deno.errors.Http wraps the runtime's message: "Error: Too many open files (os error 24)".
    lastError = (err instanceof Error ? err.message : String(err)).replace(/^Error: /, "");
    const now = Date.now();
    if (now - lastLogMs < LOG_EVERY_MS) return;
    lastLogMs = now;
    logger.error(
      "accept_failed",
      { error: lastError, failures },
      `streamcast: cannot accept (${lastError}): out of descriptors; listening again` +
        (failures > 1 ? ` (${failures} failures since the last such line)` : ""),
    );
    failures = 0;
  };

  // Waits for `server` to end; serves again while it ends for lack of descriptors.
  async function run(server: Deno.HttpServer<Deno.NetAddr>): Promise<void> {
    while (true) {
      try {
        await server.finished;
        return;
      } catch (err) {
        // Stopping: whatever ended the loop, there is nothing to listen again for.
        if (options.signal.aborted) return;
        if (!outOfDescriptors(err)) throw err;
        report(err);
      }
      const next = await listenAgain();
      if (next === null) return;
      server = next;
    }
  }

  // A new generation, or null once the signal is aborted (the server stopped in between).
  async function listenAgain(): Promise<Deno.HttpServer<Deno.NetAddr> | null> {
    let pauseMs = RELISTEN_FIRST_MS;
    while (true) {
      if (options.signal.aborted) return null;
      try {
        const server = Deno.serve(again, handler);
        logger.debug("relistening", { port: addr.port });
        return server;
      } catch (err) {
        if (!outOfDescriptors(err)) throw err;
        report(err);
      }
      await new Promise((r) => setTimeout(r, pauseMs));
      pauseMs = Math.min(pauseMs * 2, RELISTEN_MAX_MS);
    }
  }

  return { addr, finished: run(first) };
}
