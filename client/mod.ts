/**
 * The streamcast client, for Deno and browsers: {@linkcode connect} to a
 * stream and iterate `[offset, msg]` pairs, replay then live, with typed
 * errors for refusals, cursors to resume where a consumer stopped, and
 * optional reconnects. Also the wire contract (frames, close codes, refusals)
 * shared with the server.
 *
 * Everything exported here uses web APIs only. The Deno file cursor is in
 * `client/file_cursor.ts` (`FileCursor`).
 *
 * ```ts
 * import { connect, NotReplayable } from "./mod.ts"; // "@streamcast/server/client"
 * // A server to talk to (normally another process: `cli.ts serve`).
 * import { serve, Stream } from "../mod.ts";
 * const root = await Deno.makeTempDir();
 * const stream = await Stream.open("ticks", {
 *   root,
 *   schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
 * });
 * const server = serve([stream], { port: 0, onListen: () => {} });
 * await stream.sendMany([{ v: 1 }, { v: 2 }]);
 *
 * const sub = await connect(`${server.url}/ticks`, { offset: "earliest" });
 * for await (const [offset, msg] of sub) {
 *   console.log(offset, msg); // 1 { v: 1 }, then 2 { v: 2 }
 *   if (offset === 2) break;
 * }
 * await connect(`${server.url}/ticks`, { offset: 10 }).catch((err) => {
 *   if (err instanceof NotReplayable) console.log(err.why); // ahead
 * });
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 *
 * @module
 */

export * from "./wire.ts";
export * from "./errors.ts";
export * from "./cursor.ts";
export * from "./connect.ts";
export * from "./head.ts";
export * from "./catch_up.ts";
