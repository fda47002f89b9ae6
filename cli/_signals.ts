/**
 * The signals of `serve` and `demo`: SIGINT/SIGTERM start the shutdown (a second one exits
 * at once), and SIGHUP reloads the tokens file.
 *
 * @module
 */

import type { Logger } from "../common/logger.ts";
import { TokenTable } from "../server/auth.ts";
import type { Server } from "../server/serve.ts";
import { fileError } from "./_serve_fatal.ts";

/**
 * Reloads the tokens file on SIGHUP (not on Windows, which has no SIGHUP).
 * Listening starts at once, so that a SIGHUP during the start is not the
 * default exit; one received before `attach(server)` reloads then. Reloads
 * run one at a time, in signal order. A file that cannot be read or checked
 * keeps the tokens in force and logs why; it never stops the server.
 *
 * @example
 * ```ts
 * import { tokensReloader } from "./_signals.ts";
 * import { Logger } from "../common/logger.ts";
 * const reloader = tokensReloader("tokens.json", () => Logger.silent());
 * await reloader.remove(); // before any server: nothing was reloaded
 * ```
 */
export function tokensReloader(
  path: string,
  logger: () => Logger,
): { attach(server: Server): void; remove(): Promise<void> } {
  let server: Server | null = null;
  let pending = false;
  let chain = Promise.resolve();
  const reload = () => {
    chain = chain.then(async () => {
      const log = logger();
      try {
        const table = await TokenTable.load(path);
        server!.setTokens(table);
        log.info(
          "tokens_reloaded",
          { file: path, tokens: table.size },
          `streamcast serve: reloaded ${path}: ${table.size} token${table.size === 1 ? "" : "s"}`,
        );
      } catch (err) {
        // TokenTable.load's own errors name the file and never quote a token.
        const why = err instanceof TypeError
          ? err.message
          : `cannot read tokens file ${path}: ${fileError(err)}`;
        log.error(
          "tokens_reload_failed",
          { file: path, error: why },
          `streamcast serve: SIGHUP: ${why}; the tokens loaded before stay in force`,
        );
      }
    });
  };
  const listener = () => {
    if (server === null) pending = true;
    else reload();
  };
  const listening = Deno.build.os !== "windows";
  if (listening) Deno.addSignalListener("SIGHUP", listener);
  return {
    attach(s) {
      server = s;
      if (pending) reload();
    },
    async remove() {
      if (listening) Deno.removeSignalListener("SIGHUP", listener);
      await chain;
    },
  };
}

/**
 * Resolves with the name of the first of `signals` received; `remove()` stops listening.
 * The first signal logs `shutdown` (`streamcast COMMAND: SIG received; shutting down`),
 * a second one `exit` and exits 1 at once. `serve` and `demo` both use it.
 *
 * @example
 * ```ts
 * import { onSignals } from "./_signals.ts";
 * import { Logger } from "../common/logger.ts";
 * const signals = onSignals(["SIGINT"], () => Logger.silent());
 * signals.remove();
 * ```
 */
export function onSignals(
  signals: Deno.Signal[],
  logger: () => Logger,
  command = "serve",
): { received: Promise<Deno.Signal>; remove(): void } {
  let resolve!: (sig: Deno.Signal) => void;
  const received = new Promise<Deno.Signal>((r) => (resolve = r));
  let count = 0;
  const listeners = signals.map((sig) => {
    const listener = () => {
      if (++count === 1) {
        // Printed here, not after an await: a second signal may follow at once.
        logger().info(
          "shutdown",
          { signal: sig },
          `streamcast ${command}: ${sig} received; shutting down`,
        );
        return resolve(sig);
      }
      // A second signal is the way out of a shutdown that hangs (a stuck disk).
      logger().warn(
        "exit",
        { signal: sig, code: 1 },
        `streamcast ${command}: ${sig} again; exiting without waiting`,
      );
      Deno.exit(1);
    };
    Deno.addSignalListener(sig, listener);
    return [sig, listener] as const;
  });
  return {
    received,
    remove() {
      for (const [sig, listener] of listeners) Deno.removeSignalListener(sig, listener);
    },
  };
}
