/**
 * `serve --tokens`: SIGHUP reloads the tokens file for the requests that follow.
 *
 * @module
 */

import type { Logger } from "../../common/logger.ts";
import { TokenTable } from "../../server/auth.ts";
import type { Server } from "../../server/serve.ts";
import { fileError } from "./fatal.ts";

/**
 * Reloads the tokens file on SIGHUP (not on Windows, which has no SIGHUP).
 * Listening starts at once, so that a SIGHUP during the start is not the
 * default exit; one received before `attach(server)` reloads then. Reloads
 * run one at a time, in signal order. A file that cannot be read or checked
 * keeps the tokens in force and logs why; it never stops the server.
 *
 * @example
 * ```ts
 * import { tokensReloader } from "./tokens_reloader.ts";
 * import { Logger } from "../../common/logger.ts";
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
