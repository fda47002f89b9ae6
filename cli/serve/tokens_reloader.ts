/**
 * `serve --tokens`, `--jwt-keys`, `--jwt-secret-file`: SIGHUP reloads the
 * tokens file and the signed tokens' keys for the requests that follow.
 *
 * @module
 */

import type { Logger } from "../../common/logger.ts";
import { TokenTable } from "../../server/auth.ts";
import { SignedTokens, type SignedTokensFiles } from "../../server/access/signed_tokens.ts";
import type { Server } from "../../server/serve.ts";
import { fileError } from "./fatal.ts";

/** What SIGHUP reloads: the tokens file, the signed tokens' key files (null: not served). */
export interface ReloadSources {
  /** `--tokens`. */
  tokens: string | null;
  /** `--jwt-keys`, `--jwt-secret-file` and what goes with them. */
  jwt: SignedTokensFiles | null;
}

/**
 * Reloads the tokens file and the signed tokens' keys on SIGHUP (not on
 * Windows, which has no SIGHUP). Listening starts at once, so that a SIGHUP
 * during the start is not the default exit; one received before
 * `attach(server)` reloads then. Reloads run one at a time, in signal
 * order. A file that cannot be read or checked keeps what was loaded from
 * it in force and logs why; it never stops the server. Each source is
 * reloaded on its own: a bad key file does not hold back a good tokens file.
 *
 * @example
 * ```ts
 * import { tokensReloader } from "./tokens_reloader.ts";
 * import { Logger } from "../../common/logger.ts";
 * const reloader = tokensReloader({ tokens: "tokens.json", jwt: null }, () => Logger.silent());
 * await reloader.remove(); // before any server: nothing was reloaded
 * ```
 */
export function tokensReloader(
  sources: ReloadSources,
  logger: () => Logger,
): { attach(server: Server): void; remove(): Promise<void> } {
  let server: Server | null = null;
  let pending = false;
  let chain = Promise.resolve();
  const reloadTokens = async (path: string, log: Logger) => {
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
  };
  const reloadKeys = async (files: SignedTokensFiles, log: Logger) => {
    const names = [files.keys, files.secret].filter((f) => f !== null).join(", ");
    try {
      const keys = await SignedTokens.load(files);
      server!.setSignedTokens(keys);
      log.info(
        "jwt_keys_reloaded",
        { files: names, keys: keys.size },
        `streamcast serve: reloaded ${names}: ${keys.size} key${keys.size === 1 ? "" : "s"}`,
      );
    } catch (err) {
      // SignedTokens.load's own errors name the file and never quote a secret.
      const why = err instanceof TypeError
        ? err.message
        : `cannot read ${names}: ${fileError(err)}`;
      log.error(
        "jwt_keys_reload_failed",
        { files: names, error: why },
        `streamcast serve: SIGHUP: ${why}; the keys loaded before stay in force`,
      );
    }
  };
  const reload = () => {
    chain = chain.then(async () => {
      const log = logger();
      if (sources.tokens !== null) await reloadTokens(sources.tokens, log);
      if (sources.jwt !== null) await reloadKeys(sources.jwt, log);
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
