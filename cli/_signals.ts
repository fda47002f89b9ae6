/**
 * The shutdown signals of `serve` and `demo`: SIGINT/SIGTERM start the shutdown (a second one
 * exits at once). `serve`'s SIGHUP is in `serve/tokens_reloader.ts`.
 *
 * @module
 */

import type { Logger } from "../common/logger.ts";
import { stderrLines } from "../common/stderr_lines.ts";

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
      stderrLines.flush();
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
