/**
 * Handler modules (`serve --handler MODULE.ts`): the default export turns one
 * upstream frame into rows.
 *
 * @module
 */

import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { errorMessage } from "./_feeder.ts";

/**
 * Turns one upstream text frame into a row, an array of rows (sent in order),
 * or null (skip the frame). May be async; a throw or rejection rejects that
 * frame. Returning `undefined` is a reject too (most likely a missing
 * `return`): return null to skip.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import type { FrameHandler } from "./handler.ts";
 * const handler: FrameHandler = (frame) => {
 *   const msg = JSON.parse(frame);
 *   return msg.type === "heartbeat" ? null : msg.trades;
 * };
 * equal(handler('{"type":"heartbeat"}'), null);
 * ```
 */
export type FrameHandler = (frame: string) => unknown | Promise<unknown>;

/**
 * Loads the default export of the handler module at `modulePath` (a file path,
 * relative to the working directory, or a URL). Throws an `Error` naming the
 * module if it cannot be imported, and a `TypeError` if it has no default
 * export or that export is not a function.
 *
 * @example
 * ```ts
 * import { type FrameHandler, loadHandler } from "./handler.ts";
 *
 * // feed.ts: `export default (frame: string) => JSON.parse(frame).trades ?? null;`
 * export async function handlerFromFlag(modulePath: string): Promise<FrameHandler> {
 *   try {
 *     return await loadHandler(modulePath);
 *   } catch (error) {
 *     console.error(`streamcast: ${(error as Error).message}`);
 *     Deno.exit(2);
 *   }
 * }
 * ```
 */
export async function loadHandler(modulePath: string): Promise<FrameHandler> {
  const isUrl = /^[a-zA-Z][a-zA-Z0-9+.-]+:/.test(modulePath) && !/^[a-zA-Z]:[\\/]/.test(modulePath);
  const specifier = isUrl ? modulePath : pathToFileURL(resolve(modulePath)).href;
  let mod: Record<string, unknown>;
  try {
    mod = await import(specifier);
  } catch (error) {
    throw new Error(`Cannot load handler module ${modulePath}: ${errorMessage(error)}`, {
      cause: error,
    });
  }
  if (!("default" in mod)) {
    const names = Object.keys(mod);
    throw new TypeError(
      `Cannot use handler module ${modulePath}: it has no default export ` +
        `(it exports ${names.length > 0 ? names.join(", ") : "nothing"}); ` +
        `export default a function (frame: string) => row | row[] | null`,
    );
  }
  if (typeof mod.default !== "function") {
    throw new TypeError(
      `Cannot use handler module ${modulePath}: its default export is ` +
        `${mod.default === null ? "null" : `a ${typeof mod.default}`}, not a function`,
    );
  }
  return mod.default as FrameHandler;
}
