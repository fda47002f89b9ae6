/**
 * The streamcast client: the wire contract (frames, close codes, refusals)
 * shared with the server, usable from Deno and from browsers.
 *
 * ```ts
 * import { parseSubscribeQuery } from "@streamcast/server/client";
 * const q = parseSubscribeQuery(new URLSearchParams("offset=earliest"));
 * console.log(q.ok && q.value.offset); // earliest
 * ```
 *
 * @module
 */

export * from "./wire.ts";
