/**
 * streamcast: a replayable WebSocket multicaster. One feed in, every row
 * appended to a durable segmented log and only then broadcast to any number of
 * subscribers, each frame carrying its offset, so that a subscriber can leave
 * and come back with no gap and no duplicate.
 *
 * ```ts
 * import { deepStrictEqual, equal } from "node:assert/strict";
 * import { connect, serve, Stream } from "@streamcast/server";
 *
 * const root = await Deno.makeTempDir();
 * const trades = await Stream.open("trades", {
 *   root, // the log lives in ROOT/trades
 *   schema: {
 *     type: "object",
 *     properties: { price: { type: "number" }, side: { type: "integer", format: "int32" } },
 *     required: ["price", "side"],
 *   },
 * });
 * const server = serve([trades], { port: 0, onListen: () => {} });
 * await trades.send({ price: 85565.5, side: 1 }); // durable, then broadcast: offset 1
 *
 * const sub = await connect(`${server.url}/trades`, { offset: 1 });
 * for await (const [offset, msg] of sub) {
 *   equal(offset, 1);
 *   deepStrictEqual(msg, { price: 85565.5, side: 1 });
 *   break;
 * }
 * await server.shutdown();
 * await Deno.remove(root, { recursive: true });
 * ```
 *
 * @module
 */

export * from "./log/mod.ts";
export * from "./client/mod.ts";
export * from "./server/mod.ts";
export * from "./schema/mod.ts";
export * from "./iceberg/mod.ts";
export * from "./common/mod.ts";
// A cursor in a file uses Deno.*, so it is not in client/mod.ts, which runs in browsers too.
export { FileCursor } from "./client/file_cursor.ts";
